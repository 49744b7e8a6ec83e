"""What a run writes beside report.json: access links, the per-bin timeline, warnings, progress on stderr,
the plots' scales and flags, and report.html, opened in headless Chromium without errors and showing
every table."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from reports.plots import PLOTS, label, spans_orders
from topologies.loader import load_scenario
from topologies.workload import tuple_count

ROOT = Path(__file__).resolve().parents[2]
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def figure1_report(tmp_path_factory):
    """figure1 with Q1 leaving after the end (a warning), every strategy, plots, two at a time."""
    out = tmp_path_factory.mktemp("report") / "out"
    result = cli(
        "run", FIGURE1, "--out", str(out), "--jobs", "2", "--set", "subscriptions[0].until=70",
        env={"STREAMGLOBE_PROGRESS_S": "0.2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, result


def test_access_links_and_the_timeline_add_up(figure1_report):
    out, _ = figure1_report
    report = json.loads((out / "report.json").read_text())
    scenario = load_scenario(FIGURE1)
    for entry in report["strategies"].values():
        access = {(link["from"], link["to"]): link for link in entry["access_links"]}
        assert len(access) == 2 * len(scenario.thin_peers)
        assert sum(link["bytes"] for link in access.values()) == entry["access_bytes"]
        assert access[("P0", "SP4")]["tuples"] == tuple_count(scenario.streams[0], scenario.duration)
        assert access[("P0", "SP4")]["bytes"] == 6000 * scenario.tuple_bytes(3)
        for sub in entry["subscriptions"]:
            peer = scenario.subscription(sub["id"]).peer
            assert access[(scenario.home(peer), peer)]["tuples"] == sub["delivered"]
    with open(out / "links.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert Counter(r["kind"] for r in rows) == {"backbone": 7 * 18, "access": 7 * 8}
    with open(out / "timeline.csv", encoding="utf-8") as fh:
        timeline = list(csv.DictReader(fh))
    per_link = Counter()
    for row in timeline:
        per_link[(row["strategy"], row["from"], row["to"])] += int(row["bytes"])
        assert float(row["start_s"]) < 60 and int(row["bytes"]) > 0
    for name, entry in report["strategies"].items():
        for link in entry["links"]:
            assert per_link[(name, link["from"], link["to"])] == link["bytes"]


def test_warnings_reach_stderr_and_every_report_file(figure1_report):
    out, result = figure1_report
    warning = "subscriptions[0].until: 70 is past the end of the run (duration 60); Q1 stays to the end"
    assert f"warning: {FIGURE1}: {warning}" in result.stderr.splitlines()
    report = json.loads((out / "report.json").read_text())
    assert report["warnings"] == [f"{FIGURE1}: {warning}"]
    assert warning in (out / "summary.md").read_text() and warning in (out / "report.html").read_text()


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal_and_quiet_silences_it(figure1_report, tmp_path):
    _, result = figure1_report
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
    assert lines[0].startswith("run: 0% of 6,000 tuples x 7 strategies; ")
    assert sum(re.fullmatch(r"run: \S+ done \([1-7]/7 strategies\) \(\d+ s\)", line) is not None for line in lines) == 7
    for phase in ("writing plans.json", "writing report.json, links.csv", "drawing the plots", "writing report.html"):
        assert any(line.startswith(f"run: {phase}") for line in lines), phase
    assert "\r" not in result.stderr  # no bar drawn into a file
    quiet = cli("run", FIGURE1, "--out", str(tmp_path / "q"), "--quiet", "--no-plots", "--strategy", "ideal")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_plot_scales_and_flags():
    assert spans_orders([1.16, 0.158, 0.78]) is False
    assert spans_orders([289.8, 4.69, 61.1, 2.96]) is True
    assert spans_orders([0, 5.0]) is False  # zeros are not drawn on a log axis; one positive value spans nothing
    exact = {"subscriptions": [{"missing": 0, "extra": 0}]}
    assert label("sharing-em", exact) == "sharing-em"
    assert label("mine", {"subscriptions": [{"missing": 3, "extra": 0}]}) == "mine (NOT EXACT)"


def test_the_bytes_plot_signs_savings_as_the_table_does(figure1_report):
    out, result = figure1_report
    report = json.loads((out / "report.json").read_text())
    saved = 100 * report["strategies"]["query-shipping"]["saving_vs"]["data-shipping"]
    dearer = 100 * report["strategies"]["data-shipping"]["saving_vs"]["query-shipping"]
    assert saved > 0 > dearer  # query-shipping carries less than data-shipping: a + in the table
    row = next(line for line in result.stdout.splitlines() if line.startswith("query-shipping "))
    assert f"{saved:+.1f}%" in row.split()
    from reports import plots

    texts = []
    original = plots.plt.Axes.text

    def record(self, x, y, s, *args, **kwargs):
        texts.append(s)
        return original(self, x, y, s, *args, **kwargs)

    plots.plt.Axes.text = record
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plots._bytes_plot(os.path.join(tmp, "b.png"), report)
    finally:
        plots.plt.Axes.text = original
    assert any(f"saved {saved:+.1f}% vs DS" in t for t in texts) and any(
        f"saved {dearer:+.1f}% vs QS" in t for t in texts
    )


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def browse(url: str, *extra: str) -> subprocess.CompletedProcess:
    """Headless Chromium on ``url`` with a fresh profile and nothing fetched from the network."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            "--enable-logging=stderr", "--v=0",
        ]  # fmt: skip
        return subprocess.run(
            [chromium(), *flags, *extra, url], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )


