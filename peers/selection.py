"""Every reader of a window in one compiled pass: which tuples each channel carries and what they weigh.

:class:`SelectorTable` holds the readers of a whole run (a flow's or a delivery's filter and projection) as
flat arrays, one entry per distinct reader: the timetable (local engine, Spark) and the live mode's
installs (peers/superpeer.py) add each reader once, by content, so the many flow and delivery objects of a
plan that read alike share an entry.  :func:`select_window` then walks a window's phases in channel order
inside one numba kernel, so the cost of a window is the tuples it moves, not a Python call per reader.  A
parent channel precedes its children, so when a phase is reached its parent's block for the window is
complete: the phase keeps, of the parent's tuples emitted within the phase's interval, those its reader
selects.  :func:`select_batch` runs it on one batch for several readers of it (a live super-peer's input).

A reader is its predicate as boxes over the stream's attributes (NaN lies in no box) and a fixed wire width,
or for a ``trim`` reader (the ``ideal`` bound) a width made of the attributes of the ``trim`` entries each
tuple satisfies.  Trim entries are stored once per (predicate, attributes) and referenced by the readers
listing them; a tuple's width only needs the entries that would add an attribute not yet counted, so the
kernel skips the box test of the others and stops once every attribute of the reader's entries is counted.
A phase without a reader (-1) is an upload: every tuple of the stream, at the full upload width; one with
reader :data:`PASS` passes every tuple of its parent on as it came (a super-peer's processor, which the
operators there read, peers/timetable.py).

Many readers of one parent (a super-peer feeding many flows and deliveries from one input) are read
*together* (:data:`SHARED_READERS`, :func:`_read_together`): rather than each reader scanning the parent's
tuples, each tuple is looked up in a grid over the attributes their boxes bound most, whose cells list the
readers that keep all of the cell (no test), and those that keep part of it (tested as alone); a reader
that keeps none of a cell costs nothing there.  A cell's classification is conservative (each cell widened
by a margin far above any rounding of a tuple's cell), so what each reader keeps is exactly what it keeps
alone; a tuple off the grid, or NaN on it, is tested by every reader.

The plain reference is :meth:`peers.superpeer.Selector.pick`, one reader over the rows asked about (tests
compare the two through :func:`select_rows`); both test boxes with :func:`in_boxes`, which the end-to-end
tests check against a plain numpy evaluation of each subscription.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import NamedTuple

import numpy as np
from numba import njit

from topologies.model import tuple_bytes

_tuple_bytes = njit(tuple_bytes)  # the one wire-size rule, compiled for the kernel
PASS = -2  # the reader of a phase passing every tuple of its parent on (a processor)


class ReaderArrays(NamedTuple):
    """The readers of a :class:`SelectorTable` as the kernel takes them.  Reader ``r`` keeps a tuple in one
    of boxes ``boxes_at[r] .. boxes_end[r] - 1`` (rows of ``pos``/``lo``/``hi``/``lo_closed``/``hi_closed``;
    ``hull_at[r] >= 0``: a row holding them all, tested first), at ``width[r]`` bytes, or (a trim reader:
    ``trim_at[r] < trim_end[r]``) at the width of the attributes of the entries ``trim_entries[trim_at[r] ..
    trim_end[r] - 1]`` it satisfies, ``trim_union[r]`` of them in all.  Entry ``e`` is boxes ``entry_at[e]
    .. entry_end[e] - 1`` with attribute numbers ``entry_attrs[entry_attrs_at[e] .. entry_attrs_end[e] -
    1]``, of ``n_names``."""

    boxes_at: np.ndarray
    boxes_end: np.ndarray
    hull_at: np.ndarray
    width: np.ndarray
    trim_at: np.ndarray
    trim_end: np.ndarray
    trim_union: np.ndarray
    trim_entries: np.ndarray
    entry_at: np.ndarray
    entry_end: np.ndarray
    entry_attrs_at: np.ndarray
    entry_attrs_end: np.ndarray
    entry_attrs: np.ndarray
    n_names: int
    pos: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lo_closed: np.ndarray
    hi_closed: np.ndarray


class Phases(NamedTuple):
    """A window's phases, sorted by (channel, start), each clipped to the window: phase ``p`` gives channel
    ``channel[p]`` the tuples emitted in ``[lo[p], hi[p])`` that reader ``reader[p]`` keeps of its parent's
    (-1: an upload, every tuple of the stream; :data:`PASS`: every tuple of its parent)."""

    channel: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    reader: np.ndarray


class Channels(NamedTuple):
    """Per channel: the channel it reads (-1: it uploads its stream), its stream, and an upload's wire bytes
    per tuple."""

    parent: np.ndarray
    stream: np.ndarray
    upload_wire: np.ndarray


class StreamWindow(NamedTuple):
    """The streams' tuples in a window: stream ``s`` has tuples ``first[s] ..`` (``count[s]`` of them), the
    ``j``-th emitted at ``times[times_at[s] + j]``, its attribute ``a`` (of ``attrs[s]``) at
    ``values[values_at[s] + a * count[s] + j]``."""

    first: np.ndarray
    count: np.ndarray
    times_at: np.ndarray
    values_at: np.ndarray
    attrs: np.ndarray
    times: np.ndarray
    values: np.ndarray


class SelectorTable:
    """The readers of a run as arrays: :meth:`entry` registers a trim entry, :meth:`add` a reader, each
    returning its number.

    ``attributes[stream]`` is the order of a stream's attributes in the window values :func:`select_window`
    gets; a box on an attribute the stream lacks never holds (the timetable's checks reject such a plan
    before any window).  A predicate's boxes are stored once per stream (keyed by the predicate object,
    which the table keeps so its id stays its own)."""

    def __init__(self, attributes: Mapping[str, Sequence[str]], header_bytes: int):
        self.position = {s: {a: k for k, a in enumerate(names)} for s, names in attributes.items()}
        self.header_bytes = header_bytes
        self._names: dict[str, int] = {}  # attribute name -> number, for counting distinct trim attributes
        self.boxes_at: list[int] = []  # per reader: its boxes (rows, as positions in ``members``) from ... to
        self.boxes_end: list[int] = []
        self.width: list[int] = []  # wire bytes of each tuple kept (readers without trim entries)
        self.trim_at: list[int] = []  # its trim entries (positions in ``trim_entries``) from ... to
        self.trim_end: list[int] = []
        self.trim_union: list[int] = []  # distinct attributes over its trim entries
        self.trim_entries: list[int] = []
        self.entry_boxes: list[tuple[int, int]] = []  # per trim entry: its boxes (in ``members``)
        self.entry_attrs: list[tuple[int, int]] = []  # per trim entry: its attribute numbers in ``attrs``
        self._entry_carries: list[frozenset[int]] = []  # per trim entry: its attribute numbers
        self.attrs: list[int] = []
        self.members: list[int] = []  # the distinct boxes (numbers) of each predicate, predicate by predicate
        self._box_size: list[int] = []  # per distinct box: its constraints, each an attribute position and bounds
        self._pos: list[int] = []
        self._bounds: list[tuple[float, float, bool, bool]] = []
        # (id(predicate), stream) -> (predicate, its members from, to)
        self._ranges: dict[tuple[int, str], tuple[object, int, int]] = {}
        self._box_ids: dict[str, dict[int, int]] = {}  # stream -> id(box) -> number
        self._box_numbers: dict[tuple[object, str], int] = {}  # (box, stream) -> number
        self._kept: list[object] = []  # the boxes looked up by id, so their ids stay their own
        self._frozen: tuple | None = None
        # what :meth:`arrays` built so far (extended, not built again, after more additions): the distinct
        # boxes' rows, the rows of ``members``, the readers' hulls, each as the five arrays of
        # :data:`_ROW_FILL`, ``_built_width`` constraints wide; and how many of each it holds
        self._built_width = 1
        self._built_boxes = self._built_rows = self._built_hulls = self._built_constraints = 0
        self._distinct, self._rows, self._hulls = (_empty_rows(0, 1) for _ in range(3))

    def __len__(self) -> int:
        return len(self.width)

    def entry(self, stream: str, predicate, names: tuple[str, ...]) -> int:
        """A new trim entry: tuples of ``stream`` satisfying ``predicate`` carry attributes ``names``."""
        self._frozen = None
        self.entry_boxes.append(self._boxes(predicate, stream))
        carried = frozenset([self._names.setdefault(a, len(self._names)) for a in names])
        self._entry_carries.append(carried)
        first = len(self.attrs)
        self.attrs.extend(sorted(carried))
        self.entry_attrs.append((first, len(self.attrs)))
        return len(self.entry_boxes) - 1

    def add(self, stream: str, predicate, attrs: tuple[str, ...], trim: Sequence[int] = ()) -> int:
        """A new reader of ``stream`` keeping the tuples satisfying ``predicate``, projected to ``attrs``,
        or for a trim reader weighing the attributes of the trim entries (numbers from :meth:`entry`) each
        tuple satisfies; returns its number."""
        self._frozen = None
        at, end = self._boxes(predicate, stream)
        self.boxes_at.append(at)
        self.boxes_end.append(end)
        self.width.append(tuple_bytes(self.header_bytes, len(attrs)))
        self.trim_at.append(len(self.trim_entries))
        if trim:
            carries = self._entry_carries
            # the entries with the most attributes first: a tuple's count fills up (and stops) soonest
            entries = sorted(dict.fromkeys(trim), key=lambda e: -len(carries[e]))
            self.trim_entries.extend(entries)
            self.trim_union.append(len(frozenset().union(*[carries[e] for e in entries])))
        else:
            self.trim_union.append(0)
        self.trim_end.append(len(self.trim_entries))
        return len(self.width) - 1

    def _boxes(self, predicate, stream: str) -> tuple[int, int]:
        """Where the list of ``predicate``'s boxes over ``stream`` is in :attr:`members` (added on first use)."""
        hit = self._ranges.get((id(predicate), stream))
        if hit is None:
            at = len(self.members)
            known = self._box_ids.setdefault(stream, {})
            numbers = list(map(known.get, map(id, predicate.boxes)))
            if None in numbers:
                pairs = zip(predicate.boxes, numbers, strict=True)
                numbers = [self._box(box, stream) if n is None else n for box, n in pairs]
            self.members.extend(numbers)
            hit = self._ranges[(id(predicate), stream)] = (predicate, at, len(self.members))
        return hit[1], hit[2]

    def _box(self, box, stream: str) -> int:
        """The number of ``box`` over ``stream``: each distinct box is stored once (the predicates of a plan
        are mostly unions of its subscriptions' boxes, and share them)."""
        number = self._box_numbers.get((box, stream))
        if number is None:
            number = self._box_numbers[(box, stream)] = len(self._box_size)
            index = self.position[stream]
            missing = len(index)  # an attribute the stream lacks: a position past its attributes never holds
            constraints = box.items()
            self._box_size.append(len(constraints))
            self._pos.extend([index.get(d, missing) for d, _ in constraints])
            self._bounds.extend([iv for _, iv in constraints])
        self._box_ids[stream][id(box)] = number
        self._kept.append(box)
        return number

    def arrays(self) -> ReaderArrays:
        """Everything :func:`select_window` needs of the readers, built after the last addition (extending
        what an earlier call built: a live run adds readers epoch after epoch)."""
        if self._frozen is None:
            self._extend()
            boxes_at, boxes_end = np.array(self.boxes_at, np.int64), np.array(self.boxes_end, np.int64)
            # rows laid out predicate by predicate, the kernel scanning a reader's boxes as one run of them,
            # and after them, per reader of several boxes, their hull: a tuple outside it is in none of them
            hull_at = np.where(boxes_end - boxes_at > 1, len(self.members) + np.arange(len(boxes_at)), -1)
            pos, lo, hi, lo_closed, hi_closed = (
                np.concatenate([x, h]) for x, h in zip(self._rows, self._hulls, strict=True)
            )

            def ints(values):
                return np.array(values, np.int64)

            entries = ints(self.entry_boxes).reshape(-1, 2)
            attrs_of = ints(self.entry_attrs).reshape(-1, 2)
            self._frozen = ReaderArrays(
                boxes_at,
                boxes_end,
                hull_at,
                ints(self.width),
                ints(self.trim_at),
                ints(self.trim_end),
                ints(self.trim_union),
                ints(self.trim_entries),
                np.ascontiguousarray(entries[:, 0]),
                np.ascontiguousarray(entries[:, 1]),
                np.ascontiguousarray(attrs_of[:, 0]),
                np.ascontiguousarray(attrs_of[:, 1]),
                ints(self.attrs),
                len(self._names),
                pos,
                lo,
                hi,
                lo_closed,
                hi_closed,
            )
        return self._frozen

    def _extend(self) -> None:
        """Add the boxes, rows and hulls of what was added since the last call to what is built."""
        size = np.array(self._box_size[self._built_boxes :], np.int64)
        width = max(self._built_width, int(size.max(initial=0)))
        if width > self._built_width:
            self._distinct, self._rows, self._hulls = (
                _widened(x, width) for x in (self._distinct, self._rows, self._hulls)
            )
            self._built_width = width
        # constraint k of new distinct box b at [b, k] (padding: position -1, which always holds)
        n_boxes = len(size)
        row = np.repeat(np.arange(n_boxes), size)
        col = np.arange(len(row)) - np.repeat(np.cumsum(size) - size, size)
        first = self._built_constraints
        flat = chain.from_iterable(self._bounds[first:])
        bounds = np.fromiter(flat, np.float64, 4 * len(row)).reshape(-1, 4)
        pos, lo, hi, lo_closed, hi_closed = _empty_rows(n_boxes, width)
        pos[row, col] = self._pos[first:]
        lo[row, col], hi[row, col] = bounds[:, 0], bounds[:, 1]
        lo_closed[row, col], hi_closed[row, col] = bounds[:, 2] > 0, bounds[:, 3] > 0
        self._distinct = _joined(self._distinct, (pos, lo, hi, lo_closed, hi_closed))
        members = np.array(self.members[self._built_rows :], np.int64)
        self._rows = _joined(self._rows, tuple(x[members] for x in self._distinct))
        boxes_at = np.array(self.boxes_at[self._built_hulls :], np.int64)
        boxes_end = np.array(self.boxes_end[self._built_hulls :], np.int64)
        hulls = _empty_rows(len(boxes_at), width)
        _hulls(boxes_at, boxes_end, *self._rows, *hulls)
        self._hulls = _joined(self._hulls, hulls)
        self._built_boxes, self._built_constraints = len(self._box_size), len(self._pos)
        self._built_rows, self._built_hulls = len(self.members), len(self.boxes_at)


