"""``report.html``: the whole report in one self-contained page (docs/REPORT.md).

Everything a reader of a run needs, with nothing to fetch: the comparison table with every column
explained, the warnings, the plots (PNG files embedded as data URIs), the sharing planners' decisions in
words, and every link direction and every subscription per strategy in tables that sort by any column when
its header is clicked (a few lines of inline script; ``report.html#sort=links:3:desc`` opens with a table
sorted by a column, a link one can share).  The page is a pure function of the report, the
plots and the decisions, so two runs write the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os

from reports.report import COLUMNS, served_exactly, table_rows
from topologies.model import Scenario

MAX_DECISIONS = 2_000  # per strategy: the rest are in plans.json

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1400px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:2px 7px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;position:sticky;top:0}
table.sortable th{cursor:pointer}table.sortable th:hover{background:#e4e4e4}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.text,th.text{text-align:left}td.bad{background:#fdd;color:#900;font-weight:bold}
.scroll{max-height:36em;overflow:auto;border:1px solid #eee}
.verdict{padding:.5em 1em;border-radius:4px;display:inline-block}
.ok{background:#e6f4ea;color:#14532d}.fail{background:#fdd;color:#900}
.warn{background:#fff4d6;padding:.3em .8em;margin:.2em 0;border-left:4px solid #e0a800}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}#columns td{white-space:normal}
code{background:#f3f3f3;padding:0 3px}.muted{color:#666}
"""

