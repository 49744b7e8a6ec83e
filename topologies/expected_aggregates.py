"""The centralized answer of an aggregate subscription: its records, computed plainly (docs/QUERIES.md,
"Windowed aggregates").

This is the reference every engine's records are checked against, so it is written to be obviously right
rather than fast, and shares no code with the engine operator (``peers/aggregation.py``), which builds
records from mergeable partial states per pane.  Here a record is computed from the very values of its
window and group:

- **Windows.**  Time window ``k`` covers ``[k * slide, k * slide + size)`` of emission time, compared
  exactly: a window's ends are exact fractions and each tuple's time is compared as the exact rational its
  float64 is (``bisect`` with ``key=Fraction``), so ``0.3`` (a float just below 3/10) lies in the window
  ending at 3/10.  A subscription active over ``[at, until)`` receives the windows lying wholly inside
  ``[at, until)`` and ``[0, duration)``.  Count window ``j`` of a group holds that group's input tuples
  ``j * slide`` to ``j * slide + size - 1`` (in emission order); an incomplete last window emits nothing,
  and ``at``, ``until`` and ``duration`` play no further part (the input is already the subscription's).
- **Records.**  A window emits one record per group holding at least one of its input tuples, then HAVING
  (a predicate over the record's columns, :func:`topologies.expected.satisfies`) removes records: a NaN
  value fails every bound, an infinite one holds the finite bounds it lies beyond (``SUM(x) > 5`` holds for
  ``inf``, as the comparison written says; a matcher ``Interval`` would leave infinities out).
- **Values**, each the exact result rounded once to float64: COUNT the number of tuples (NaN values
  included); SUM the exact sum (``math.fsum``'s result, where ``fsum`` does not overflow on the way); AVG the
  exact mean; VAR the exact population variance ``(n Σx² - (Σx)²) / n²``; STDDEV ``math.sqrt`` of VAR; MIN
  and MAX exact; MEDIAN the middle value (odd count) or the exact midpoint of the two middle values.  Sums
  are exact because every finite float is an integer over a power of two: a group's values are scaled to
  integers over their largest denominator, and Python integers add without error.  A result beyond the
  float64 range rounds to an infinity, as IEEE rounding does (a SUM of ``[1e308, 1e308]`` is ``inf``; its
  AVG is ``1e308``).
- **Non-finite values**, per attribute of a record: if any value is NaN, or both ``+inf`` and ``-inf``
  occur, every aggregate of it but COUNT is NaN.  Otherwise, if one infinity occurs, SUM and AVG are that
  infinity, VAR and STDDEV NaN, and MIN, MAX and MEDIAN follow the ordinary order (the midpoint of an
  infinity and anything else is that infinity).  A zero result is ``+0.0`` (the exact sum has no sign);
  ``-0.0`` and ``0.0`` compare equal.

A group attribute's NaN value is rejected (ValueError): records are keyed by group values, and NaN equals
nothing.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping
from fractions import Fraction

import numpy as np

from matcher.aggregate import Aggregate, AggregateQuery

Key = tuple[int, tuple[float, ...]]
"""A record's key: its window's id and its group's values."""

Records = dict[Key, tuple[float, ...]]
"""An aggregate subscription's records: ``(window id, group key) -> values``.  The group key holds the
group attributes' values in ``query.groups`` order (``()`` without GROUP BY); the values are those of
``query.selected`` in order (COUNT as a float)."""


def expected_records(
    query: AggregateQuery,
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    at: float,
    until: float | None,
    duration: float,
) -> Records:
    """The records of ``query`` over its input: ``times`` (ascending emission times) and ``columns``
    (attribute -> float64 values) of the tuples emitted while it was active over ``[at, until)`` that
    satisfy its WHERE (``until`` None: to the end of the run, ``duration``).

    Raises ValueError when the times are not ascending or lie outside ``[at, until)``, when the columns'
    lengths differ from the times', or when a group attribute has a NaN value; KeyError naming a missing
    attribute."""
    groups = _Groups(query, times, columns, at, until)
    attributes = tuple(dict.fromkeys(a.reads for a in query.aggregates if a.reads is not None))
    values = {
        (g, name): _GroupValues(columns[name][rows], query.aggregates)
        for g, rows in enumerate(groups.rows)
        for name in attributes
    }
    keys: list[Key] = []
    rows: list[dict[str, float]] = []
    for window, g, lo, hi in groups.segments(query, duration):
        row = dict(zip(query.groups, groups.keys[g], strict=True))
        for aggregate in query.aggregates:
            if aggregate.reads is None:  # COUNT
                row[query.column(aggregate)] = float(hi - lo)
            else:
                row[query.column(aggregate)] = values[g, aggregate.attribute].value(aggregate.function, lo, hi)
        keys.append((window, groups.keys[g]))
        rows.append(row)
    return kept_records(query, keys, rows)


