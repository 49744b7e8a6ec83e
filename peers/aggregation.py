"""The aggregation operator of a super-peer: an aggregate subscription's records built from partial states
per pane (docs/QUERIES.md, "Windowed aggregates"; the answer is ``topologies/expected_aggregates.py``'s).

**Panes are the unit of sharing.**  Time is cut into panes of length ``gcd(size, slide)`` (exact
fractions), so every window is a whole run of panes: ``size / pane`` of them, starting every
``slide / pane``.  A pane's partial state per group is computed once, however many windows hold it, and any
pane length dividing several subscriptions' sizes and slides (:meth:`Pane.of` of their windows) serves
them all: each assembles its windows from the same states (:func:`records`).  A count window is cut the
same way in runs of ``gcd(size, slide)`` consecutive input tuples of a group.

**States merge exactly.**  A state is a count and, per attribute, the number of NaN, ``+inf`` and ``-inf``
values, the exact sum and sum of squares of the finite values (Python integers at the fixed binary scale
``2**-SCALE`` and ``2**-(2 * SCALE)``: every float64 is an integer multiple of ``2**-1074``, so integers
add without error), the least and greatest non-NaN values and, for the holistic MEDIAN only, the sorted
values themselves.  So the states of two disjoint parts of the input combine to the states of the whole
(:func:`merge`, associative and commutative): a run cut into time chunks, or two super-peers' parts,
combine into the same records, and coarser groups are the combination of finer ones (:func:`roll_up`).
Values are rounded once, when a record is made (:func:`records`): that is what makes a SUM equal
``math.fsum`` and an AVG the exact mean rounded, whatever the order or cut of the input, where summing
floats would depend on both.

**The kernel** (:func:`panes`) is vectorised: tuples are sorted by (pane, group), each finite value is split
by ``np.frexp`` into a 53-bit integer mantissa and an exponent, and the mantissas (and the products of their
18-bit pieces, for the squares) are summed per (pane, group, exponent) in int64, which cannot overflow for
up to :data:`BLOCK` tuples (larger inputs are cut into blocks and merged).  Only the few sums per
(pane, group, exponent) are then shifted and added in Python integers.

Non-finite values, rounding and ties follow the reference exactly (see its docstring): NaN or both
infinities make every aggregate but COUNT NaN; one infinity makes SUM and AVG that infinity and VAR and
STDDEV NaN; results beyond the float64 range round to an infinity.  HAVING is evaluated as there, by
:func:`topologies.expected.satisfies` (an infinite value holds the finite bounds it lies beyond).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from matcher.aggregate import AggregateQuery, Window, pane_length
from topologies.expected_aggregates import Records, kept_records

SCALE = 1126
"""Sums are integers times ``2**-SCALE`` (sums of squares times ``2**-(2 * SCALE)``): a float64 is
``m * 2**(e - 53)`` with a 53-bit ``m`` and ``e >= -1073`` (``np.frexp``), so its shift to this scale,
``e + 1073``, is never negative."""

BLOCK = 1 << 25
"""Tuples one vectorised pass sums: the pieces' products are below ``2**37``, so sums of this many fit int64."""

_PIECE = 18
_MASK = (1 << _PIECE) - 1

STATE_NAMES = ("sum", "sumsq", "min", "max", "values")
"""The per-attribute states a pane may keep (every pane keeps its count and, for each attribute it keeps any
state of, the numbers of NaN and infinite values)."""

Group = tuple[float, ...]
Key = tuple[int, Group]