def _rows(dom: str, table: str) -> list[str]:
    body = re.search(rf'<table id="{table}"[^>]*>.*?<tbody>(.*?)</tbody>', dom, re.DOTALL)
    assert body, f"table {table} missing"
    return re.findall(r"<tr.*?</tr>", body.group(1), re.DOTALL)


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed (make system installs it)")
def test_report_html_opens_in_headless_chromium_without_errors_and_shows_every_table(figure1_report, tmp_path):
    out, _ = figure1_report
    report = json.loads((out / "report.json").read_text())
    page = (out / "report.html").as_uri()
    assert "http" not in re.sub(r'href="[^"]*"', "", (out / "report.html").read_text()).replace("http-equiv", "")
    # opened sorted by the subscriptions' expected tuples, largest first (column 5)
    shown = browse(f"{page}#sort=subscriptions:5:desc", "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    dom = shown.stdout
    assert re.search(r'<body[^>]*data-ready="1"', dom) and "data-errors" not in dom
    assert not re.search(r"Uncaught|CONSOLE\(\d+\).*(error|Error)", shown.stderr)
    assert len(_rows(dom, "summary")) == len(report["strategies"]) == 7
    links = {(k, link["from"], link["to"]) for e in report["strategies"].values()
             for k, key in (("backbone", "links"), ("access", "access_links")) for link in e[key]}  # fmt: skip
    assert len(_rows(dom, "links")) == len(links) == 18 + 8
    subscriptions = _rows(dom, "subscriptions")
    assert len(subscriptions) == 3
    expected = [int(re.findall(r'data-v="([^"]*)"', row)[2]) for row in subscriptions]
    assert expected == sorted(expected, reverse=True) and len(set(expected)) == 3
    images = re.findall(r'<img alt="[a-z]+\.png" src="data:image/png', dom)
    assert 'aria-sort="descending"' in dom and len(images) == len(PLOTS)
    assert 'id="warnings"' in dom and 'id="plan-sharing-em"' in dom and 'id="verdict"' in dom
    # and drawn: a screenshot that is not blank
    shot = tmp_path / "report.png"
    drawn = browse(page, "--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}")
    assert drawn.returncode == 0 and shot.exists(), drawn.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(io.BytesIO(shot.read_bytes()), format="png")
    assert pixels.shape[:2] == (2400, 1280) and float(np.std(pixels[..., :3])) > 0.05
