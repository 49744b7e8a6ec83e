"""The pubsub benchmark: workload file round trip, parse errors, exact matching, one JSON object."""

import argparse
import json

import pytest

from bench import pubsub
from topologies.errors import InputError


def small_workload():
    return pubsub.generate(subs=60, atts=6, cons=3, width=0.5, dom=40, pubs=30, seed=5)


def test_write_then_read_gives_the_same_workload(tmp_path):
    workload = small_workload()
    path = tmp_path / "w.txt"
    pubsub.write_workload(path, workload)
    assert path.read_text().split("\n")[0] == "60 30 6 40"
    assert pubsub.read_workload(path) == workload


def test_generated_subscriptions_follow_the_parameters():
    workload = small_workload()
    for sub in workload.subs:
        assert len({a for a, _, _ in sub}) == 3
        assert all(hi - lo == 20 and 0 <= lo < 20 for _, lo, hi in sub)
    assert all(sorted(a for a, _ in e) == list(range(6)) for e in workload.events)


def test_matcher_equals_brute_force_including_missing_attributes(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("3 3 3 10\n1 0 2 5\n2 0 0 9 2 3 3\n0\n1 0 5\n2 0 2 2 3\n1 1 7\n")
    workload = pubsub.read_workload(path)
    indptr, indices = pubsub.matcher_of(workload).match_csr(pubsub.event_columns(workload))
    got = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(3)]
    assert got == [[0, 2], [0, 1, 2], [2]]
    assert got == [pubsub.brute_force(workload, e) for e in workload.events]


@pytest.mark.parametrize(
    ("text", "message"),
    [("1 0 2\n", ":1: expected"), ("1 0 2 9\n2 0 1 2\n", ":2: count"), ("1 0 2 9\n1 5 1 2\n", ":2: attributes")],
)
def test_bad_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        pubsub.read_workload(path)


def test_json_output_is_one_verified_object(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    pubsub.configure(parser)
    out = tmp_path / "gen.txt"
    args = parser.parse_args(
        [
            "--json",
            "--subs",
            "300",
            "--atts",
            "8",
            "--cons",
            "3",
            "--dom",
            "100",
            "--pubs",
            "50",
            "--write",
            str(out),
            "--verify",
            "50",
        ]
    )
    assert pubsub.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["subs"] == 300 and result["events"] == 50 and result["verified"] is True
    assert result["mean_matches"] > 0 and result["mean_match_ms"] > 0
    assert pubsub.read_workload(out).atts == 8
