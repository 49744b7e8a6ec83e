"""``python run.py show``: a written report in the terminal, whole or per link or per subscription, sorted
(docs/REPORT.md): what report.html shows in a browser, for a shell.

A report.json is input like any other: it is read only when it is a regular file of at most
:data:`MAX_REPORT_BYTES`, and every field ``show`` reads is checked before anything is shown, so a damaged
or foreign file is one line naming the file and the key (:func:`read_report`)."""

from __future__ import annotations

import json
import math
import os
import stat

from reports.report import console_table, served_exactly
from topologies.errors import InputError, shown

MAX_REPORT_BYTES = 256 * 2**20  # the report of 2,000 subscriptions over every strategy holds about 10 MB
VIEWS = ("table", "links", "subscriptions", "streams")


class _Shape:
    """Checks of a report.json's fields, each failure one InputError naming the file and the key path."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, expected: str, value: object) -> None:
        raise InputError(f"{self.path}: not a report.json: {key}: expected {expected}, got {shown(value)}")

    def mapping(self, value: object, key: str) -> dict:
        if not isinstance(value, dict):
            self.fail(key, "an object", value)
        return value

    def items(self, value: object, key: str) -> list:
        if not isinstance(value, list):
            self.fail(key, "a list", value)
        return value

    def text(self, value: object, key: str) -> None:
        if not isinstance(value, str):
            self.fail(key, "a text", value)

    def number(self, value: object, key: str, optional: bool = False) -> None:
        if optional and value is None:
            return
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            self.fail(key, "a number" + " or null" * optional, value)

    def numbers(self, doc: dict, key: str, names: tuple[str, ...], optional: bool = False, present=True) -> None:
        """``doc[name]`` for each of ``names`` a number (or null when ``optional``); absent ones only
        checked when ``present`` says they must be there."""
        for name in names:
            if present or name in doc:
                self.number(doc.get(name), f"{key}.{name}", optional)

    def report(self, doc: object) -> dict:
        doc = self.mapping(doc, "the top level")
        self.mapping(doc.get("strategies"), "strategies")
        for k, warning in enumerate(self.items(doc.get("warnings", []), "warnings")):
            self.text(warning, f"warnings[{k}]")
        self.items(doc.get("events", []), "events")
        for name, entry in doc["strategies"].items():
            self.strategy(entry, f"strategies.{shown(name) if not str(name).isidentifier() else name}")
        return doc

    def strategy(self, entry: object, key: str) -> None:
        entry = self.mapping(entry, key)
        self.numbers(entry, key, ("backbone_bytes", "backbone_tuples", "access_bytes"))
        self.numbers(
            entry, key, ("links_over_capacity", "link_drops", "rejected", "lost", "unreachable"), present=False
        )
        self.numbers(entry, key, ("peak_utilization", "peak_load", "network_usage", "byte_km"), True, present=False)
        for k, stream in enumerate(self.items(entry.get("streams", []), f"{key}.streams")):
            where = f"{key}.streams[{k}]"
            stream = self.mapping(stream, where)
            self.text(stream.get("id"), f"{where}.id")
            self.numbers(stream, where, ("backbone_bytes", "backbone_tuples"), optional=True)
        for group in ("saving_vs", "vs_ideal"):
            found = self.mapping(entry.get(group, {}), f"{key}.{group}")
            self.numbers(found, f"{key}.{group}", tuple(found), optional=True)
        self.numbers(self.mapping(entry.get("latency_s"), f"{key}.latency_s"), f"{key}.latency_s", ("p50", "p99"), True)
        for group in ("links", "access_links"):
            for k, link in enumerate(self.items(entry.get(group, []), f"{key}.{group}")):
                where = f"{key}.{group}[{k}]"
                link = self.mapping(link, where)
                for end in ("from", "to"):
                    self.text(link.get(end), f"{where}.{end}")
                self.numbers(link, where, ("bytes", "tuples"))
        for k, sub in enumerate(self.items(entry.get("subscriptions"), f"{key}.subscriptions")):
            where = f"{key}.subscriptions[{k}]"
            sub = self.mapping(sub, where)
            self.text(sub.get("id"), f"{where}.id")
            self.numbers(sub, where, ("delivered", "expected", "missing", "extra"))
            self.numbers(sub, where, ("missing_before_rejection",), present=False)
            if sub.get("rejected") is not None:
                self.text(sub["rejected"], f"{where}.rejected")
            self.numbers(self.mapping(sub.get("latency_s"), f"{where}.latency_s"), f"{where}.latency_s",
                         ("p50", "p99"), True)  # fmt: skip


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number report.json holds")


def read_report(where: str) -> dict:
    """report.json of a report directory (or the file itself), every field ``show`` reads checked;
    InputError naming the file (and the key) when it is not one."""
    path = os.path.join(where, "report.json") if os.path.isdir(where) else where
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise InputError(
                f"{path}: {info.st_size:,} bytes, over the limit of {MAX_REPORT_BYTES:,} for a report.json"
            )
        with open(path, encoding="utf-8") as fh:
            report = json.loads(fh.read(MAX_REPORT_BYTES + 1), parse_constant=_refuse_constant)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    except ValueError as err:  # not JSON, not UTF-8, an integer too long, NaN; a NUL in the path
        raise InputError(f"{path}: not a report.json: {shown(str(err))}") from None
    except RecursionError:
        raise InputError(f"{path}: not a report.json: nested too deeply") from None
    return _Shape(path).report(report)


def _text(value: object) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[object]], sort: str | None, ascending: bool, top: int | None) -> str:
    if sort is not None:
        if sort not in header:
            raise InputError(f"--sort {shown(sort)}: not a column (columns: {', '.join(header)})")
        k = header.index(sort)
        numbers = [r for r in rows if isinstance(r[k], int | float)]
        others = [r for r in rows if not isinstance(r[k], int | float)]
        rows = sorted(numbers, key=lambda r: r[k], reverse=not ascending) + sorted(others, key=lambda r: str(r[k]))
    kept = rows[:top] if top is not None else rows
    cells = [header] + [[_text(v) for v in row] for row in kept]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if len(kept) < len(rows):
        lines.append(f"... {len(rows) - len(kept):,} more rows (--top)")
    return "\n".join(lines)


def _strategies(report: dict, strategy: str | None) -> list[str]:
    if strategy is None:
        return list(report["strategies"])
    if strategy not in report["strategies"]:
        names = ", ".join(shown(name) for name in list(report["strategies"])[:20])
        raise InputError(f"--strategy {shown(strategy)}: not in this report (it has: {names})")
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
    for s in report["strategies"][names[0]]["subscriptions"] if names else ():
        cells = [per[n].get(s["id"]) for n in names]
        rows.append([s["id"], s["expected"]] + [_delivered(c) for c in cells])
    return _table(header, rows, sort, ascending, top)


def _delivered(sub: dict | None) -> object:
    """A subscription's cell in the table of every strategy: what it delivered, marked when not exact."""
    if sub is None:  # a report written by hand, or by an older version, may lack it
        return None
    return sub["delivered"] if served_exactly(sub) else f"{sub['delivered']} NOT EXACT"