_ROW_FILL = ((-1, np.int64), (-np.inf, np.float64), (np.inf, np.float64), (False, np.bool_), (False, np.bool_))
"""Box rows as five arrays (attribute positions, lower and upper bounds, whether each is closed) and what
pads a row past its constraints: position -1 (always holds), unbounded, open."""


def _empty_rows(n: int, width: int) -> tuple[np.ndarray, ...]:
    return tuple(np.full((n, width), value, dtype) for value, dtype in _ROW_FILL)


def _widened(rows: tuple[np.ndarray, ...], width: int) -> tuple[np.ndarray, ...]:
    """``rows`` padded to ``width`` constraints."""
    wide = _empty_rows(len(rows[0]), width)
    for x, w in zip(rows, wide, strict=True):
        w[:, : x.shape[1]] = x
    return wide


def _joined(rows: tuple[np.ndarray, ...], more: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.concatenate([x, y]) for x, y in zip(rows, more, strict=True))


@njit(cache=True)
def _hulls(boxes_at, boxes_end, pos, lo, hi, lo_closed, hi_closed, h_pos, h_lo, h_hi, h_lo_closed, h_hi_closed):
    """Per reader ``r`` of several boxes (rows ``boxes_at[r] .. boxes_end[r] - 1``), the smallest box
    holding them all into row ``r`` of the ``h_*`` arrays: each attribute every box constrains, from the
    least of their lower bounds to the greatest of their upper ones (an end shared by several is closed if
    any of them is)."""
    for r in range(len(boxes_at)):
        at, end = boxes_at[r], boxes_end[r]
        if end - at < 2:
            continue
        out = 0
        for k in range(pos.shape[1]):
            a = pos[at, k]
            if a < 0:
                break
            low, low_closed, high, high_closed = lo[at, k], lo_closed[at, k], hi[at, k], hi_closed[at, k]
            everywhere = True
            for b in range(at + 1, end):
                found = -1
                for j in range(pos.shape[1]):
                    if pos[b, j] == a:
                        found = j
                        break
                    if pos[b, j] < 0:
                        break
                if found < 0:
                    everywhere = False
                    break
                if lo[b, found] < low:
                    low, low_closed = lo[b, found], lo_closed[b, found]
                elif lo[b, found] == low:
                    low_closed = low_closed or lo_closed[b, found]
                if hi[b, found] > high:
                    high, high_closed = hi[b, found], hi_closed[b, found]
                elif hi[b, found] == high:
                    high_closed = high_closed or hi_closed[b, found]
            if everywhere:
                h_pos[r, out], h_lo[r, out], h_hi[r, out] = a, low, high
                h_lo_closed[r, out], h_hi_closed[r, out] = low_closed, high_closed
                out += 1