def records_fed(
    query: AggregateQuery,
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    at: float,
    until: float | None,
    duration: float,
    which: np.ndarray,
) -> set[tuple[int, tuple[float, ...]]]:
    """The keys ``(window, group)`` of the records whose window holds any of the input tuples ``which``
    (a boolean mask over the input, or indices into it), HAVING not applied: the records a dropped or lost
    input tuple may have changed.  Arguments and errors as :func:`expected_records`; IndexError for an
    index outside the input."""
    groups = _Groups(query, times, columns, at, until)
    which = np.asarray(which)
    fed = np.zeros(len(times), dtype=bool)
    fed[which if which.dtype == bool else which.astype(np.int64)] = True
    # per group, how many of its tuples before each position are fed: a segment is fed when its count is positive
    before = [np.concatenate(([0], np.cumsum(fed[rows]))).tolist() for rows in groups.rows]
    return {
        (window, groups.keys[g])
        for window, g, lo, hi in groups.segments(query, duration)
        if before[g][hi] > before[g][lo]
    }


def record_closings(
    query: AggregateQuery,
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    at: float,
    until: float | None,
    duration: float,
    keys: Collection[Key],
) -> Iterator[tuple[Key, int, float]]:
    """For each record of ``keys`` (records of ``query`` over this input, as :func:`expected_records` keys
    them): ``(key, last, closes)``, ``last`` the position in the input of its window's last tuple of its
    group, ``closes`` the emission time its window closes at (a time window's end, rounded to the nearest
    float; a count window's last tuple's time), in the order of the windows.  Arguments and errors as
    :func:`expected_records`."""
    groups = _Groups(query, times, columns, at, until)
    window = query.window
    for k, g, _, hi in groups.segments(query, duration):
        key = (k, groups.keys[g])
        if key in keys:
            last = int(groups.rows[g][hi - 1])
            closes = groups.times[last] if window.tuples else float(k * window.slide + window.size)
            yield key, last, closes


