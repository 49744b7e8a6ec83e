"""Sweeps: the grid of points, the tidy CSV agreeing with single runs, the confidence intervals, resuming,
validation before any work, and the command line with a sweep file."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports.report import assemble_report
from reports.simulate import simulate
from reports.sweep import SweepOptions, SweepSpec, check_out_dir, parse_values, run_sweep, vary_option
from reports.sweep_plots import aggregate, interval, sweep_markdown
from topologies.errors import InputError
from topologies.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")
SPEC = SweepSpec(FIGURE1, (("seed", (1, 2, 3)), ("subscriptions[1].at", (5, 15))), (), ("query-shipping", "sharing-em"))


def test_values_of_a_varied_key():
    assert parse_values("seed", "1..5") == (1, 2, 3, 4, 5)
    assert parse_values("x", "100,200, 0.5") == (100, 200, 0.5)
    assert parse_values("x", "[1, 2],[3,4],{a: 1}") == ([1, 2], [3, 4], {"a": 1})
    assert parse_values("x", "poisson,waves") == ("poisson", "waves")
    assert vary_option("subscriptions=10,20") == ("subscriptions", (10, 20))
    for text, message in [("5..1", "empty range"), ("1,,2", "an empty value"), ("0..99999", "100,000 values, over")]:
        with pytest.raises(InputError, match=message):
            parse_values("seed", text)
    with pytest.raises(InputError, match="expected KEY=VALUES"):
        vary_option("seed")


def test_the_interval_is_students_t():
    mean, half, n = interval([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and half == pytest.approx(4.302653 / 3**0.5, rel=1e-6)
    assert interval([7.0]) == (7.0, 0.0, 1)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    return out, run_sweep(SPEC, SweepOptions(out=str(out), jobs=2))


def test_the_csv_has_one_row_per_point_strategy_and_metric_and_matches_single_runs(swept):
    out, result = swept
    assert (result.points, result.ran, result.reused) == (6, 6, 0)
    with open(out / "sweep.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["seed", "subscriptions[1].at", "strategy", "metric", "value"]
    metrics = {r["metric"] for r in rows}
    assert "saving_vs_query_shipping" in metrics and "vs_ideal_bytes" not in metrics  # ideal did not run
    assert len(rows) == 6 * 2 * len(metrics) == len(result.rows)
    # one point recomputed on its own
    scenario = load_scenario(FIGURE1, [("seed", 2), ("subscriptions[1].at", 15)])
    entries, _, _ = simulate(scenario, ["query-shipping", "sharing-em"], _local(), show_progress=False)
    report = assemble_report(scenario, entries, "local")
    found = {
        (r["strategy"], r["metric"]): r["value"] for r in rows if (r["seed"], r["subscriptions[1].at"]) == ("2", "15")
    }
    for name in ("query-shipping", "sharing-em"):
        assert int(found[(name, "backbone_bytes")]) == report["strategies"][name]["backbone_bytes"]
        assert float(found[(name, "latency_p99_s")]) == report["strategies"][name]["latency_s"]["p99"]
        assert found[(name, "exact")] == "1"
    assert {p.name for p in out.iterdir()} >= {"sweep.csv", "sweep.md", "sweep.json", "points", "backbone_bytes.png"}
    assert len(os.listdir(out / "points")) == 6
    text = (out / "sweep.md").read_text()
    assert "Varied: `seed` = 1, 2, 3; `subscriptions[1].at` = 5, 15." in text and " ± " in text


def _local():
    from peers.local import run_local

    return run_local


def test_a_sweep_run_again_resumes_and_runs_only_what_is_missing(swept):
    out, _ = swept
    before = (out / "sweep.csv").read_text()
    again = run_sweep(SPEC, SweepOptions(out=str(out), plots=False))
    assert (again.ran, again.reused) == (0, 6) and (out / "sweep.csv").read_text() == before
    (out / "points" / "seed=3,subscriptions[1].at=5.json").unlink()
    more = SweepSpec(SPEC.scenario, (("seed", (1, 2, 3, 4)), SPEC.vary[1]), SPEC.fixed, SPEC.strategies)
    grown = run_sweep(more, SweepOptions(out=str(out), plots=False, jobs=1))
    assert (grown.points, grown.ran, grown.reused) == (8, 3, 5)


def test_every_point_is_checked_before_anything_runs_or_is_written(tmp_path):
    spec = SweepSpec(FIGURE1, (("streams[0].rate", (10, -1)),))
    with pytest.raises(InputError) as info:
        run_sweep(spec, SweepOptions(out=str(tmp_path / "out")))
    assert "streams[0].rate: must be positive, got -1" in str(info.value)
    assert "(at the sweep point streams[0].rate=-1)" in str(info.value)
    assert not (tmp_path / "out").exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "thesis.tex").write_text("mine")
    with pytest.raises(InputError, match="not part of a sweep"):
        run_sweep(SPEC, SweepOptions(out=str(tmp_path / "taken")))


def test_a_grid_past_the_cap_is_refused_before_any_point_is_loaded(tmp_path, monkeypatch):
    def no_loading(*args, **kwargs):
        raise AssertionError("a point was loaded")

    monkeypatch.setattr("reports.sweep.load_scenario", no_loading)
    spec = SweepSpec(FIGURE1, (("seed", tuple(range(9000))), ("duration", tuple(range(1, 9001)))))
    with pytest.raises(InputError, match=r"^sweep: a grid of 9,000 x 9,000 values has more than 10,000 points"):
        run_sweep(spec, SweepOptions(out=str(tmp_path / "out")))
    monkeypatch.setenv("STREAMGLOBE_MAX_SWEEP_POINTS", "3")
    with pytest.raises(InputError, match=r"^sweep: a grid of 2 x 2 values has more than 3 points"):
        run_sweep(SweepSpec(FIGURE1, (("seed", (1, 2)), ("duration", (5, 6)))), SweepOptions())
    assert not (tmp_path / "out").exists()


def test_a_directory_is_a_previous_sweep_only_by_its_sweep_json(swept, tmp_path):
    out, _ = swept
    check_out_dir(str(out), force=False)  # a sweep's own: resumed
    mine = tmp_path / "mine"
    (mine / "points").mkdir(parents=True)
    for name in ("sweep.csv", "backbone_bytes.png"):
        (mine / name).write_text("my own")
    with pytest.raises(InputError, match=r"holds 'backbone_bytes\.png', which is not part of a sweep"):
        check_out_dir(str(mine), force=False)
    (mine / "sweep.json").write_text("[1, 2]")  # not a sweep's design either
    with pytest.raises(InputError, match="not part of a sweep"):
        check_out_dir(str(mine), force=False)
    check_out_dir(str(mine), force=True)


def test_the_command_line_runs_a_sweep_file(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        f"scenario: {FIGURE1}\nvary:\n  seed: 1..2\nset:\n  duration: 30\nstrategies: [multicast, ideal]\n"
    )
    run = [sys.executable, str(ROOT / "run.py"), "sweep", str(sweep), "--out", str(tmp_path / "o"), "--no-plots"]
    run += ["--vary", "streams[0].rate=50", "--x", "streams[0].rate"]  # a key given on the command line as x
    result = subprocess.run(
        run, capture_output=True, text=True, timeout=300, env={**os.environ, "STREAMGLOBE_PROGRESS_S": "0.2"}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("2 points (2 run, 0 finished before) in ")
    assert "sweep: point 1/2 done: seed=" in result.stderr and "sweep: writing sweep.csv" in result.stderr
    design = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert design["strategies"] == ["multicast", "ideal"] and design["set"] == [["duration", 30]]
    assert design["x"] == "streams[0].rate"
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"scenario: {FIGURE1}\nvary: {{seed: [1]}}\ncolour: red\n")
    result = subprocess.run([*run[:3], str(bad)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {bad}: unknown key 'colour'")


@pytest.mark.slow
@pytest.mark.spark
def test_a_sweep_on_spark_gives_the_local_rows(swept, tmp_path):
    from peers.spark_cluster import java_available

    if not java_available():
        pytest.skip("Spark needs Java (make system installs it)")
    _, local = swept
    spec = SweepSpec(SPEC.scenario, (("seed", (1,)), ("subscriptions[1].at", (5,))), (), SPEC.strategies)
    on_spark = run_sweep(
        spec, SweepOptions(out=str(tmp_path / "s"), engine="spark", spark_master="local[2]", plots=False)
    )

    def figures(rows):
        return {(r["strategy"], r["metric"]): r["value"] for r in rows if r["metric"] not in ("plan_s", "run_s")}

    first = [r for r in local.rows if (r["seed"], r["subscriptions[1].at"]) == (1, 5)]
    assert figures(on_spark.rows) == figures(first)


def test_any_varied_key_can_be_the_x_axis_and_the_others_make_the_panels(swept):
    _, result = swept
    by_seed = SweepSpec(SPEC.scenario, SPEC.vary, SPEC.fixed, SPEC.strategies, x_key="seed")
    stats = aggregate(by_seed, result.rows)
    assert {panel for panel, _ in stats} == {(5,), (15,)}  # a panel per value of the other key
    per_x = stats[((15,), "backbone_bytes")]["sharing-em"]
    assert sorted(per_x) == [1, 2, 3] and all(n == 1 for _, _, n in per_x.values())  # one run per x: no band
    default = aggregate(SPEC, result.rows)  # the first varied key other than seed
    assert {panel for panel, _ in default} == {()} and sorted(default[((), "exact")]["sharing-em"]) == [5, 15]
    with pytest.raises(InputError, match=r"--x rate: not a varied key \(varied: seed, subscriptions\[1\]\.at\)"):
        SweepSpec(SPEC.scenario, SPEC.vary, x_key="rate")


def test_sweep_md_shows_the_units_of_the_console_table(swept):
    _, result = swept
    text = sweep_markdown(SPEC, result.rows, [], "figure1")
    saving = text[text.index("## backbone bytes saved vs query-shipping") :].split("\n## ")[0]
    rows = [line for line in saving.splitlines() if line.startswith("| 5 ") or line.startswith("| 15 ")]
    assert rows and all("%" in line and ("+" in line or "-" in line) for line in rows)  # +10.1% ± 0.3%, not 0.101
    latency = text[text.index("## delivery latency p99 (ms)") :].split("\n## ")[0]
    means = [float(cell.split(" ± ")[0]) for line in latency.splitlines()[4:] if line.startswith("|")
             for cell in line.strip("|").split("|")[1:]]  # fmt: skip
    assert means and all(5 < m < 50 for m in means)  # milliseconds (figure1's routes take 8-10 ms)
    assert " KB ± " in text  # bytes as the console shows them