@dataclass(frozen=True)
class Pane:
    """Panes of ``length`` seconds of emission time (pane ``i`` covers ``[i * length, (i + 1) * length)``),
    or for count windows (``tuples``) of ``length`` consecutive input tuples of a group."""

    length: Fraction
    tuples: bool = False

    @classmethod
    def of(cls, *windows: Window) -> Pane:
        """The longest pane every window is a whole run of: the gcd of their sizes and slides.  Raises
        ValueError for no window, or for time and count windows together."""
        if not windows or len({w.tuples for w in windows}) > 1:
            raise ValueError("panes are cut for one or more windows of one kind (time or count)")
        return cls(pane_length(windows), windows[0].tuples)

    def divides(self, window: Window) -> bool:
        """Every window of ``window`` is a whole run of these panes."""
        return (
            self.tuples == window.tuples
            and (window.size / self.length).denominator == 1
            and (window.slide / self.length).denominator == 1
        )


def states_needed(query: AggregateQuery) -> frozenset[tuple[str, str]]:
    """``(state, attribute)`` pairs the records of ``query`` are assembled from (the count is always kept)."""
    needs = set()
    for aggregate in query.aggregates:
        needs.update((state, attr) for state, attr in aggregate.states() if attr is not None)
        if aggregate.holistic:
            needs.add(("values", aggregate.attribute))
    return frozenset(needs)


@dataclass(frozen=True, eq=False)
class Partial:
    """One attribute's partial state over the tuples of a pane and group; a state not kept is None."""

    nan: int
    posinf: int
    neginf: int
    sum: int | None = None
    """Exact sum of the finite values, times ``2**SCALE``."""
    sumsq: int | None = None
    """Exact sum of their squares, times ``2**(2 * SCALE)``."""
    min: float | None = None
    """Least non-NaN value (``inf`` when there is none)."""
    max: float | None = None
    values: np.ndarray | None = None
    """Every value in ascending order, NaN last (read-only)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partial):
            return NotImplemented
        same = (self.nan, self.posinf, self.neginf, self.sum, self.sumsq, self.min, self.max) == (
            other.nan,
            other.posinf,
            other.neginf,
            other.sum,
            other.sumsq,
            other.min,
            other.max,
        )
        if self.values is None or other.values is None:
            return same and self.values is other.values
        return same and np.array_equal(self.values, other.values, equal_nan=True)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class State:
    """The partial state of a pane and group: its number of tuples and a :class:`Partial` per attribute."""

    count: int
    partials: Mapping[str, Partial]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, State):
            return NotImplemented
        return self.count == other.count and dict(self.partials) == dict(other.partials)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class PaneStates(Mapping[Key, State]):
    """The states of an input, ``(pane number, group key) -> State``, in ascending key order, with what they
    were cut by: the pane, the group attributes (key order) and the states kept."""

    pane: Pane
    groups: tuple[str, ...]
    needs: frozenset[tuple[str, str]]
    states: Mapping[Key, State]

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))

    def __reduce__(self):
        """Pickled as its fields (a read-only view does not pickle): the Spark engine's chunks send them."""
        return (PaneStates, (self.pane, self.groups, self.needs, dict(self.states)))

    def __getitem__(self, key: Key) -> State:
        return self.states[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.states)

    def __len__(self) -> int:
        return len(self.states)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PaneStates):
            return NotImplemented
        return (self.pane, self.groups, self.needs) == (other.pane, other.groups, other.needs) and dict(
            self.states
        ) == dict(other.states)

    __hash__ = None  # type: ignore[assignment]

    def group_counts(self) -> dict[Group, int]:
        """Input tuples per group: for count panes, what the next chunk of the input starts after
        (``panes(..., before=...)``)."""
        counts: dict[Group, int] = {}
        for (_, group), state in self.states.items():
            counts[group] = counts.get(group, 0) + state.count
        return counts