@njit(cache=True, inline="always")
def in_boxes(values, base, stride, col, at, end, pos, lo, hi, lo_closed, hi_closed, n_attrs):
    """Whether tuple ``col`` of a stream (attribute ``a`` at ``values[base + a * stride + col]``) lies in
    one of boxes ``at..end-1``: each box a row of ``pos`` (attribute positions, -1 pads; one at or past
    ``n_attrs`` never holds) and its bounds.  NaN lies in no box (every comparison with it is false).
    The one box test of the engine: the compiled selection and the reference scan both call it."""
    for b in range(at, end):
        inside = True
        for k in range(pos.shape[1]):
            a = pos[b, k]
            if a < 0:
                break
            if a >= n_attrs:
                inside = False
                break
            v = values[base + a * stride + col]
            if not ((v >= lo[b, k]) if lo_closed[b, k] else (v > lo[b, k])):
                inside = False
                break
            if not ((v <= hi[b, k]) if hi_closed[b, k] else (v < hi[b, k])):
                inside = False
                break
        if inside:
            return True
    return False


@njit(cache=True)
def _grow(a, size):
    out = np.empty(max(size, 2 * len(a)), a.dtype)
    out[: len(a)] = a
    return out


SHARED_READERS = 8
"""A parent channel read over a whole window by at least this many plain readers (one phase each, no trim)
has them read it together, tuple by tuple over a grid (:func:`_read_together`)."""

