"""Replay files: CSV tables whose rows a stream emits in order (``replay:`` in docs/SCENARIOS.md).

The header names the attributes; every cell is a number.  The loader reads a file once to validate it
and to give each attribute its empirical distribution; the workload reads rows from the same cached
table, so a file is parsed at most once per process.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from topologies.errors import shown

ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ReplayFileError(ValueError):
    """A replay file cannot be used; the message names the row and column but not the file."""


@dataclass(frozen=True, eq=False)
class ReplayTable:
    """The parsed file: attribute names in header order and one float64 column per name."""

    names: tuple[str, ...]
    columns: dict[str, np.ndarray]

    @property
    def rows(self) -> int:
        return len(self.columns[self.names[0]])


def _cell(text: str, row: int, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ReplayFileError(f"row {row}, column {shown(name)}: not a number: {shown(text)}") from None
    if not math.isfinite(value):
        raise ReplayFileError(f"row {row}, column {shown(name)}: not a finite number: {shown(text)}")
    return value


@lru_cache(maxsize=32)
def read_replay(path: str) -> ReplayTable:
    """Parse the CSV at ``path`` (an absolute path; cached per process).

    Rows are numbered as in a text editor (the header is row 1).  Raises ReplayFileError for an empty
    file, a file without data rows, a bad or duplicate header name, a row with the wrong number of
    cells, a cell that is not a finite number, or a column whose range overflows; OSError if the file
    cannot be read.
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
    values = np.empty((len(data), len(names)), dtype=np.float64)
    for i, (number, row) in enumerate(data):
        if len(row) != len(names):
            raise ReplayFileError(f"row {number}: {len(row)} cells, expected {len(names)}")
        values[i] = [_cell(text.strip(), number, name) for text, name in zip(row, names, strict=True)]
    columns = {name: values[:, k].copy() for k, name in enumerate(names)}
    for name, column in columns.items():
        low, high = float(column.min()), float(column.max())
        if not math.isfinite(high - low):  # as a uniform range: a box is a fraction of it, so is a cost estimate
            raise ReplayFileError(
                f"column {shown(name)}: values from {low:g} to {high:g}, too wide a range (the largest minus the"
                " smallest overflows)"
            )
        column.flags.writeable = False  # shared by every caller through the cache
    return ReplayTable(names, columns)
