"""The pubsub benchmark: workload file round trip, parse errors, exact matching, one JSON object."""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import pubsub
from topologies.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("engine", ["dynamic", "multi"])
def test_matcher_equals_brute_force_including_missing_attributes(tmp_path, engine):
    path = tmp_path / "w.txt"
    path.write_text("3 3 3 10\n1 0 2 5\n2 0 0 9 2 3 3\n0\n1 0 5\n2 0 2 2 3\n1 1 7\n")
    workload = pubsub.read_workload(path)
    indptr, indices = pubsub.build(engine, *pubsub.constraint_table(workload)).match_csr(pubsub.event_columns(workload))
    got = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(3)]
    assert got == [[0, 2], [0, 1, 2], [2]]
    assert got == [pubsub.brute_force(workload, e) for e in workload.events]


def test_the_constraint_table_is_the_subscriptions_predicates():
    workload = small_workload()
    labels, table = pubsub.constraint_table(workload)
    rebuilt = [pubsub.predicate_of(sub) for sub in workload.subs]
    from matcher._eval_boxes import BoxTable

    expected = BoxTable.of(rebuilt)
    assert labels[:2] == ["s0", "s1"] and table.dims == expected.dims
    for key in ("owner", "lo", "hi", "lo_closed", "hi_closed"):
        np.testing.assert_array_equal(getattr(table, key), getattr(expected, key))


@pytest.mark.parametrize(
    ("text", "message"),
    [("1 0 2\n", ":1: expected"), ("1 0 2 9\n2 0 1 2\n", ":2: count"), ("1 0 2 9\n1 5 1 2\n", ":2: attributes")],
)
def test_bad_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        pubsub.read_workload(path)


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    pubsub.configure(parser)
    return parser.parse_args(argv)


def test_json_output_is_one_verified_object(tmp_path, capsys):
    out = tmp_path / "gen.txt"
    args = parse(
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
            "--churn",
            "40",
            "--repeat",
            "1",
        ]
    )
    assert pubsub.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["subs"] == 300 and result["events"] == 50 and result["verified"] is True
    assert result["mean_matches"] > 0 and result["mean_match_ms"] > 0 and result["build_s"] > 0
    assert result["churn"] == 40 and result["after_churn_equals_rebuild"] is True
    assert result["insert_ms_mean"] > 0 and result["delete_ms_mean"] > 0 and result["table_kib"] > 0
    assert result["rivals"] == {}
    assert pubsub.read_workload(out).atts == 8


def fake_rival(tmp_path, offset):
    """A stand-in for a built rival driver: reads the workload, prints the driver's JSON with the brute-force
    match counts (plus ``offset`` on the first event)."""
    script = tmp_path / f"rival{offset}"
    script.write_text(
        "#!" + sys.executable + "\n"
        "import json, sys\n"
        "sys.path.insert(0, " + repr(str(ROOT)) + ")\n"
        "from bench import pubsub\n"
        "w = pubsub.read_workload(sys.argv[1])\n"
        "counts = [len(pubsub.brute_force(w, e)) for e in w.events]\n"
        f"counts[0] += {offset}\n"
        "print(json.dumps({'name': 'fake', 'build_s': 0.01, 'insert_ms': 0.001, 'match_ms': 0.5,\n"
        "    'rss_loaded_kib': 1000, 'peak_rss_kib': 3000, 'matches': counts}))\n"
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("offset", [0, 1])
def test_a_rival_runs_on_the_same_file_and_its_matches_are_compared(tmp_path, capsys, offset):
    rival = fake_rival(tmp_path, offset)
    small = ["--subs", "200", "--atts", "6", "--cons", "3", "--dom", "100", "--pubs", "20", "--churn", "10"]
    assert pubsub.main(parse([*small, "--repeat", "2", "--rival", f"rein={rival}"])) == 0
    text = capsys.readouterr().out
    assert f"events whose match count differs from rein's: {offset} of 20" in text
    assert "goals against Rein (same run):" in text and "match <= 0.5x Rein's time" in text
    assert pubsub.main(parse(["--json", *small, "--repeat", "1", "--rival", f"tama={rival}"])) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["rivals"]["tama"]["grown_kib"] == 2000 and result["rivals"]["tama"]["match_ms"] == 0.5


def test_without_a_rival_the_comparison_is_skipped_with_a_message(capsys):
    small = ["--subs", "50", "--atts", "4", "--cons", "2", "--dom", "50", "--pubs", "5", "--churn", "5"]
    assert pubsub.main(parse([*small, "--repeat", "1"])) == 0
    assert "rivals: skipped (give --rival rein=PATH" in capsys.readouterr().out
    with pytest.raises(InputError, match="--rival"):
        pubsub.main(parse([*small, "--rival", "rein=/nonexistent/driver"]))