GRID_CELLS = 4096
"""At most this many cells in the grid of a parent read together (fewer for few tuples: at least
:data:`TUPLES_PER_CELL` per cell, so classifying the cells costs less than testing the tuples)."""

TUPLES_PER_CELL = 64

TOGETHER_TUPLES = 4096
"""The fewest tuples of a parent in a window for its readers to be read together: with fewer, the grid
has few cells and each tuple is tested by about as many readers as alone, for the cost of the lookup."""


@njit(cache=True)
def _grid(members, ph_reader, boxes_at, boxes_end, pos, lo, hi, n_attrs, tuples):
    """The grid a parent's ``members`` (phases) are read over: up to three attributes their readers' boxes
    bound most often, each from the least to the greatest finite bound on it, cut into ``cuts`` cells
    (a grid of no attribute: one cell, everything in it).  Returns ``(dims, low, width, cuts)``."""
    counts = np.zeros(n_attrs, np.int64)
    low = np.full(n_attrs, np.inf)
    high = np.full(n_attrs, -np.inf)
    for p in members:
        r = ph_reader[p]
        for b in range(boxes_at[r], boxes_end[r]):
            for k in range(pos.shape[1]):
                a = pos[b, k]
                if a < 0:
                    break
                if a >= n_attrs:
                    continue
                for bound in (lo[b, k], hi[b, k]):
                    if np.isfinite(bound):
                        low[a], high[a] = min(low[a], bound), max(high[a], bound)
                counts[a] += 1
    chosen = np.empty(3, np.int64)
    n_dims = 0
    for a in np.argsort(-counts, kind="mergesort")[:3]:
        if counts[a] > 0 and high[a] > low[a]:
            chosen[n_dims] = a
            n_dims += 1
    dims = chosen[:n_dims].copy()
    total = max(1, min(GRID_CELLS, tuples // TUPLES_PER_CELL))
    cuts = 1
    while len(dims) and (cuts + 1) ** len(dims) <= total:
        cuts += 1
    return dims, low[dims], (high[dims] - low[dims]) / cuts, cuts


@njit(cache=True)
def _classes(members, ph_reader, boxes_at, boxes_end, pos, lo, hi, n_attrs, dims, low, width, cuts):
    """Per cell of the grid, its members' readers that keep every tuple in it (``full``) and those that
    keep some (``partial``), as runs ``at[cell] .. middle[cell] - 1`` and ``middle[cell] .. at[cell + 1]
    - 1`` of member numbers.  Each cell is widened by a margin far above the rounding of a tuple's cell,
    so a tuple counted in a cell lies in its widened box: a reader keeps all of a cell when one of its
    boxes bounds only the grid's attributes and holds the widened cell strictly inside, none of it when
    each of its boxes lies strictly outside it (or bounds an attribute the stream lacks)."""
    n_dims = len(dims)
    n_cells = cuts**n_dims
    k_members = len(members)
    cls = np.zeros((n_cells, k_members), np.uint8)  # 0: none, 1: all, 2: some
    margin = np.empty(n_dims)
    for d in range(n_dims):
        margin[d] = 1e-9 * max(abs(low[d]), abs(low[d] + width[d] * cuts), width[d])
    cell_lo = np.empty(n_dims)
    cell_hi = np.empty(n_dims)
    for cell in range(n_cells):
        rest = cell
        for d in range(n_dims - 1, -1, -1):
            i = rest % cuts
            rest //= cuts
            cell_lo[d] = low[d] + i * width[d] - margin[d]
            cell_hi[d] = low[d] + (i + 1) * width[d] + margin[d]
        for m in range(k_members):
            r = ph_reader[members[m]]
            some = False
            for b in range(boxes_at[r], boxes_end[r]):
                outside = False
                inside = True
                for k in range(pos.shape[1]):
                    a = pos[b, k]
                    if a < 0:
                        break
                    if a >= n_attrs:
                        outside = True
                        break
                    d = -1
                    for e in range(n_dims):
                        if dims[e] == a:
                            d = e
                    if d < 0:
                        inside = False  # bounds an attribute off the grid (NaN lies outside any bound)
                        continue
                    if hi[b, k] < cell_lo[d] or lo[b, k] > cell_hi[d]:
                        outside = True
                        break
                    if not (lo[b, k] < cell_lo[d] and hi[b, k] > cell_hi[d]):
                        inside = False
                if outside:
                    continue
                if inside:
                    cls[cell, m] = 1
                    break
                some = True
            if cls[cell, m] == 0 and some:
                cls[cell, m] = 2
    at = np.zeros(n_cells + 1, np.int64)
    for cell in range(n_cells):
        at[cell + 1] = at[cell] + np.count_nonzero(cls[cell])
    middle = np.empty(n_cells, np.int64)
    order = np.empty(at[n_cells], np.int64)
    for cell in range(n_cells):
        q = at[cell]
        for want in (1, 2):
            if want == 2:
                middle[cell] = q
            for m in range(k_members):
                if cls[cell, m] == want:
                    order[q] = m
                    q += 1
    return at, middle, order


@njit(cache=True)
def _read_together(members, a, b, values, base, stride, s_first, n_attrs, ph_reader, readers, indices):
    """Which of the tuples ``a .. b - 1`` of a parent's block each of the ``members``
    (phases reading it) keeps: tuple by tuple, over a grid of the readers' boxes (:func:`_grid`,
    :func:`_classes`), testing only the readers that keep some of the tuple's cell; a tuple off the grid
    (or NaN on it) tested by every reader.  Returns per member its tuples kept (``kept[at[m] .. at[m + 1]
    - 1]``, ascending positions in the block)."""
    boxes_at, boxes_end, hull_at = readers[0], readers[1], readers[2]
    pos, lo, hi, lo_closed, hi_closed = readers[14], readers[15], readers[16], readers[17], readers[18]
    dims, low, width, cuts = _grid(members, ph_reader, boxes_at, boxes_end, pos, lo, hi, n_attrs, b - a)
    at, middle, order = _classes(members, ph_reader, boxes_at, boxes_end, pos, lo, hi, n_attrs, dims, low, width, cuts)
    n_dims, k_members = len(dims), len(members)
    top = low + width * cuts
    pair_m = np.empty(max(16, 2 * (b - a)), np.int64)
    pair_j = np.empty(max(16, 2 * (b - a)), np.int64)
    count = np.zeros(k_members, np.int64)
    n = 0
    for j in range(a, b):
        col = indices[j] - s_first
        cell = 0
        for d in range(n_dims):
            v = values[base + dims[d] * stride + col]
            if not (v >= low[d] and v <= top[d]):  # off the grid, or NaN
                cell = -1
                break
            i = min(int((v - low[d]) / width[d]), cuts - 1)
            cell = cell * cuts + i
        if cell < 0:
            first, mid, end = 0, 0, k_members
        else:
            first, mid, end = at[cell], middle[cell], at[cell + 1]
        if n + (end - first) > len(pair_m):
            pair_m, pair_j = _grow(pair_m, n + end - first), _grow(pair_j, n + end - first)
        for q in range(first, end):
            m = order[q] if cell >= 0 else q
            if q >= mid:
                r = ph_reader[members[m]]
                h = hull_at[r]
                if h >= 0 and not in_boxes(
                    values, base, stride, col, h, h + 1, pos, lo, hi, lo_closed, hi_closed, n_attrs
                ):
                    continue
                if not in_boxes(
                    values, base, stride, col, boxes_at[r], boxes_end[r], pos, lo, hi, lo_closed, hi_closed, n_attrs
                ):
                    continue
            pair_m[n], pair_j[n] = m, j
            count[m] += 1
            n += 1
    kept_at = np.zeros(k_members + 1, np.int64)
    for m in range(k_members):
        kept_at[m + 1] = kept_at[m] + count[m]
    kept = np.empty(n, np.int64)
    fill = kept_at[:k_members].copy()
    for q in range(n):
        m = pair_m[q]
        kept[fill[m]] = pair_j[q]
        fill[m] += 1
    return kept_at, kept


@njit(cache=True)
def _together(ph_channel, ph_lo, ph_hi, ph_reader, ch_parent, trim_at, trim_end):
    """Which phases are read together with their siblings (:data:`SHARED_READERS`): a plain reader's (no
    trim) over the whole window, its channel's only phase, its parent read so by enough of them.  Returns
    per phase whether, and per parent ``P`` its phases ``by_parent[parent_at[P] .. parent_at[P + 1] - 1]``
    (in phase order)."""
    n_ph, n_ch = len(ph_channel), len(ch_parent)
    together = np.zeros(n_ph, np.bool_)
    parent_at = np.zeros(n_ch + 1, np.int64)
    if n_ph == 0:
        return together, np.empty(0, np.int64), parent_at
    start, end = ph_lo.min(), ph_hi.max()
    phases_of = np.zeros(n_ch, np.int64)
    for p in range(n_ph):
        phases_of[ph_channel[p]] += 1
    readers_of = np.zeros(n_ch, np.int64)
    for p in range(n_ph):
        c, r = ph_channel[p], ph_reader[p]
        if (
            r >= 0 and ch_parent[c] >= 0 and phases_of[c] == 1 and trim_at[r] == trim_end[r]
            and ph_lo[p] == start and ph_hi[p] == end
        ):  # fmt: skip
            together[p] = True
            readers_of[ch_parent[c]] += 1
    for p in range(n_ph):
        if together[p] and readers_of[ch_parent[ph_channel[p]]] < SHARED_READERS:
            together[p] = False
    for p in range(n_ph):
        if together[p]:
            parent_at[ch_parent[ph_channel[p]] + 1] += 1
    for c in range(n_ch):
        parent_at[c + 1] += parent_at[c]
    by_parent = np.empty(parent_at[n_ch], np.int64)
    fill = parent_at[:n_ch].copy()
    for p in range(n_ph):
        if together[p]:
            q = ch_parent[ph_channel[p]]
            by_parent[fill[q]] = p
            fill[q] += 1
    return together, by_parent, parent_at


@njit(cache=True)
def _lay_out_together(
    members, phases, channels, streams, readers, reserve, ch_first, ch_count, indices, emitted, parents, wire, n
):
    """The blocks of the channels of ``members`` (phases reading one parent over the whole window, in
    phase order; the parent has a block), one after the other from ``n``: each its places for held-back
    copies, then the parent's tuples its reader keeps (:func:`_read_together`).  Returns the outputs (grown
    if needed) and the new ``n``."""
    ph_channel, ph_lo, ph_hi, ph_reader = phases
    ch_parent, ch_stream, _ = channels
    st_first, st_count, _, st_values, st_attrs, _, values = streams
    width = readers[3]
    c0 = ph_channel[members[0]]
    parent, s = ch_parent[c0], ch_stream[c0]
    f = ch_first[parent]
    own = f + reserve[parent]
    m = ch_count[parent] - reserve[parent]
    a = own + np.searchsorted(emitted[own : own + m], ph_lo[members[0]], side="left")
    b = own + np.searchsorted(emitted[own : own + m], ph_hi[members[0]], side="left")
    kept_at = np.zeros(len(members) + 1, np.int64)
    kept = np.empty(0, np.int64)
    if a < b:
        kept_at, kept = _read_together(
            members, a, b, values, st_values[s], st_count[s], st_first[s], st_attrs[s], ph_reader, readers, indices
        )  # fmt: skip
    size = n + len(kept)
    for p in members:
        size += reserve[ph_channel[p]]
    if size > len(indices):
        indices, emitted = _grow(indices, size), _grow(emitted, size)
        parents, wire = _grow(parents, size), _grow(wire, size)
    for k in range(len(members)):
        c = ph_channel[members[k]]
        ch_first[c] = n
        n += reserve[c]
        w = width[ph_reader[members[k]]]
        for q in range(kept_at[k], kept_at[k + 1]):
            j = kept[q]
            indices[n] = indices[j]
            emitted[n] = emitted[j]
            parents[n] = j - f
            wire[n] = w
            n += 1
        ch_count[c] = n - ch_first[c]
    return indices, emitted, parents, wire, n


@njit(cache=True)
def select_window(phases, channels, streams, readers, header, reserve, ch_first, ch_count):
    """The blocks of one window (:class:`Phases`, :class:`Channels`, :class:`StreamWindow`,
    :class:`ReaderArrays`): per channel (``ch_first``/``ch_count``, set here; -1/0 where none) a run of the
    flat outputs ``(indices, emitted, parent positions, wire)``, indices ascending.  Each channel's block
    starts with ``reserve[c]`` places left unset (for copies of earlier windows the caller puts there; a
    parent position counts them), a channel with places but no phase getting a block of them alone.  The
    readers of a parent read together (module docstring, :func:`_together`) get their blocks, one after
    the other, when the first of them is reached.

    One loop over the phases, the readers' tests written out in it: the records are unpacked into locals
    once, where the kernel reads them per tuple (split into functions taking the records, the trim readers'
    windows ran about 1.4x as long)."""
    ph_channel, ph_lo, ph_hi, ph_reader = phases
    ch_parent, ch_stream, ch_upload_wire = channels
    st_first, st_count, st_times, st_values, st_attrs, times, values = streams
    (
        boxes_at,
        boxes_end,
        hull_at,
        width,
        trim_at,
        trim_end,
        trim_union,
        trim_entries,
        entry_at,
        entry_end,
        entry_attrs_at,
        entry_attrs_end,
        entry_attrs,
        n_names,
        pos,
        lo,
        hi,
        lo_closed,
        hi_closed,
    ) = readers
    together, by_parent, parent_at = _together(ph_channel, ph_lo, ph_hi, ph_reader, ch_parent, trim_at, trim_end)
    done = np.zeros(len(ch_parent), np.bool_)  # the parents whose readers together have been read
    capacity = 16
    for s in range(len(st_count)):
        capacity += 2 * st_count[s]
    indices = np.empty(capacity, np.int64)
    emitted = np.empty(capacity, np.float64)
    parents = np.empty(capacity, np.int64)
    wire = np.empty(capacity, np.int64)
    mark = np.zeros(max(1, n_names), np.int64)  # stamp per attribute counted, for trim widths
    stamp = 0
    ch_first[:] = -1
    ch_count[:] = 0
    n = 0
    for p in range(len(ph_channel)):
        c = ph_channel[p]
        s = ch_stream[c]
        if together[p]:
            parent = ch_parent[c]
            if done[parent]:
                continue  # laid out with the first of its parent's readers
            done[parent] = True
            members = by_parent[parent_at[parent] : parent_at[parent + 1]]
            if ch_first[parent] >= 0 and ch_count[parent] - reserve[parent] >= TOGETHER_TUPLES:
                indices, emitted, parents, wire, n = _lay_out_together(
                    members, phases, channels, streams, readers, reserve, ch_first, ch_count, indices, emitted,
                    parents, wire, n,
                )  # fmt: skip
                continue
            together[members] = False  # too few tuples for a grid to pay: each reader reads them alone
        if ch_first[c] < 0:
            if n + reserve[c] > len(indices):
                indices, emitted = _grow(indices, n + reserve[c]), _grow(emitted, n + reserve[c])
                parents, wire = _grow(parents, n + reserve[c]), _grow(wire, n + reserve[c])
            ch_first[c], ch_count[c] = n, reserve[c]
            n += reserve[c]
        r = ph_reader[p]
        parent = ch_parent[c]
        if parent < 0:  # an upload: every tuple of the stream emitted within the phase
            t0 = st_times[s]
            own = times[t0 : t0 + st_count[s]]
            a = np.searchsorted(own, ph_lo[p], side="left")
            b = np.searchsorted(own, ph_hi[p], side="left")
            if n + (b - a) > len(indices):
                indices, emitted = _grow(indices, n + b - a), _grow(emitted, n + b - a)
                parents, wire = _grow(parents, n + b - a), _grow(wire, n + b - a)
            for j in range(a, b):
                indices[n] = st_first[s] + j
                emitted[n] = own[j]
                parents[n] = -1
                wire[n] = ch_upload_wire[c]
                n += 1
            ch_count[c] = n - ch_first[c]
            continue
        f = ch_first[parent]
        if f < 0:
            continue
        own = f + reserve[parent]  # the parent's tuples of this window
        m = ch_count[parent] - reserve[parent]
        a = own + np.searchsorted(emitted[own : own + m], ph_lo[p], side="left")
        b = own + np.searchsorted(emitted[own : own + m], ph_hi[p], side="left")
        if a == b:
            continue
        if n + (b - a) > len(indices):
            indices, emitted = _grow(indices, n + b - a), _grow(emitted, n + b - a)
            parents, wire = _grow(parents, n + b - a), _grow(wire, n + b - a)
        if r == PASS:  # a processor: every tuple of its parent, as it came
            for j in range(a, b):
                indices[n], emitted[n], parents[n], wire[n] = indices[j], emitted[j], j - f, wire[j]
                n += 1
            ch_count[c] = n - ch_first[c]
            continue
        base, stride, n_attrs = st_values[s], st_count[s], st_attrs[s]
        trimmed = trim_at[r] < trim_end[r]
        h = hull_at[r]
        for j in range(a, b):
            col = indices[j] - st_first[s]
            if h >= 0 and not in_boxes(values, base, stride, col, h, h + 1, pos, lo, hi, lo_closed, hi_closed, n_attrs):
                continue
            if not in_boxes(
                values, base, stride, col, boxes_at[r], boxes_end[r], pos, lo, hi, lo_closed, hi_closed, n_attrs
            ):
                continue
            w = width[r]
            if trimmed:
                stamp += 1
                carried = 0
                for q in range(trim_at[r], trim_end[r]):
                    e = trim_entries[q]
                    adds = False  # only an entry with an attribute not yet counted can change the width
                    for z in range(entry_attrs_at[e], entry_attrs_end[e]):
                        if mark[entry_attrs[z]] != stamp:
                            adds = True
                            break
                    if not adds or not in_boxes(
                        values, base, stride, col, entry_at[e], entry_end[e], pos, lo, hi, lo_closed, hi_closed, n_attrs
                    ):
                        continue
                    for z in range(entry_attrs_at[e], entry_attrs_end[e]):
                        if mark[entry_attrs[z]] != stamp:
                            mark[entry_attrs[z]] = stamp
                            carried += 1
                    if carried == trim_union[r]:
                        break
                w = _tuple_bytes(header, carried)
            indices[n] = indices[j]
            emitted[n] = emitted[j]
            parents[n] = j - f
            wire[n] = w
            n += 1
        ch_count[c] = n - ch_first[c]
    for c in range(len(reserve)):
        if reserve[c] > 0 and ch_first[c] < 0:
            if n + reserve[c] > len(indices):
                indices, emitted = _grow(indices, n + reserve[c]), _grow(emitted, n + reserve[c])
                parents, wire = _grow(parents, n + reserve[c]), _grow(wire, n + reserve[c])
            ch_first[c], ch_count[c] = n, reserve[c]
            n += reserve[c]
    return indices[:n], emitted[:n], parents[:n], wire[:n]


@njit(cache=True)
def processor_work(phases, ch_parent, processor, tests, projection, reserve, ch_first, ch_count, emitted, parents):
    """Per entry of a window's blocks (:func:`select_window`'s outputs), the operations it costs the
    processor it queues at: each tuple of a processor (``processor[c]``) costs ``tests[r]`` for every
    reader ``r`` reading it there in the phase of its emission, and ``projection[c]`` for every channel
    ``c`` keeping it projected; other entries, and the places reserved for earlier copies, cost 0 here."""
    ph_channel, ph_lo, ph_hi, ph_reader = phases
    steps = np.zeros(len(emitted) + 1, np.int64)  # the tests, as steps up and down over each phase's tuples
    for p in range(len(ph_channel)):
        c, r = ph_channel[p], ph_reader[p]
        q = ch_parent[c]
        if r < 0 or q < 0 or not processor[q] or ch_first[q] < 0:
            continue
        own, m = ch_first[q] + reserve[q], ch_count[q] - reserve[q]
        a = own + np.searchsorted(emitted[own : own + m], ph_lo[p], side="left")
        b = own + np.searchsorted(emitted[own : own + m], ph_hi[p], side="left")
        steps[a] += tests[r]
        steps[b] -= tests[r]
    work = np.cumsum(steps[:-1])
    for p in range(len(ph_channel)):
        c, r = ph_channel[p], ph_reader[p]
        q = ch_parent[c]
        if r < 0 or q < 0 or not processor[q] or ch_first[q] < 0:
            continue
        if projection[c] == 0 or ch_first[c] < 0:
            continue
        own, m = ch_first[c] + reserve[c], ch_count[c] - reserve[c]
        a = own + np.searchsorted(emitted[own : own + m], ph_lo[p], side="left")
        b = own + np.searchsorted(emitted[own : own + m], ph_hi[p], side="left")
        for j in range(a, b):
            work[ch_first[q] + parents[j]] += projection[c]
    return work


def select_batch(
    table: SelectorTable, readers: Sequence[int], names: tuple[str, ...], values: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """What each of ``readers`` (numbers in ``table``, all of one stream with attributes ``names``) keeps of
    a batch of that stream's tuples (``values``: one row per attribute, one column per tuple; NaN where a
    tuple has no value): per reader, the positions kept (ascending) and their wire bytes.

    One :func:`select_window` call: channel 0 uploads the batch, channel ``j + 1`` is reader ``j`` reading
    channel 0.  The live mode's super-peers run it on every batch they receive."""
    batch = np.ascontiguousarray(values, np.float64)
    n, k = batch.shape[1], len(readers)
    ch_first, ch_count = np.empty(k + 1, np.int64), np.empty(k + 1, np.int64)
    _, _, parents, wire = select_window(
        Phases(np.arange(k + 1, dtype=np.int64), np.full(k + 1, -1.0), np.full(k + 1, float(n)),
               np.array([-1, *readers], np.int64)),
        Channels(np.array([-1, *[0] * k], np.int64), np.zeros(k + 1, np.int64), np.zeros(k + 1, np.int64)),
        StreamWindow(np.zeros(1, np.int64), np.array([n], np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64),
                     np.array([len(names)], np.int64), np.arange(n, dtype=np.float64), batch.ravel()),
        table.arrays(),
        table.header_bytes,
        np.zeros(k + 1, np.int64),
        ch_first,
        ch_count,
    )  # fmt: skip
    picked = []
    for c in range(1, k + 1):
        kept = slice(ch_first[c], ch_first[c] + ch_count[c]) if ch_first[c] >= 0 else slice(0, 0)
        picked.append((parents[kept], wire[kept]))
    return picked


def select_rows(
    table: SelectorTable, reader: int, names: tuple[str, ...], values: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """What reader ``reader`` of ``table`` (whose one stream has attributes ``names``) keeps of the tuples
    ``rows`` (ascending columns of ``values``, one row per attribute): positions into ``rows`` and wire
    bytes, as :meth:`peers.superpeer.Selector.pick` gives them (:func:`select_batch` on those tuples)."""
    return select_batch(table, [reader], names, np.asarray(values, np.float64)[:, rows])[0]
