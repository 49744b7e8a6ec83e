"""Replay files: CSV tables whose rows a stream emits in order (``replay:`` in docs/SCENARIOS.md).

The header names the attributes; a column whose cells are all numbers is a number attribute, any other a
string attribute: its values are the column's distinct texts, sorted, and a cell holds the position of its
text among them (its code; see matcher/parser.py).  The loader reads a file once to validate it
and to give each attribute its empirical distribution; the workload reads rows from the same cached
table, so a file is parsed at most once per process.

A stream may name a **time column** (``time:``): its cells are the rows' timestamps, seconds (any number)
or ISO 8601 date-times (``2024-05-01T12:00:00.250Z``; without a zone, UTC), and they drive emission: the
rows are taken in timestamp order (stably: rows of one instant keep the file's order) and row ``i`` is
emitted at its timestamp minus the earliest (or minus ``start``, when given: rows before it are left out),
so the recording's gaps and bursts are kept.  The time column is not an attribute.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import lru_cache

import numpy as np

from topologies.errors import shown

ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_TEXT_LENGTH = 100  # characters of a string attribute's value (it appears in queries and results)
MAX_TIME_SECONDS = Decimal("1e15")  # a time cell's magnitude: 31 million years, still exact to 0.1 s as a float


class ReplayFileError(ValueError):
    """A replay file cannot be used; the message names the row and column but not the file."""


@dataclass(frozen=True, eq=False)
class ReplayTable:
    """The parsed file: attribute names in header order and one float64 column per name (a string
    attribute's: codes into ``texts[name]``); with a time column, the rows in timestamp order and ``times``,
    each row's emission time in seconds (ascending, the first 0)."""

    names: tuple[str, ...]
    columns: dict[str, np.ndarray]
    times: np.ndarray | None = None
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.columns[self.names[0]]) if self.names else len(self.times)


def _timestamp(text: str, row: int, name: str) -> Decimal | datetime:
    """A time cell as written: a number of seconds (exact, as a Decimal), or an ISO 8601 date-time (UTC when
    it gives no zone).  Kept exact so that a row 1 ms after another is emitted exactly 0.001 s later, however
    large the timestamps."""
    try:
        value = Decimal(text)
    except ArithmeticError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ReplayFileError(
                f"row {row}, column {shown(name)}: not a time (seconds, or an ISO 8601 date-time): {shown(text)}"
            ) from None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if not value.is_finite():
        raise ReplayFileError(f"row {row}, column {shown(name)}: not a finite number: {shown(text)}")
    if value.copy_abs() > MAX_TIME_SECONDS:  # beyond it, differences overflow the decimal context or lose the second
        raise ReplayFileError(
            f"row {row}, column {shown(name)}: {shown(text)} seconds, over the limit of {MAX_TIME_SECONDS:.0e}"
        )
    return value