_SCRIPT = """
window.addEventListener("error", function (e) {
  document.body.dataset.errors = (document.body.dataset.errors || "") + e.message + ";";
});
function cellValue(cell) {
  var v = cell.getAttribute("data-v");
  if (v !== null) { return v === "" ? -Infinity : parseFloat(v); }
  return cell.textContent.trim().toLowerCase();
}
function sortBy(th) {
  var table = th.closest("table"), body = table.tBodies[0];
  var column = Array.prototype.indexOf.call(th.parentNode.children, th);
  var ascending = th.getAttribute("aria-sort") !== "ascending";
  Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = cellValue(a.cells[column]), y = cellValue(b.cells[column]);
    var order = x < y ? -1 : x > y ? 1 : 0;
    return ascending ? order : -order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
}
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () { sortBy(th); });
});
// report.html#sort=subscriptions:5:desc opens with that table sorted by that column (0 is the first)
var wanted = /^#sort=([A-Za-z0-9_-]+):([0-9]+):(asc|desc)$/.exec(decodeURIComponent(location.hash));
if (wanted) {
  var th = document.querySelectorAll("#" + wanted[1] + " thead th")[Number(wanted[2])];
  if (th) { sortBy(th); if (wanted[3] === "desc") { sortBy(th); } }
}
document.body.dataset.ready = "1";
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(value: object, *, number: float | None = None, text: bool = False, bad: bool = False) -> str:
    classes = " ".join(c for c, on in (("text", text), ("bad", bad)) if on)
    attrs = f' class="{classes}"' if classes else ""
    if number is not None:
        attrs += f' data-v="{number!r}"'
    elif value is None or value == "":
        attrs += ' data-v=""'
    return f"<td{attrs}>{_e('' if value is None else value)}</td>"


def _table(table_id: str, header: list[tuple[str, bool]], rows: list[str], sortable: bool = True) -> str:
    """A table with ``header`` cells ``(title, is_text)`` and pre-rendered ``rows`` (``<tr>...</tr>``)."""
    heads = "".join(f'<th class="text">{_e(h)}</th>' if text else f"<th>{_e(h)}</th>" for h, text in header)
    kind = ' class="sortable"' if sortable else ""
    body = "\n".join(rows)
    return f'<table id="{table_id}"{kind}><thead><tr>{heads}</tr></thead><tbody>\n{body}\n</tbody></table>'


def _summary(report: dict) -> str:
    header, rows = table_rows(report)
    body = []
    for row, (name, entry) in zip(rows, report["strategies"].items(), strict=True):
        numbers = [
            None,
            entry["backbone_bytes"],
            entry.get("vs_ideal", {}).get("bytes"),
            entry["backbone_tuples"],
            entry.get("vs_ideal", {}).get("tuple_hops"),
            entry["access_bytes"],
            entry.get("network_usage"),
            *([entry.get("byte_km")] if "byte-km" in header else []),
            *(entry["saving_vs"].get(b) for b in ("data-shipping", "query-shipping", "multicast")),
            *(None if entry["latency_s"][p] is None else 1000 * entry["latency_s"][p] for p in ("p50", "p99")),
            entry.get("peak_utilization"),
            entry.get("links_over_capacity"),
            entry.get("peak_load"),
            entry.get("link_drops"),
            entry.get("rejected"),
            *((entry.get("lost"), entry.get("unreachable")) if report.get("events") else ()),
            None,
        ]
        cells = [_cell(row[0], text=True)]
        for value, number in zip(row[1:-1], numbers[1:-1], strict=True):
            cells.append(_cell(value, number=number) if number is not None else _cell(value))
        cells.append(_cell(row[-1], text=True, bad=row[-1] != "yes"))
        body.append(f'<tr data-strategy="{_e(name)}">{"".join(cells)}</tr>')
    table = _table("summary", [(h, i in (0, len(header) - 1)) for i, h in enumerate(header)], body)
    explained = "".join(
        f'<tr><td class="text"><b>{_e(n)}</b></td><td class="text">{_e(t)}</td></tr>' for n, t in COLUMNS.items()
    )
    columns = f'<table id="columns">{explained}</table>'
    return f"{table}\n<details open><summary>What the columns mean</summary>{columns}</details>"


def _gaps(report: dict) -> str:
    """Per strategy and stream, the bytes beyond ideal's split into attribute surplus and the tuple-hops
    part (empty when the report has no split: no ``ideal``, or an engine without per-stream counts)."""
    gaps = {n: e["gap_to_ideal"] for n, e in report["strategies"].items() if "gap_to_ideal" in e and n != "ideal"}
    if not gaps:
        return ""
    header = [("strategy", True), ("stream", True), ("bytes - ideal", False), ("attribute surplus", False)]
    header.append(("tuple-hops part", False))
    body = []
    for name, gap in gaps.items():
        for stream in [{"id": "(all)", **gap}, *gap["streams"]]:
            cells = [_cell(name, text=True), _cell(stream["id"], text=True)]
            cells += [_cell(stream[k], number=stream[k]) for k in ("bytes", "attribute_surplus", "tuple_hops")]
            body.append(f"<tr>{''.join(cells)}</tr>")
    return _table("gaps", header, body)


def _links(report: dict) -> str:
    names = list(report["strategies"])
    rows: dict[tuple[str, str, str], dict[str, tuple[int, int]]] = {}
    for name, entry in report["strategies"].items():
        for kind, key in (("backbone", "links"), ("access", "access_links")):
            for link in entry.get(key, ()):
                rows.setdefault((kind, link["from"], link["to"]), {})[name] = (link["bytes"], link["tuples"])
    header = [("kind", True), ("from", True), ("to", True)]
    header += [(f"{n} bytes", False) for n in names] + [(f"{n} tuples", False) for n in names]
    body = []
    for (kind, a, b), per in rows.items():
        cells = [_cell(kind, text=True), _cell(a, text=True), _cell(b, text=True)]
        cells += [_cell(per.get(n, (0, 0))[0], number=per.get(n, (0, 0))[0]) for n in names]
        cells += [_cell(per.get(n, (0, 0))[1], number=per.get(n, (0, 0))[1]) for n in names]
        body.append(f"<tr>{''.join(cells)}</tr>")
    return _table("links", header, body)


MAP_BOX = (900, 650)  # px the network map's drawing fits in


def _map(report: dict, scenario: Scenario) -> str:
    """The backbone drawn at its super-peers' (lon, lat), as inline SVG (a real network's; empty when a
    super-peer has no position): each link's width by the bytes one strategy put on it (sharing-em when it
    ran, else the first), every node and link named with its figures on hover."""
    position = scenario.position
    if not scenario.super_peers or not all(sp in position for sp in scenario.super_peers):
        return ""
    lons = [position[sp][0] for sp in scenario.super_peers]
    lats = [position[sp][1] for sp in scenario.super_peers]
    squeeze = max(0.1, math.cos(math.radians((min(lats) + max(lats)) / 2)))  # a degree of longitude, in latitude's
    span_x, span_y = max(1e-9, (max(lons) - min(lons)) * squeeze), max(1e-9, max(lats) - min(lats))
    scale = min((MAP_BOX[0] - 40) / span_x, (MAP_BOX[1] - 40) / span_y)
    width, height = round(span_x * scale + 40), round(span_y * scale + 40)

    def at(sp: str) -> tuple[float, float]:
        lon, lat = position[sp]
        return round(20 + (lon - min(lons)) * squeeze * scale, 1), round(20 + (max(lats) - lat) * scale, 1)

    name = "sharing-em" if "sharing-em" in report["strategies"] else next(iter(report["strategies"]), None)
    carried: dict[frozenset, int] = {}
    for link in report["strategies"][name]["links"] if name else ():
        key = frozenset((link["from"], link["to"]))
        carried[key] = carried.get(key, 0) + link["bytes"]
    most = max(carried.values(), default=0)
    shapes = []
    for link in scenario.links:
        (x1, y1), (x2, y2) = at(link.a), at(link.b)
        sent = carried.get(frozenset((link.a, link.b)), 0)
        width = 0.6 + (7 * sent / most if most else 0)
        colour = "#2a7" if sent else "#bbb"
        length = "" if link.length is None else f", {link.length:,.0f} km"
        tip = f"{link.a} - {link.b}: {1000 * float(link.latency):.3f} ms{length}, {sent:,} bytes ({name})"
        shapes.append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-width="{width:.2f}">'
            f"<title>{_e(tip)}</title></line>"
        )
    labelled = len(scenario.super_peers) <= 60
    for sp in scenario.super_peers:
        x, y = at(sp)
        lon, lat = position[sp]
        tip = f"{sp} ({lon:g}, {lat:g})"
        shapes.append(f'<circle cx="{x}" cy="{y}" r="4" fill="#eee" stroke="#555"><title>{_e(tip)}</title></circle>')
        if labelled:
            shapes.append(f'<text x="{x + 5}" y="{y - 4}" font-size="9">{_e(sp)}</text>')
    return (
        f"<p>The backbone at its super-peers' longitude and latitude; a link's width is the bytes"
        f" <code>{_e(name)}</code> put on it (both directions), grey when it carried nothing.  Hover for"
        f" names, latencies, lengths and bytes.</p>\n"
        f'<svg id="map" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}">' + "".join(shapes) + "</svg>"
    )


def _subscriptions(report: dict, scenario: Scenario) -> str:
    names = list(report["strategies"])
    found = {n: {s["id"]: s for s in e["subscriptions"]} for n, e in report["strategies"].items()}
    header = [("id", True), ("peer", True), ("stream", True), ("at s", False), ("until s", False)]
    header += [("expected", False)] + [(f"{n} delivered", False) for n in names]
    header += [(f"{n} p99 ms", False) for n in names] + [("query", True)]
    body = []
    for sub in scenario.subscriptions:
        first = found[names[0]][sub.id] if names else {"expected": None}
        cells = [_cell(sub.id, text=True), _cell(sub.peer, text=True), _cell(sub.stream, text=True)]
        cells += [_cell(f"{sub.at:g}", number=sub.at)]
        cells += [_cell("" if sub.until is None else f"{sub.until:g}", number=sub.until)]
        cells += [_cell(first["expected"], number=first["expected"])]
        for n in names:
            s = found[n][sub.id]
            bad = not served_exactly(s)
            shown = f"{s['delivered']} (-{s['missing']} +{s['extra']})" if bad else s["delivered"]
            if s.get("rejected") is not None:
                shown = f"rejected: {s['rejected']}"
            elif not bad and (s.get("dropped") or s.get("lost") or s.get("unreachable")):
                why = [f"{s[k]} {k}" for k in ("dropped", "lost", "unreachable") if s.get(k)]
                shown = f"{s['delivered']} ({', '.join(why)})"
            cells.append(_cell(shown, number=s["delivered"], bad=bad))
        for n in names:
            p99 = found[n][sub.id]["latency_s"]["p99"]
            cells.append(_cell("" if p99 is None else f"{1000 * p99:.2f}", number=None if p99 is None else 1000 * p99))
        cells.append(_cell(sub.query.text, text=True))
        body.append(f'<tr data-id="{_e(sub.id)}">{"".join(cells)}</tr>')
    return _table("subscriptions", header, body)


def _decisions(decisions: dict[str, list[dict]]) -> str:
    parts = []
    for name, items in decisions.items():
        if not items:
            continue
        lines = [
            f"<li><code>t={d['time']:g}s</code> {_e(d['event'])} <b>{_e(d['subscription'])}</b>:"
            f" {_e(d['summary'])}</li>"
            for d in items[:MAX_DECISIONS]
        ]
        more = len(items) - MAX_DECISIONS
        tail = f'<p class="muted">... and {more:,} more decisions in plans.json</p>' if more > 0 else ""
        parts.append(
            f'<details id="plan-{_e(name)}"><summary>{_e(name)}: {len(items):,} decisions</summary>'
            f"<ol>{''.join(lines)}</ol>{tail}</details>"
        )
    if not parts:
        return '<p class="muted">No strategy run here explains its decisions (the baselines have none).</p>'
    return "\n".join(parts)


def _events(report: dict) -> str:
    """The backbone's failures and recoveries, per instant and strategy: what re-planning cost."""
    body = []
    for event in report.get("events", ()):
        for name, done in event["strategies"].items():
            cells = [_cell(f"{event['time']:g}", number=event["time"]), _cell("; ".join(event["events"]), text=True)]
            cells += [_cell(name, text=True), _cell(f"{1000 * done['replan_s']:.2f}", number=1000 * done["replan_s"])]
            cells += [_cell(done["flows_moved"], number=done["flows_moved"])]
            cells += [_cell(len(done[k]), number=len(done[k])) for k in ("cut_off", "restored")]
            body.append(f"<tr>{''.join(cells)}</tr>")
    header = [("t s", False), ("events", True), ("strategy", True), ("re-plan ms", False)]
    header += [("flows moved", False), ("cut off", False), ("restored", False)]
    return _table("events", header, body)