def streams_table(report: dict, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """Every stream: the backbone bytes of each strategy's flows of it, or the bytes and tuples of one."""
    names = _strategies(report, strategy)
    per = {n: {s["id"]: s for s in report["strategies"][n].get("streams", ())} for n in names}
    ids = list(dict.fromkeys(i for n in names for i in per[n]))  # a report written by hand may list them apart
    if strategy is not None:
        header = ["stream", "backbone bytes", "backbone tuples"]
        rows = [[i, per[strategy][i].get("backbone_bytes"), per[strategy][i].get("backbone_tuples")] for i in ids]
    else:
        header = ["stream", *names]
        rows = [[i, *(per[n].get(i, {}).get("backbone_bytes") for n in names)] for i in ids]
    return _table(header, rows, sort or header[1], ascending, top)


def show(where: str, what: str, strategy: str | None, sort: str | None, ascending: bool, top: int | None) -> str:
    """``what`` (one of :data:`VIEWS`) of the report at ``where``.  Raises InputError for a report that is
    not one, and for options the view does not take: ``--top`` below 0, ``--sort``, ``--ascending`` or
    ``--top`` on the table (whose rows are the strategies, in the report's order).  Views: ``table``,
    ``links``, ``subscriptions`` or ``streams``."""
    if what not in VIEWS:
        raise InputError(f"show: no view {shown(what)} (views: {', '.join(VIEWS)})")
    if top is not None and (not isinstance(top, int) or isinstance(top, bool) or top < 0):
        raise InputError(f"--top: expected a number of rows, 0 or more, got {shown(top)}")
    if what == "table" and (sort is not None or ascending or top is not None):
        raise InputError(
            "--sort, --ascending and --top apply to --links, --subscriptions and --streams, not to the table"
        )
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