@lru_cache(maxsize=32)
def read_replay(path: str, time: str | None = None, start: str | None = None) -> ReplayTable:
    """Parse the CSV at ``path`` (an absolute path; cached per process), ``time`` naming its time column and
    ``start`` (a time of the same kind, as text) the moment emission time 0 stands for.

    Rows are numbered as in a text editor (the header is row 1).  Raises ReplayFileError for an empty
    file, a file without data rows, a bad or duplicate header name, a row with the wrong number of
    cells, a cell that is not a finite number, a number column whose range overflows, a time column the
    header lacks, whose cells mix numbers and dates (or are not of ``start``'s kind) or hold a number of
    seconds over :data:`MAX_TIME_SECONDS`; OSError if the file cannot be read.
    """
    with open(path, newline="", encoding="utf-8-sig") as handle:  # a UTF-8 byte-order mark is accepted
        try:
            rows = list(csv.reader(handle))
        except csv.Error as err:  # e.g. a cell over the csv module's field size limit
            raise ReplayFileError(f"not a readable CSV file: {err}") from None
    if not rows:
        raise ReplayFileError("empty file (expected a header row of attribute names)")
    names = tuple(name.strip() for name in rows[0])
    seen: set[str] = set()
    for name in names:
        if not ATTRIBUTE_NAME.fullmatch(name):
            raise ReplayFileError(f"row 1: bad attribute name {shown(name)} (expected letters, digits, _)")
        if name in seen:
            raise ReplayFileError(f"row 1: duplicate attribute name {shown(name)}")
        seen.add(name)
    data = [(number, row) for number, row in enumerate(rows[1:], start=2) if row]
    if not data:
        raise ReplayFileError("no data rows after the header")
    if time is not None and time not in names:
        has = ", ".join(n if len(n) <= 40 else shown(n) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        raise ReplayFileError(f"row 1: no time column {shown(time)} (the header has: {has})")
    at = names.index(time) if time is not None else -1
    kept = tuple(n for n in names if n != time)
    cells_of: list[list[str]] = []
    stamps: list[Decimal | datetime] = []
    dates: set[bool] = set()
    for number, row in data:
        if len(row) != len(names):
            raise ReplayFileError(f"row {number}: {len(row)} cells, expected {len(names)}")
        cells = [text.strip() for text in row]
        if at >= 0:
            stamps.append(_timestamp(cells[at], number, names[at]))
            dates.add(isinstance(stamps[-1], datetime))
            if len(dates) > 1:
                raise ReplayFileError(f"row {number}, column {shown(time)}: numbers and dates mixed in the time column")
            del cells[at]
        cells_of.append(cells)
    values = np.empty((len(data), len(kept)), dtype=np.float64)
    texts = {}
    for k, name in enumerate(kept):
        column = [cells[k] for cells in cells_of]
        try:
            values[:, k] = [float(text) for text in column]
        except ValueError:  # a cell that is not a number: the column holds texts
            texts[name] = tuple(sorted(set(column)))
            longest = max(texts[name], key=len)
            if len(longest) > MAX_TEXT_LENGTH:
                row = data[column.index(longest)][0]
                raise ReplayFileError(
                    f"row {row}, column {shown(name)}: a text of {len(longest):,} characters (at most"
                    f" {MAX_TEXT_LENGTH}): {shown(longest)}"
                ) from None
            code = {text: float(c) for c, text in enumerate(texts[name])}
            values[:, k] = [code[text] for text in column]
            continue
        bad = np.flatnonzero(~np.isfinite(values[:, k]))
        if len(bad):
            raise ReplayFileError(
                f"row {data[bad[0]][0]}, column {shown(name)}: not a finite number: {shown(column[bad[0]])}"
            )
        low, high = float(values[:, k].min()), float(values[:, k].max())
        if not np.isfinite(high - low):  # as a uniform range: a box is a fraction of it, so is a cost estimate
            raise ReplayFileError(
                f"column {shown(name)}: values from {low:g} to {high:g}, too wide a range (the largest minus the"
                " smallest overflows)"
            )
    times = None
    if at >= 0:
        order = sorted(range(len(stamps)), key=stamps.__getitem__)  # stable: rows of one instant keep their order
        first = stamps[order[0]]
        if start is not None:
            first = _timestamp(start, 0, "start")
            if isinstance(first, datetime) != isinstance(stamps[0], datetime):
                raise ReplayFileError(f"time_start {shown(start)} and the time column are not of one kind")
            order = [k for k in order if stamps[k] >= first]
            if not order:
                raise ReplayFileError(f"no row at or after time_start {shown(start)}")
        offsets = [stamps[k] - first for k in order]
        seconds = [o.total_seconds() if isinstance(o, timedelta) else float(o) for o in offsets]
        values, times = values[order], np.array(seconds, dtype=np.float64)
        times.flags.writeable = False
    columns = {name: values[:, k].copy() for k, name in enumerate(kept)}
    for column in columns.values():
        column.flags.writeable = False  # shared by every caller through the cache
    return ReplayTable(kept, columns, times, texts)