def _plots(directory: str, plots: list[str]) -> str:
    images = []
    for name in plots:
        with open(os.path.join(directory, name), "rb") as fh:
            data = base64.b64encode(fh.read()).decode("ascii")
        images.append(f'<figure><img alt="{_e(name)}" src="data:image/png;base64,{data}"></figure>')
    return "\n".join(images) or '<p class="muted">Plots were not drawn (--no-plots).</p>'


def report_html(
    report: dict, scenario: Scenario, directory: str, plots: list[str], decisions: dict[str, list[dict]]
) -> str:
    """The page: ``report`` (report.json's content) of ``scenario``, the PNG files ``plots`` in
    ``directory``, and each strategy's planner ``decisions`` (as in plans.json)."""
    title = f"Traffic report: {report['scenario']}"
    verdict = (
        '<p class="verdict ok" id="verdict">Every subscription received exactly the centralized result.</p>'
        if report["exact"]
        else '<p class="verdict fail" id="verdict">Some strategies did not deliver exactly the centralized'
        " result: their cells are marked in the tables below.</p>"
    )
    warnings = "".join(f'<p class="warn">{_e(w)}</p>' for w in report.get("warnings", ()))
    facts = (
        f"Engine <code>{_e(report['engine'])}</code>, {report['duration']:g} s simulated, seed {report['seed']},"
        f" {report['header_bytes']} header bytes per tuple; {len(scenario.super_peers)} super-peers,"
        f" {len(scenario.thin_peers)} thin-peers, {len(scenario.streams)} streams,"
        f" {len(scenario.subscriptions)} subscriptions."
    )
    files = ", ".join(
        f'<a href="{n}">{n}</a>' for n in ("report.json", "links.csv", "timeline.csv", "summary.md", "plans.json")
    )
    sections = [
        f"<h1>{_e(title)}</h1>",
        f"<p>{facts}</p>",
        verdict,
        f'<div id="warnings">{warnings}</div>' if warnings else "",
        "<h2>Strategies</h2>",
        _summary(report),
        *(
            [
                "<h2>Failures and recoveries</h2>",
                "<p>Per instant the backbone changed and per strategy: the wall time re-planning took, the flows"
                " it moved, and the subscriptions it cut off and served again (docs/DYNAMICS.md).</p>",
                _events(report),
            ]
            if report.get("events")
            else []
        ),
        *(
            [
                "<h2>Why each strategy carries more than ideal</h2>",
                "<p>Backbone bytes beyond <code>ideal</code>'s, per strategy and stream: <b>attribute surplus</b>"
                " is attribute values carried that nobody downstream selects (ideal carries none); the"
                " <b>tuple-hops part</b> is the rest, tuple copies beyond ideal's (negative: fewer, as on"
                " shorter routes), each with its header and the values its receivers need (docs/REPORT.md)."
                " Click a column to sort.</p>",
                f'<div class="scroll">{gaps}</div>',
            ]
            if (gaps := _gaps(report))
            else []
        ),
        *(["<h2>Network map</h2>", network_map] if (network_map := _map(report, scenario)) else []),
        "<h2>Plots</h2>",
        _plots(directory, plots),
        "<h2>What the planners did</h2>",
        _decisions(decisions),
        "<h2>Links</h2>",
        "<p>Bytes and tuples per link direction and strategy: backbone links between super-peers, access links"
        " between a thin-peer and its super-peer.  Click a column to sort.</p>",
        f'<div class="scroll">{_links(report)}</div>',
        "<h2>Subscriptions</h2>",
        "<p>Tuples each subscription should receive (<code>expected</code>, the centralized answer) and"
        " received per strategy (a cell in red: <code>-missing +extra</code>), and its p99 latency.</p>",
        f'<div class="scroll">{_subscriptions(report, scenario)}</div>',
        f"<h2>Files</h2><p>{files}; the definitions: docs/REPORT.md and docs/ACCOUNTING.md.</p>",
    ]
    data = json.dumps({"scenario": report["scenario"], "strategies": list(report["strategies"])})
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body data-report='{_e(data)}'>\n" + "\n".join(s for s in sections if s) + f"\n<script>{_SCRIPT}</script>\n"
        "</body></html>\n"
    )