def same_values(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Two records' values are equal, NaN equal to NaN (and ``-0.0`` to ``0.0``, as ``==`` has it)."""
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


def same_records(a: Records, b: Records) -> bool:
    """Two sets of records have the same keys and, key by key, :func:`same_values`."""
    return a.keys() == b.keys() and all(same_values(a[key], b[key]) for key in a)


class _Groups:
    """The input split by group: ``keys[g]`` is group ``g``'s key, ``rows[g]`` its input positions in
    emission order, ``times`` the input's times as Python floats."""

    def __init__(
        self,
        query: AggregateQuery,
        times: np.ndarray,
        columns: Mapping[str, np.ndarray],
        at: float,
        until: float | None,
    ):
        times = np.asarray(times, dtype=np.float64)
        n = len(times)
        for name in (*query.groups, *(a.reads for a in query.aggregates if a.reads is not None)):
            if len(columns[name]) != n:
                raise ValueError(f"column {name!r} has {len(columns[name])} values for {n} times")
        if n and np.any(times[1:] < times[:-1]):
            raise ValueError("the input's emission times are not ascending")
        if n and (times[0] < at or (until is not None and times[-1] >= until)):
            raise ValueError(
                f"the input holds tuples emitted outside [{at}, {until}), when the subscription was active"
            )
        self.times = times.tolist()
        self.at, self.until = at, until
        self.keys: list[tuple[float, ...]] = []
        self.rows: list[np.ndarray] = []
        if not n:
            return
        if not query.groups:
            self.keys, self.rows = [()], [np.arange(n)]
            return
        table = np.column_stack([np.asarray(columns[name], dtype=np.float64) for name in query.groups])
        if np.isnan(table).any():
            raise ValueError(f"a group attribute of {query.groups} has a NaN value; records are keyed by them")
        # a stable sort by the group values (first attribute first) keeps each group's rows in emission order
        order = np.lexsort(table.T[::-1])
        ordered = table[order]
        starts = np.flatnonzero(np.concatenate(([True], np.any(ordered[1:] != ordered[:-1], axis=1))))
        self.keys = [tuple(row) for row in ordered[starts].tolist()]
        self.rows = np.split(order, starts[1:])

    def segments(self, query: AggregateQuery, duration: float) -> Iterator[tuple[int, int, int, int]]:
        """``(window, g, lo, hi)`` for every window and group holding input tuples: the group's tuples
        ``rows[g][lo:hi]`` are the window's."""
        window = query.window
        if window.tuples:
            size, slide = int(window.size), int(window.slide)
            for g, rows in enumerate(self.rows):
                for j in range((len(rows) - size) // slide + 1 if len(rows) >= size else 0):
                    yield j, g, j * slide, j * slide + size
            return
        if not self.rows:
            return
        start = max(Fraction(self.at), Fraction(0))
        end = Fraction(duration) if self.until is None else min(Fraction(self.until), Fraction(duration))
        first = math.ceil(start / window.slide)
        last = math.floor((end - window.size) / window.slide)
        for k in range(first, last + 1):
            lo = bisect_left(self.times, k * window.slide, key=Fraction)
            hi = bisect_left(self.times, k * window.slide + window.size, key=Fraction)
            if lo == hi:
                continue
            for g, rows in enumerate(self.rows):
                # rows are input positions in ascending order: the window's are those in [lo, hi)
                a, b = np.searchsorted(rows, (lo, hi)).tolist()
                if b > a:
                    yield k, g, a, b


class _GroupValues:
    """One attribute's values over one group's input, with what its segments' aggregates need: the values
    as Python floats, prefix counts of NaN and infinities, and the finite values as exact integers over a
    common power-of-two denominator (zero for the non-finite ones) and their squares."""

    def __init__(self, values: np.ndarray, aggregates: tuple[Aggregate, ...]):
        values = np.asarray(values, dtype=np.float64)
        self.values = values.tolist()
        self.nan = np.concatenate(([0], np.cumsum(np.isnan(values)))).tolist()
        self.posinf = np.concatenate(([0], np.cumsum(values == np.inf))).tolist()
        self.neginf = np.concatenate(([0], np.cumsum(values == -np.inf))).tolist()
        self._last = (-1, -1, 0)
        functions = {a.function for a in aggregates}
        if functions & {"SUM", "AVG", "VAR", "STDDEV"}:
            ratios = [x.as_integer_ratio() if math.isfinite(x) else (0, 1) for x in self.values]
            self.denominator = max((q for _, q in ratios), default=1)
            self.scaled = [p * (self.denominator // q) for p, q in ratios]
        if functions & {"VAR", "STDDEV"}:
            self.squares = [v * v for v in self.scaled]

    def _total(self, lo: int, hi: int) -> int:
        # a record asks for the same sum for SUM, AVG, VAR and STDDEV: the last one is kept
        if self._last[:2] != (lo, hi):
            self._last = (lo, hi, sum(self.scaled[lo:hi]))
        return self._last[2]

    def value(self, function: str, lo: int, hi: int) -> float:
        """``function`` over the values ``lo:hi``."""
        n = hi - lo
        if function == "COUNT":
            return float(n)
        nan = self.nan[hi] - self.nan[lo]
        posinf = self.posinf[hi] > self.posinf[lo]
        neginf = self.neginf[hi] > self.neginf[lo]
        if nan or (posinf and neginf):
            return math.nan
        infinite = math.inf if posinf else -math.inf if neginf else None
        if function in ("SUM", "AVG"):
            if infinite is not None:
                return infinite
            total = self._total(lo, hi)
            return _rounded(Fraction(total, self.denominator * (n if function == "AVG" else 1)))
        if function in ("VAR", "STDDEV"):
            if infinite is not None:
                return math.nan
            total = self._total(lo, hi)
            squares = sum(self.squares[lo:hi])
            variance = _rounded(Fraction(n * squares - total * total, n * n * self.denominator**2))
            return variance if function == "VAR" else math.sqrt(variance)
        if function == "MIN":
            return min(self.values[lo:hi])
        if function == "MAX":
            return max(self.values[lo:hi])
        ordered = sorted(self.values[lo:hi])
        low, high = ordered[(n - 1) // 2], ordered[n // 2]
        if low == high or math.isinf(low) or math.isinf(high):
            return low if math.isinf(low) else high  # an infinity wins the midpoint; both cannot occur here
        return _rounded((Fraction(low) + Fraction(high)) / 2)


def _rounded(exact: Fraction) -> float:
    """``exact`` rounded once to float64, to an infinity beyond its range (``float()`` raises there)."""
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def kept_records(query: AggregateQuery, keys: list[Key], rows: list[dict[str, float]]) -> Records:
    """The records HAVING keeps of ``rows`` (one per key of ``keys``: the record's group attributes and
    every aggregate of ``query.aggregates``, by column name), each as the values of ``query.selected``:
    the last step of a record, the same for the central evaluation and the super-peer's operator."""
    kept = [True] * len(rows)
    if rows and not query.having.is_true():
        # imported here: topologies.expected imports this module (its answer carries the records)
        from topologies.expected import satisfies

        columns = {name: np.array([row[name] for row in rows], dtype=np.float64) for name in query.having.dims}
        kept = satisfies(query.having, columns, len(rows)).tolist()
    return {
        key: tuple(row[query.column(a)] for a in query.selected)
        for key, row, keep in zip(keys, rows, kept, strict=True)
        if keep
    }
