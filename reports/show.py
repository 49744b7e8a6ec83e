"""``python run.py show``: a written report in the terminal, whole or per link or per subscription, sorted
(docs/REPORT.md): what report.html shows in a browser, for a shell."""

from __future__ import annotations

import json
import os

from reports.report import console_table, served_exactly
from topologies.errors import InputError


def read_report(where: str) -> dict:
    """report.json of a report directory (or the file itself); InputError when it is not one."""
    path = os.path.join(where, "report.json") if os.path.isdir(where) else where
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    except ValueError as err:
        raise InputError(f"{path}: not a report.json: {err}") from None
    if not isinstance(report, dict) or not isinstance(report.get("strategies"), dict):
        raise InputError(f"{path}: not a report.json (no strategies)")
    return report


def _text(value: object) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[object]], sort: str | None, ascending: bool, top: int | None) -> str:
    if sort is not None:
        if sort not in header:
            raise InputError(f"--sort {sort!r}: not a column (columns: {', '.join(header)})")
        k = header.index(sort)
        numbers = [r for r in rows if isinstance(r[k], int | float)]
        others = [r for r in rows if not isinstance(r[k], int | float)]
        rows = sorted(numbers, key=lambda r: r[k], reverse=not ascending) + sorted(others, key=lambda r: str(r[k]))
    shown = rows[:top] if top is not None else rows
    cells = [header] + [[_text(v) for v in row] for row in shown]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown):,} more rows (--top)")
    return "\n".join(lines)


def _strategies(report: dict, strategy: str | None) -> list[str]:
    if strategy is None:
        return list(report["strategies"])
    if strategy not in report["strategies"]:
        raise InputError(f"--strategy {strategy!r}: not in this report (it has: {', '.join(report['strategies'])})")
    return [strategy]


def links_table(report: dict, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """Every link direction (backbone, then access): bytes per strategy, or bytes and tuples of one."""
    names = _strategies(report, strategy)
    found: dict[tuple[str, str, str], dict[str, tuple[int, int]]] = {}
    for name in names:
        entry = report["strategies"][name]
        for kind, key in (("backbone", "links"), ("access", "access_links")):
            for link in entry.get(key, ()):
                found.setdefault((kind, link["from"], link["to"]), {})[name] = (link["bytes"], link["tuples"])
    if strategy is not None:
        header = ["kind", "from", "to", "bytes", "tuples"]
        rows = [[*key, *per[strategy]] for key, per in found.items()]
    else:
        header = ["kind", "from", "to", *names]
        rows = [[*key, *(per.get(n, (0, 0))[0] for n in names)] for key, per in found.items()]
    return _table(header, rows, sort or header[3], ascending, top)


def subscriptions_table(report: dict, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """Every subscription: for one strategy its counts and latency; for all, what each delivered."""
    names = _strategies(report, strategy)
    if strategy is not None:
        header = ["id", "delivered", "expected", "missing", "extra", "p50 ms", "p99 ms", "exact"]
        rows = []
        for s in report["strategies"][strategy]["subscriptions"]:
            latency = s["latency_s"]
            rows.append(
                [s["id"], s["delivered"], s["expected"], s["missing"], s["extra"]]
                + [None if latency[p] is None else 1000 * latency[p] for p in ("p50", "p99")]
                + ["yes" if served_exactly(s) else "NO"]
            )
        return _table(header, rows, sort, ascending, top)
    per = {n: {s["id"]: s for s in report["strategies"][n]["subscriptions"]} for n in names}
    header = ["id", "expected", *names]
    rows = []
    for s in report["strategies"][names[0]]["subscriptions"]:
        cells = [per[n][s["id"]] for n in names]
        rows.append(
            [s["id"], s["expected"]]
            + [c["delivered"] if served_exactly(c) else f"{c['delivered']} NOT EXACT" for c in cells]
        )
    return _table(header, rows, sort, ascending, top)


def streams_table(report: dict, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """Every stream: the backbone bytes of each strategy's flows of it, or the bytes and tuples of one."""
    names = _strategies(report, strategy)
    per = {n: {s["id"]: s for s in report["strategies"][n].get("streams", ())} for n in names}
    ids = list(per[names[0]])
    if strategy is not None:
        header = ["stream", "backbone bytes", "backbone tuples"]
        rows = [[i, per[strategy][i]["backbone_bytes"], per[strategy][i]["backbone_tuples"]] for i in ids]
    else:
        header = ["stream", *names]
        rows = [[i, *(per[n][i]["backbone_bytes"] for n in names)] for i in ids]
    return _table(header, rows, sort or header[1], ascending, top)


def show(where: str, what: str, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """``what`` (``table``, ``links``, ``subscriptions`` or ``streams``) of the report at ``where``."""
    report = read_report(where)
    if what == "streams":
        return streams_table(report, strategy, sort, ascending, top)
    if what == "links":
        return links_table(report, strategy, sort, ascending, top)
    if what == "subscriptions":
        return subscriptions_table(report, strategy, sort, ascending, top)
    lines = [console_table(report)]
    lines += [f"warning: {w}" for w in report.get("warnings", ())]
    return "\n".join(lines)