def panes(
    pane: Pane,
    needs: Iterable[tuple[str, str]],
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    groups: tuple[str, ...],
    before: Mapping[Group, int] | None = None,
) -> PaneStates:
    """The states of the input tuples ``times`` and ``columns`` per pane and group (``groups``' values).

    Time panes take the tuples in any order (the states of any partition of an input merge to the whole's).
    Count panes number each group's tuples in the order given, which must be emission order, after
    ``before[group]`` earlier ones (the :meth:`PaneStates.group_counts` of the input before this chunk).

    Raises ValueError for an unknown state, columns whose lengths differ from the times', a NaN group
    value, or count panes over times not ascending; KeyError naming a missing attribute."""
    needs = frozenset(needs)
    unknown = sorted(state for state, _ in needs if state not in STATE_NAMES)
    if unknown:
        raise ValueError(f"unknown states {unknown}; a pane keeps {STATE_NAMES}")
    times = np.asarray(times, dtype=np.float64)
    n = len(times)
    attributes = sorted({attr for _, attr in needs})
    for name in (*groups, *attributes):
        if len(columns[name]) != n:
            raise ValueError(f"column {name!r} has {len(columns[name])} values for {n} times")
    if pane.tuples and n and np.any(times[1:] < times[:-1]):
        raise ValueError("count panes number the tuples in emission order: the times are not ascending")
    if n > BLOCK:
        return _blocks(pane, needs, times, columns, groups, before)
    keys, group = _group_numbers(columns, groups, n)
    number = _count_panes(pane, group, keys, before) if pane.tuples else _time_panes(pane, times)
    first = int(number.min()) if n else 0
    width = max(len(keys), 1)
    segment = (number - first) * width + group
    order = np.argsort(segment, kind="stable")
    segment = segment[order]
    starts = np.flatnonzero(np.concatenate(([True], segment[1:] != segment[:-1]))) if n else np.zeros(0, np.int64)
    counts = np.diff(np.append(starts, n)).tolist()
    partials = {
        attr: _partials(columns[attr][order], starts, {s for s, a in needs if a == attr}) for attr in attributes
    }
    heads = segment[starts]
    states = {}
    for s, (head, count) in enumerate(zip(heads.tolist(), counts, strict=True)):
        key = (first + head // width, keys[head % width])
        states[key] = State(count, {attr: partials[attr][s] for attr in attributes})
    return PaneStates(pane, tuple(groups), needs, dict(sorted(states.items())))


def merge(*parts: PaneStates) -> PaneStates:
    """The states of the union of disjoint inputs, from theirs (exact, associative and commutative; for
    count panes each later part cut with ``before`` the counts of the earlier ones).  Raises ValueError when
    the parts differ in pane, groups or states kept."""
    if not parts:
        raise ValueError("merge needs one or more PaneStates")
    head = parts[0]
    for part in parts[1:]:
        if (part.pane, part.groups, part.needs) != (head.pane, head.groups, head.needs):
            raise ValueError(
                f"cannot merge states cut differently: {part.pane}, {part.groups}, {sorted(part.needs)} "
                f"and {head.pane}, {head.groups}, {sorted(head.needs)}"
            )
    together: dict[Key, list[State]] = {}
    for part in parts:
        for key, state in part.states.items():
            together.setdefault(key, []).append(state)
    return PaneStates(head.pane, head.groups, head.needs, {k: _combine(together[k]) for k in sorted(together)})


def roll_up(states: PaneStates, keep: tuple[str, ...]) -> PaneStates:
    """The states of the coarser grouping by ``keep`` (attributes among ``states.groups``, in the key order
    wanted): the states of the groups agreeing on them, combined.  Raises ValueError for an attribute not
    grouped by, or for count panes (a count window's tuples are numbered within the finer group)."""
    missing = [name for name in keep if name not in states.groups]
    if missing:
        raise ValueError(f"cannot roll up to {missing}: the states are grouped by {states.groups}")
    if states.pane.tuples:
        raise ValueError("count panes do not roll up: a coarser group numbers its tuples differently")
    where = [states.groups.index(name) for name in keep]
    together: dict[Key, list[State]] = {}
    for (number, group), state in states.states.items():
        together.setdefault((number, tuple(group[i] for i in where)), []).append(state)
    return PaneStates(states.pane, tuple(keep), states.needs, {k: _combine(together[k]) for k in sorted(together)})


def records(query: AggregateQuery, states: PaneStates, at: float, until: float | None, duration: float) -> Records:
    """The records of ``query`` (active over ``[at, until)``, ``until`` None: to ``duration``) from the
    states of its input.  A time window is received when it lies wholly inside ``[at, until)`` and
    ``[0, duration)``; a count window is emitted when each of its panes is complete.  Raises ValueError
    when the states' panes do not divide the query's window, or their groups or kept states do not serve
    it (:func:`roll_up` makes coarser groups)."""
    window = query.window
    if not states.pane.divides(window):
        raise ValueError(f"panes {states.pane} do not divide the query's {window.to_text()}")
    if states.groups != query.groups:
        raise ValueError(f"states grouped by {states.groups} do not serve a query grouped by {query.groups}")
    lacking = sorted(states_needed(query) - states.needs)
    if lacking:
        raise ValueError(f"the states lack {lacking}, which the query's aggregates need")
    per_group: dict[Group, dict[int, State]] = {}
    for (number, group), state in states.states.items():
        per_group.setdefault(group, {})[number] = state
    run = int(window.size / states.pane.length)
    step = int(window.slide / states.pane.length)
    if window.tuples:
        windows = _count_windows(per_group, run, step, int(states.pane.length))
    else:
        windows = _time_windows(per_group, run, step, _received(window, at, until, duration))
    keys: list[Key] = []
    rows: list[dict[str, float]] = []
    for key, state in windows:
        row = dict(zip(query.groups, key[1], strict=True))
        for output in query.aggregates:
            row[query.column(output)] = _value(output.function, state, output.attribute)
        keys.append(key)
        rows.append(row)
    return kept_records(query, keys, rows)


def aggregate(
    query: AggregateQuery,
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    at: float,
    until: float | None,
    duration: float,
) -> Records:
    """The records of ``query`` over the tuples it received (``times`` ascending, ``columns`` as read),
    active over ``[at, until)``: :func:`panes` then :func:`records`.  The tuples received emitted outside
    ``[at, until)`` are not its input and are left out (what a subscriber receives need not be exact).
    Raises as they do, and ValueError for times not ascending."""
    times = np.asarray(times, dtype=np.float64)
    if len(times) and np.any(times[1:] < times[:-1]):
        raise ValueError("the input's emission times are not ascending")
    active = (times >= at) & (times < (math.inf if until is None else until))
    if not active.all():
        times, columns = times[active], {name: np.asarray(values)[active] for name, values in columns.items()}
    states = panes(Pane.of(query.window), states_needed(query), times, columns, query.groups)
    return records(query, states, at, until, duration)


def pane_rows(length: Fraction, times: np.ndarray, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The rows a pane operator emits over an input (``times`` ascending, ``groups`` its group attributes'
    columns): per time pane of ``length`` seconds and group holding input tuples, the position of its last
    tuple in the input (ascending) and its pane number."""
    times = np.asarray(times, dtype=np.float64)
    if not len(times):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    number = _time_panes(Pane(length), times)
    code = np.unique(np.column_stack(groups), axis=0, return_inverse=True)[1].reshape(-1) if groups else 0 * number
    position = np.arange(len(times))
    order = np.lexsort((position, code, number))
    number, code = number[order], code[order]
    ends = np.flatnonzero(np.concatenate(((number[1:] != number[:-1]) | (code[1:] != code[:-1]), [True])))
    last = order[ends]
    ascending = np.argsort(last, kind="stable")
    return last[ascending].astype(np.int64), number[ends][ascending]


def _blocks(
    pane: Pane,
    needs: frozenset[tuple[str, str]],
    times: np.ndarray,
    columns: Mapping[str, np.ndarray],
    groups: tuple[str, ...],
    before: Mapping[Group, int] | None,
) -> PaneStates:
    """:func:`panes` of an input longer than :data:`BLOCK`, a block at a time, merged."""
    done: PaneStates | None = None
    counts = dict(before or {})
    for start in range(0, len(times), BLOCK):
        cut = slice(start, start + BLOCK)
        part = panes(pane, needs, times[cut], {name: columns[name][cut] for name in columns}, groups, counts)
        done = part if done is None else merge(done, part)
        for group, count in part.group_counts().items():
            counts[group] = counts.get(group, 0) + count
    assert done is not None
    return done


def _group_numbers(
    columns: Mapping[str, np.ndarray], groups: tuple[str, ...], n: int
) -> tuple[list[Group], np.ndarray]:
    """The distinct group keys in ascending order and each tuple's number among them: each attribute's
    values are numbered, then the combinations of numbers."""
    if not groups:
        return [()], np.zeros(n, np.int64)
    code = np.zeros(n, np.int64)
    width = 1
    for name in groups:
        values = np.asarray(columns[name], dtype=np.float64)
        if np.isnan(values).any():
            raise ValueError(f"group attribute {name!r} has a NaN value; records are keyed by the group values")
        distinct, inverse = np.unique(values, return_inverse=True)
        width *= len(distinct)
        if width >= 1 << 62:  # too many combinations to number in int64: number the rows themselves
            table = np.column_stack([np.asarray(columns[g], dtype=np.float64) for g in groups])
            distinct_rows, inverse = np.unique(table, axis=0, return_inverse=True)
            return [tuple(row) for row in distinct_rows.tolist()], inverse.ravel().astype(np.int64)
        code = code * len(distinct) + inverse.ravel()
    _, first, number = np.unique(code, return_index=True, return_inverse=True)
    table = np.column_stack([np.asarray(columns[g], dtype=np.float64)[first] for g in groups])
    return [tuple(row) for row in table.tolist()], number.ravel().astype(np.int64)


def least_float_from(x: Fraction) -> float:
    """The least float64 not below ``x``: a time ``t`` is at least ``x`` exactly when ``t >=`` it."""
    nearest = x.numerator / x.denominator  # int division: correctly rounded
    p, q = nearest.as_integer_ratio()
    return float(np.nextafter(nearest, math.inf)) if p * x.denominator < x.numerator * q else nearest


def _time_panes(pane: Pane, times: np.ndarray) -> np.ndarray:
    """Each time's pane number ``floor(t / length)``, exactly: a float estimate (off by at most one while
    ``t / length < 2**52``), corrected by the exact first times of the estimated panes and the next."""
    if len(times) and np.abs(times).max() / float(pane.length) >= 2.0**52:
        raise ValueError(f"times up to {np.abs(times).max()} s are too many panes of {pane.length} s to number")
    estimate = np.floor(times / float(pane.length)).astype(np.int64)
    distinct, which = np.unique(estimate, return_inverse=True)
    start = np.array([least_float_from(i * pane.length) for i in distinct.tolist()])
    end = np.array([least_float_from((i + 1) * pane.length) for i in distinct.tolist()])
    which = which.ravel()
    return estimate - (times < start[which]) + (times >= end[which])


def _count_panes(pane: Pane, group: np.ndarray, keys: list[Group], before: Mapping[Group, int] | None) -> np.ndarray:
    """Each tuple's pane number: its position among its group's tuples (after ``before`` earlier ones)
    divided by the pane length."""
    counts = np.bincount(group, minlength=len(keys))
    order = np.argsort(group, kind="stable")
    position = np.empty(len(group), np.int64)
    position[order] = np.arange(len(group)) - np.repeat(np.cumsum(counts) - counts, counts)
    if before:
        position += np.array([before.get(key, 0) for key in keys], np.int64)[group]
    return position // int(pane.length)


def _partials(values: np.ndarray, starts: np.ndarray, kept: set[str]) -> list[Partial]:
    """One attribute's :class:`Partial` per segment (``values`` sorted by segment, segment ``s`` starting at
    ``starts[s]``), with the states ``kept``."""
    values = np.asarray(values, dtype=np.float64)
    if not len(starts):
        return []
    nan, posinf, neginf = np.isnan(values), values == np.inf, values == -np.inf
    fields: dict[str, list] = {
        "nan": np.add.reduceat(nan.astype(np.int64), starts).tolist(),
        "posinf": np.add.reduceat(posinf.astype(np.int64), starts).tolist(),
        "neginf": np.add.reduceat(neginf.astype(np.int64), starts).tolist(),
    }
    if "min" in kept:
        fields["min"] = np.minimum.reduceat(np.where(nan, np.inf, values), starts).tolist()
    if "max" in kept:
        fields["max"] = np.maximum.reduceat(np.where(nan, -np.inf, values), starts).tolist()
    if kept & {"sum", "sumsq"}:
        finite = np.where(nan | posinf | neginf, 0.0, values)
        sums, squares = _exact_sums(finite, starts, "sumsq" in kept)
        fields["sum"] = sums
        if "sumsq" in kept:
            fields["sumsq"] = squares
    if "values" in kept:
        segment = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(values))))
        ordered = values[np.lexsort((values, segment))]
        ordered.flags.writeable = False
        fields["values"] = np.split(ordered, starts[1:])
    names = list(fields)
    return [Partial(**dict(zip(names, row, strict=True))) for row in zip(*fields.values(), strict=True)]


def _exact_sums(values: np.ndarray, starts: np.ndarray, squares: bool) -> tuple[list[int], list[int]]:
    """Per segment, the exact sum of ``values`` (finite) times ``2**SCALE`` and, when ``squares``, of their
    squares times ``2**(2 * SCALE)``.  Each value is ``m * 2**(e - 53)``; the mantissas are summed per
    (segment, exponent) in 18-bit pieces, then each such row is shifted to the scale in Python integers."""
    fraction, exponent = np.frexp(values)
    mantissa = (fraction * 2.0**53).astype(np.int64)
    segment = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(values))))
    low = int(exponent.min())
    row_key = segment * (int(exponent.max()) - low + 1) + (exponent - low)
    order = np.argsort(row_key, kind="stable")
    row_key, mantissa = row_key[order], mantissa[order]
    heads = np.flatnonzero(np.concatenate(([True], row_key[1:] != row_key[:-1])))
    row_segment = segment[order][heads].tolist()
    shift = (exponent[order][heads].astype(np.int64) + 1073).tolist()

    def piece_sums(pieces: list[np.ndarray]) -> list[list[int]]:
        return [np.add.reduceat(p, heads).tolist() for p in pieces]

    high, middle, bottom = piece_sums([mantissa >> 2 * _PIECE, (mantissa >> _PIECE) & _MASK, mantissa & _MASK])
    sums = [0] * len(starts)
    for s, h, m, b, k in zip(row_segment, high, middle, bottom, shift, strict=True):
        sums[s] += ((h << 2 * _PIECE) + (m << _PIECE) + b) << k
    if not squares:
        return sums, []
    size = np.abs(mantissa)
    h, m, b = size >> 2 * _PIECE, (size >> _PIECE) & _MASK, size & _MASK
    products = piece_sums([h * h, 2 * h * m, 2 * h * b + m * m, 2 * m * b, b * b])
    totals = [0] * len(starts)
    for s, k, *p in zip(row_segment, shift, *products, strict=True):
        square = sum(x << (_PIECE * (4 - i)) for i, x in enumerate(p))
        totals[s] += square << 2 * k
    return sums, totals


def _combine(states: list[State]) -> State:
    """The state of the union of the disjoint inputs of ``states``."""
    if len(states) == 1:
        return states[0]
    partials = {}
    for attr in states[0].partials:
        parts = [s.partials[attr] for s in states]
        first = parts[0]
        partials[attr] = Partial(
            sum(p.nan for p in parts),
            sum(p.posinf for p in parts),
            sum(p.neginf for p in parts),
            None if first.sum is None else sum(p.sum for p in parts),
            None if first.sumsq is None else sum(p.sumsq for p in parts),
            None if first.min is None else min(p.min for p in parts),
            None if first.max is None else max(p.max for p in parts),
            None if first.values is None else _sorted_together([p.values for p in parts]),
        )
    return State(sum(s.count for s in states), partials)


def _sorted_together(arrays: list[np.ndarray]) -> np.ndarray:
    together = np.sort(np.concatenate(arrays), kind="stable")
    together.flags.writeable = False
    return together


def _received(window: Window, at: float, until: float | None, duration: float) -> range:
    """The time windows a subscription active over ``[at, until)`` receives: those wholly inside it and the run."""
    start = max(Fraction(at), Fraction(0))
    end = Fraction(duration) if until is None else min(Fraction(until), Fraction(duration))
    return range(math.ceil(start / window.slide), math.floor((end - window.size) / window.slide) + 1)


def _time_windows(
    per_group: dict[Group, dict[int, State]], run: int, step: int, received: range
) -> Iterator[tuple[Key, State]]:
    """Each received window holding panes of a group, with their combined state (window ``k`` is panes
    ``k * step`` to ``k * step + run - 1``)."""
    found: list[tuple[Key, State]] = []
    for group, states in per_group.items():
        numbers = sorted(states)
        windows = set()
        for i in numbers:  # the windows holding pane i: k * step <= i <= k * step + run - 1
            windows.update(range(max(-((run - 1 - i) // step), received.start), min(i // step + 1, received.stop)))
        for k in sorted(windows):
            inside = numbers[bisect_left(numbers, k * step) : bisect_left(numbers, k * step + run)]
            found.append(((k, group), _combine([states[i] for i in inside])))
    return iter(sorted(found, key=lambda item: item[0]))


def _count_windows(
    per_group: dict[Group, dict[int, State]], run: int, step: int, length: int
) -> Iterator[tuple[Key, State]]:
    """Each count window of a group whose panes are all complete, with their combined state."""
    found: list[tuple[Key, State]] = []
    for group, states in per_group.items():
        last, j = max(states), 0
        while j * step + run - 1 <= last:
            inside = [states.get(i) for i in range(j * step, j * step + run)]
            if all(s is not None and s.count == length for s in inside):
                found.append(((j, group), _combine(inside)))  # type: ignore[arg-type]
            j += 1
    return iter(sorted(found, key=lambda item: item[0]))


def _value(function: str, state: State, attribute: str | None) -> float:
    """``function`` of ``attribute`` over the tuples of ``state``, rounded once."""
    n = state.count
    if function == "COUNT":
        return float(n)
    p = state.partials[attribute]  # type: ignore[index]
    if p.nan or (p.posinf and p.neginf):
        return math.nan
    infinity = math.inf if p.posinf else -math.inf if p.neginf else None
    if function in ("SUM", "AVG"):
        if infinity is not None:
            return infinity
        return _divide(p.sum, (n if function == "AVG" else 1) << SCALE)  # type: ignore[arg-type]
    if function in ("VAR", "STDDEV"):
        if infinity is not None:
            return math.nan
        variance = _divide(n * p.sumsq - p.sum * p.sum, (n * n) << (2 * SCALE))  # type: ignore[operator]
        return variance if function == "VAR" else math.sqrt(variance)
    if function == "MIN":
        return p.min  # type: ignore[return-value]
    if function == "MAX":
        return p.max  # type: ignore[return-value]
    low, high = float(p.values[(n - 1) // 2]), float(p.values[n // 2])  # type: ignore[index]
    if low == high:
        return low
    if math.isinf(low) or math.isinf(high):
        return low if math.isinf(low) else high
    (a, b), (c, d) = low.as_integer_ratio(), high.as_integer_ratio()
    return _divide(a * d + c * b, 2 * b * d)


def _divide(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` rounded once (int division is correctly rounded), an infinity beyond
    the float64 range (where int division raises)."""
    try:
        return numerator / denominator
    except OverflowError:
        return math.inf if numerator > 0 else -math.inf
