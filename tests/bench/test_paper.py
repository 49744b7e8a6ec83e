"""``bench paper``: its experiments measure what they say on small inputs, its verdicts follow their stated
rules, and the whole command writes every table, figure and verdict (slow)."""

import argparse
import json

import pytest

from bench import paper, paper_claims, paper_evaluation, paper_matching
from bench.matching import make_pairs


def test_matching_sweeps_time_every_algorithm_and_profile_the_index():
    base = paper_matching.base_setting(4, 2, seed=3)
    rows = paper_matching.sweep(base, "stream_size", (10, 60), ("HSR+QC", "EM-DFS+QC", "EM-DFS+I", "EM-BFS+I*"), 1)
    assert [row["point"] for row in rows] == [10, 60]
    assert rows[0]["truth"] is not None and rows[1]["truth"] is None  # the brute force stops at 50 boxes
    for row in rows:
        found = {name: r["matches"] for name, r in row["algorithms"].items()}
        assert found["EM-DFS+QC"] == found["EM-DFS+I"] == found["EM-BFS+I*"] >= found["HSR+QC"]
        assert all(r["ms_per_pair"] > 0 for r in row["algorithms"].values())
        assert 0 <= row["index"]["holding_share"] <= row["index"]["overlap_share"] <= 1
        assert row["index"]["overlap_share"] > 0
        assert row["index"]["build_ms_rtree"] > 0 and row["index"]["build_ms_rstar"] > 0
    assert rows[0]["truth"] == rows[0]["algorithms"]["EM-DFS+QC"]["matches"]


def test_memory_count_test_and_table7():
    base = paper_matching.base_setting(6, 2, seed=1)
    (row,) = paper_matching.peak_memory(base, (20,), every=3)
    assert all(row[f"EM-{s}"]["max_kib"] >= row[f"EM-{s}"]["mean_kib"] > 0 for s in ("BFS", "DFS", "MIX"))
    count = paper_matching.count_test(6, 2, seed=1)
    assert count["pairs"] == 12 and count["matches"]["HSR"] == 0
    assert all(count["matches"][n] == count["truth"] for n in count["matches"] if n.startswith("EM"))
    chain = paper_matching.table7(seed=1)["selectivity"]
    assert chain["HSR"] == chain["HSR+QC"] == chain["EM-DFS+QC"]
    assert all(h >= e - 1e-12 for h, e in zip(chain["HCR"], chain["EM-DFS+QC"], strict=True))


def test_an_evaluation_case_times_every_method_on_the_same_answers():
    case = paper_evaluation.evaluate_case(
        dict(paper_evaluation.DEFAULTS), items=30_000, seed=2, budget_s=0.01, repeat=1
    )
    assert set(case["methods"]) == set(paper_evaluation.METHODS)
    assert 0.005 < case["measured_selectivity"] < 0.02
    se, ie = case["methods"]["SE"], case["methods"]["IE"]
    assert se["tests_per_item"] > 10 * ie["tests_per_item"]  # misses leave the index at its root
    assert case["methods"]["IE+SC"]["tests_per_item"] <= ie["tests_per_item"]
    assert all(m["timed_items"] >= paper_evaluation.CHECKED_ITEMS for m in case["methods"].values())


def case(selectivity, se_tests, ie_tests, se_rate, ie_rate, overlap=0.5):
    methods = {"SE": {"items_per_s": se_rate, "tests_per_item": se_tests}}
    for name in ("IE", "IE+SC"):
        methods[name] = {"items_per_s": ie_rate, "tests_per_item": ie_tests}
    return {"selectivity": selectivity, "overlap": overlap, "methods": methods}


def test_the_crossover_is_where_se_overtakes_the_index():
    cases = [case(0.1, 90, 5, 1, 5), case(0.5, 60, 15, 1, 2), case(0.9, 30, 25, 1, 0.5)]
    assert paper_claims.crossover(cases, "IE") == pytest.approx(0.5 + 0.4 * (200 - 100) / (200 - 50))
    assert paper_claims.crossover(cases[:2], "IE") is None
    # by counted tests at 3 SE tests per tree test: 90/15 = 600 %, 60/45 = 133 %, 30/75 = 40 %
    high = 400 / 3
    assert paper_claims.crossover(cases, "IE", factor=3.0) == pytest.approx(0.5 + 0.4 * (high - 100) / (high - 40))


def test_table8_cost_factor_is_work_over_relative_throughput():
    cases = [case(s, 100, 10, 1, 5, o) for s in (0.1, 0.75) for o in (0, 0.15, 0.25, 0.3, 0.5)]
    factors = paper_claims.table8_cost_factor(cases)
    assert factors["IE"]["ours"] == pytest.approx(2.0)  # 10x fewer tests, 5x the throughput
    expected = sorted(
        10 * 100 / p for p in (*paper_claims.TABLE8_PAPER["IE"][0.1], *paper_claims.TABLE8_PAPER["IE"][0.75])
    )
    assert factors["IE"]["paper"] == pytest.approx((expected[4] + expected[5]) / 2)


@pytest.mark.slow
def test_the_whole_command_writes_every_figure_table_and_verdict(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    paper.configure(parser)
    out = tmp_path / "paper"
    args = parser.parse_args(["--quick", "--out", str(out), "--items", "50000"])
    assert paper.main(args) == 0
    text = capsys.readouterr().out
    for heading in ("Figures 9 and 12", "Figure 15", "Table 7", "count test", "Figure 16", "Figure 18", "Table 8"):
        assert heading in text
    results = json.loads((out / "results.json").read_text())
    verdicts = results["verdicts"]
    assert {v["verdict"] for v in verdicts} <= {"agrees", "partly", "disagrees", "met", "not met"}
    assert {v["experiment"] for v in verdicts} >= {"Fig 9", "Fig 15", "Table 7", "Count test", "Fig 17", "Table 8"}
    figures = {p.name for p in out.glob("*.png")}
    assert {f"fig{n:02d}.png" for n in range(9, 19)} <= figures and "em-memory.png" in figures


def test_pairs_are_those_of_the_matching_benchmark():
    base = paper_matching.base_setting(3, 2, seed=9)
    assert len(make_pairs(base)) == 6


def test_the_command_runs_end_to_end_on_tiny_sweeps(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(paper_matching, "SWEEPS", {"dims": (2, 3), "query_size": (1, 2), "stream_size": (4, 8)})
    monkeypatch.setattr(paper_matching, "LARGE_POINTS", (10, 50))
    monkeypatch.setattr(paper_matching, "MEMORY_POINTS", (10, 50))
    sweeps = {"dims": (1, 3), "boxes_n": (10, 40), "selectivity": (0.01, 0.5, 1.0)}
    monkeypatch.setattr(paper_evaluation, "SWEEPS", sweeps)
    monkeypatch.setattr(paper_evaluation, "CLAIM_OVERLAPS", (0.0,))
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    paper.configure(parser)
    out = tmp_path / "paper"
    argv = ["--out", str(out), "--pairs-query", "3", "--pairs-stream", "2", "--items", "3000", "--budget", "0.001"]
    # the figures take most of the time; the slow test above draws them
    assert paper.main(parser.parse_args([*argv, "--no-plots"])) == 0
    text = capsys.readouterr().out
    assert "Table 8" in text and "verdicts: " in text
    results = json.loads((out / "results.json").read_text())
    assert len(results["verdicts"]) >= 20 and len(results["evaluation"]["table8"]) == 10
    assert not list(out.glob("*.png"))
