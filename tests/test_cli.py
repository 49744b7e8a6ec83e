"""The command line as a user meets it: exit codes, one-line errors, files written whole or not at all."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURE1 = os.path.join(ROOT, "topologies", "figure1.yaml")


def cli(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def figure1_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("figure1") / "report"
    result = cli("run", FIGURE1, "--out", str(out), "--quiet", "--jobs", "3")  # three strategies at a time
    assert result.returncode == 0, result.stderr
    return out, result


def test_run_writes_the_report_and_prints_the_comparison(figure1_out):
    out, result = figure1_out
    assert sorted(os.listdir(out)) == sorted(
        [
            "report.json",
            "report.html",
            "links.csv",
            "timeline.csv",
            "summary.md",
            "plans.json",
            "bytes.png",
            "timeline.png",
            "latency.png",
            "topology.png",
            "utilization.png",
            "load.png",
            "streams.png",
        ]
    )
    for name in ("data-shipping", "query-shipping", "multicast", "ideal", "sharing-em"):
        assert name in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["scenario"] == "figure1" and report["engine"] == "local"
    assert report["duration"] > 0
    for entry in report["strategies"].values():
        assert {"backbone_bytes", "access_bytes", "links", "subscriptions"} <= set(entry)
        for link in entry["links"]:
            assert set(link) >= {"from", "to", "bytes", "tuples"}
        for sub in entry["subscriptions"]:
            assert set(sub) >= {"id", "delivered", "expected", "missing", "extra"}
            assert sub["missing"] == sub["extra"] == 0
    csv_lines = (out / "links.csv").read_text().splitlines()
    assert csv_lines[0] == "strategy,from,to,bytes,tuples,kind"
    links = sum(len(e["links"]) + len(e["access_links"]) for e in report["strategies"].values())
    assert len(csv_lines) - 1 == links


def test_run_is_reproducible_one_strategy_at_a_time_or_several(figure1_out, tmp_path):
    out, first = figure1_out
    again = tmp_path / "again"
    result = cli("run", FIGURE1, "--out", str(again), "--quiet", "--no-plots", "--jobs", "1")
    assert result.returncode == 0, result.stderr
    for name in ("report.json", "links.csv", "plans.json"):
        assert (again / name).read_text() == (out / name).read_text(), name
    assert "3 strategies at a time" in first.stdout and "largest worker process" in first.stdout
    assert "at a time" not in result.stdout
    json.loads((out / "plans.json").read_text())


def test_strategy_selection(tmp_path):
    result = cli(
        "run",
        FIGURE1,
        "--out",
        str(tmp_path / "o"),
        "--strategy",
        "ideal",
        "--strategy",
        "multicast",
        "--quiet",
        "--no-plots",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert list(report["strategies"]) == ["multicast", "ideal"]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(re.sub(r"rate: *[0-9.]+", "rate: -5", Path(FIGURE1).read_text(), count=1))
    out = tmp_path / "out"
    result = cli("run", str(bad), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "bad.yaml" in result.stderr and "rate" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists() and os.listdir(tmp_path) == ["bad.yaml"]


def test_unknown_strategy_is_exit_2(tmp_path):
    result = cli("run", FIGURE1, "--out", str(tmp_path / "o"), "--strategy", "teleport")
    assert result.returncode == 2
    assert "teleport" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--jobs", "0"), "--jobs: must be at least 1, got 0"), (("--jobs", "2", "--engine", "spark"), "--jobs 2")],
)
def test_bad_jobs_are_exit_2(tmp_path, args, message):
    result = cli("run", FIGURE1, "--out", str(tmp_path / "o"), *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_missing_file_is_exit_2(tmp_path):
    result = cli("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "nope.yaml" in result.stderr and result.stderr.count("\n") == 1


def test_validate_and_schema_and_plan():
    result = cli("validate", FIGURE1)
    assert result.returncode == 0 and result.stdout.count("\n") == 1 and "figure1" in result.stdout
    schema = json.loads(cli("schema").stdout)
    assert schema["type"] == "object" and "network" in schema["properties"]
    plan = cli("plan", FIGURE1)
    assert plan.returncode == 0 and "sharing-em" in plan.stdout
    assert "planned utilization" in plan.stdout and "link SP4 -> SP5: " in plan.stdout
    as_json = json.loads(cli("plan", FIGURE1, "--json").stdout)
    assert as_json["strategy"] == "sharing-em" and as_json["epochs"]


def test_the_plan_text_is_the_same_whatever_the_hash_seed():
    # what each epoch removed is listed in the order the epoch before had it, never a set's order
    sensor_grid = os.path.join(ROOT, "topologies", "sensor-grid.yaml")
    texts = []
    for seed in ("1", "2", "3"):
        done = subprocess.run(
            [sys.executable, os.path.join(ROOT, "run.py"), "plan", sensor_grid, "--strategy", "multicast", "--quiet"],
            cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        texts.append(done.stdout)
    assert texts[0].count("\n  - ") >= 10
    assert texts[1] == texts[0] and texts[2] == texts[0]


def test_a_terminated_run_leaves_nothing_half_written(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "run.py", "run", "topologies/large.yaml", "--quiet", "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # wait until the temporary sibling directory exists, then stop the run
            if any(p.name.startswith(".report.") for p in tmp_path.iterdir()) or proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert list(tmp_path.iterdir()) == []


def test_a_worker_error_or_death_stops_the_parallel_run(tmp_path):
    from reports.simulate import simulate_parallel
    from topologies.errors import EmulatorError, InputError
    from topologies.loader import load_scenario

    scenario = load_scenario(FIGURE1)
    with pytest.raises(InputError, match="unknown strategy 'teleport'"):
        simulate_parallel(scenario, ["ideal", "teleport"], 2, str(tmp_path), show_progress=False)

    def dies(*args, **kwargs):
        os._exit(3)

    with pytest.raises(EmulatorError, match="running multicast died \\(exit code 3\\)"):
        simulate_parallel(scenario, ["multicast"], 2, str(tmp_path), show_progress=False, engine=dies)


def test_out_never_touches_what_is_not_a_report_of_ours(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    result = cli("run", FIGURE1, "--out", str(mine), "--quiet", "--no-plots")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "thesis.tex" in result.stderr and "--force" in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # nothing half-written beside it either

    result = cli("run", FIGURE1, "--out", str(mine), "--quiet", "--no-plots", "--force", "--strategy", "ideal")
    assert result.returncode == 0, result.stderr
    assert (mine / "thesis.tex").read_text() == "years of work"
    written = ["links.csv", "plans.json", "report.html", "report.json", "summary.md", "thesis.tex", "timeline.csv"]
    assert sorted(p.name for p in mine.iterdir()) == written


def test_out_replaces_a_previous_report_and_drops_its_stale_files(tmp_path):
    out = tmp_path / "report"
    assert cli("run", FIGURE1, "--out", str(out), "--quiet", "--strategy", "ideal").returncode == 0
    assert (out / "bytes.png").exists()
    (out / "live").mkdir()  # what `serve` writes under the default report directory stays
    result = cli("run", FIGURE1, "--out", str(out), "--quiet", "--no-plots", "--strategy", "multicast")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "links.csv", "live", "plans.json", "report.html", "report.json", "summary.md", "timeline.csv",
    ]  # fmt: skip
    assert list(json.loads((out / "report.json").read_text())["strategies"]) == ["multicast"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


@pytest.mark.parametrize("where", ["a-file", "a-file/below", "."])
def test_unusable_out_is_exit_2_before_any_work(tmp_path, where):
    (tmp_path / "a-file").write_text("keep me")
    (tmp_path / "notes.txt").write_text("mine")
    result = cli("run", FIGURE1, "--out", where, "--quiet", cwd=str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"--out {where}" in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "notes.txt"]
    assert (tmp_path / "a-file").read_text() == "keep me"


@pytest.mark.parametrize("setting", ["spark.driver.memory", "driver.memory=1g", "spark.x=", "=1g"])
def test_a_malformed_spark_setting_is_exit_2_before_any_work(tmp_path, setting):
    out = tmp_path / "out"
    result = cli("run", FIGURE1, "--engine", "spark", "--spark-conf", setting, "--out", str(out), "--quiet")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--spark-conf" in result.stderr and repr(setting) in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_a_backbone_of_hundreds_of_super_peers_gets_its_plots(tmp_path):
    # networkx lays out a graph of 500 nodes or more with a sparse solver (scipy): metro.yaml's 1,000
    # super-peers once lost a whole run at its very last step, the topology plot
    from topologies.loader import load_scenario
    from topologies.scale import render

    path = tmp_path / "wide.yaml"
    path.write_text(
        render(3, transit=6, stubs_per_transit=9, nodes_per_stub=10, streams=1, rate=5, duration=4, subscriptions=8),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = cli("run", str(path), "--strategy", "query-shipping", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(load_scenario(str(path)).super_peers) >= 500
    assert all((out / name).stat().st_size > 0 for name in ("bytes.png", "timeline.png", "latency.png", "topology.png"))


def test_a_bug_is_one_line_and_exit_1_with_its_traceback_on_request(monkeypatch, capsys):
    import run

    def broken(args):
        raise KeyError("a key our code forgot")

    monkeypatch.setattr(run, "_cmd_validate", broken)
    assert run.main(["validate", "topologies/figure1.yaml"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: internal error: KeyError: 'a key our code forgot' (a bug: set STREAMGLOBE_TRACEBACK")
    monkeypatch.setenv("STREAMGLOBE_TRACEBACK", "1")
    with pytest.raises(KeyError):
        run.main(["validate", "topologies/figure1.yaml"])
