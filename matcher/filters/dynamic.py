"""A shared filter that takes subscriptions and drops them one at a time, without a rebuild.

A super-peer under churn sees subscriptions come and go one by one; :class:`~matcher.filters.multi.MultiMatcher`
re-derives its region bitmaps from every box each time.  ``DynamicMatcher`` keeps the same idea (per
attribute, bitsets over the boxes for the pieces of the line a value can fall in) with pieces that do not
depend on the boxes: each attribute is cut into ``buckets`` ranges at fixed split values, chosen once from
the bounds of the boxes present when the attribute is first seen (their quantiles).  A box's bits then
depend on its own bounds alone, so adding a box sets its bits and removing it clears them, a few hundred
word operations, and every box gets a slot (a bit position) reused after it leaves.  A bucket a box's
interval only partly covers marks the box as a candidate, settled against its exact bounds (open and closed
ends, NaN), so the answer is exact whatever the splits; splits that no longer fit the data only cost more
of those checks.  Kernels: :mod:`matcher.filters._dynamic_kernels`.

Memory: two bitsets per bucket and attribute over the slots and one more per attribute for the boxes that
leave it unconstrained (``(2 x buckets + 1) x attributes x slots / 8`` bytes), and the exact bounds (18
bytes per slot and attribute).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import numpy as np

from matcher._eval_boxes import BoxTable, stack_columns
from matcher.predicate import Predicate

BUCKETS = 32
"""Buckets per attribute (splits + 1).  On 20,000 subscriptions of 10 half-domain intervals over 20
attributes (``bench pubsub``), 32 buckets build in about half the time of 64 and match 15 % slower; 16
match 35 % slower again for little less building."""


SAMPLE = 4096
"""Bounds of an attribute its splits are chosen from, at most."""


class DynamicMatcher:
    """Labelled predicates, each added with :meth:`add` and dropped with :meth:`remove`.

    ``labels`` are the current labels in the order they were added; ``match(columns)`` returns the
    ``(n_tuples, len(labels))`` bool matrix and ``match_csr(columns)`` the same as CSR, exactly as
    :meth:`Predicate.evaluate` tuple by tuple.  ``to_arrays()``/``from_arrays()`` carry the labelled boxes
    (the matcher is rebuilt from them, with splits chosen anew).
    """

    def __init__(self, labelled: Sequence[tuple[str, Predicate]] = (), *, buckets: int = BUCKETS):
        if buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {buckets}")
        self.buckets = buckets
        self.dims: tuple[str, ...] = ()
        self._column: dict[str, int] = {}
        self._splits = np.zeros((0, max(1, buckets - 1)))
        self._n_splits = np.zeros(0, dtype=np.int64)
        self._maybe = np.zeros((0, buckets, 0), dtype=np.uint64)
        self._sure = np.zeros_like(self._maybe)
        self._free_dims = np.zeros((0, 0), dtype=np.uint64)
        self._lo = np.zeros((0, 0))
        self._hi = np.zeros((0, 0))
        self._lo_closed = np.zeros((0, 0), dtype=bool)
        self._hi_closed = np.zeros((0, 0), dtype=bool)
        self._owner = np.zeros(0, dtype=np.int64)  # slot -> label number, -1 when free
        self._free: list[int] = []  # a heap: the lowest free slot is taken first
        self._slots: dict[str, list[int]] = {}  # label -> its boxes' slots; insertion order is the label order
        self._number: dict[str, int] = {}  # label -> label number (stable while the label lives)
        self._next_number = 0
        self._order: tuple[np.ndarray, np.ndarray] | None = None
        self._extend([(label, p) for label, p in labelled])

    # --- changes ------------------------------------------------------------------------------------------

    def add(self, label: str, predicate: Predicate) -> None:
        """Start matching ``predicate`` under ``label``; raises ValueError when the label is taken."""
        self._extend([(label, predicate)])

    def remove(self, label: str) -> None:
        """Stop matching ``label``; raises KeyError when it is not here."""
        slots = self._slots.pop(label)
        del self._number[label]
        if slots:
            from matcher.filters._dynamic_kernels import write_boxes

            chosen = np.array(slots, dtype=np.int64)
            write_boxes(
                chosen, *self._bounds(), self._splits, self._n_splits, self._maybe, self._sure, self._free_dims, False
            )
            self._owner[chosen] = -1
            for slot in slots:
                heapq.heappush(self._free, slot)
        self._order = None

    @classmethod
    def from_table(cls, labels: Sequence[str], table: BoxTable, *, buckets: int = BUCKETS) -> DynamicMatcher:
        """The matcher of ``table``'s boxes, box ``r`` under ``labels[table.owner[r]]``, built from the arrays
        in one pass (no predicate objects)."""
        matcher = cls(buckets=buckets)
        matcher._extend_table(list(labels), table)
        return matcher

    def _extend(self, labelled: list[tuple[str, Predicate]]) -> None:
        self._extend_table([label for label, _ in labelled], BoxTable.of([p for _, p in labelled]))

    def _extend_table(self, labels: list[str], table: BoxTable) -> None:
        taken = [label for label in labels if label in self._slots]
        if taken or len(set(labels)) != len(labels):
            raise ValueError(f"label {(taken or labels)[0]!r} is already matched")
        for dim in table.dims:
            if dim not in self._column:
                self._add_dim(dim, table)
        slots = self._take_slots(table.n_boxes)
        self._lo[slots], self._hi[slots] = -np.inf, np.inf
        self._lo_closed[slots], self._hi_closed[slots] = False, False
        if table.dims:
            place = np.ix_(slots, [self._column[d] for d in table.dims])
            self._lo[place], self._hi[place] = table.lo, table.hi
            self._lo_closed[place], self._hi_closed[place] = table.lo_closed, table.hi_closed
        numbers = np.arange(self._next_number, self._next_number + len(labels))
        self._next_number += len(labels)
        self._number.update(zip(labels, numbers.tolist(), strict=True))
        self._owner[slots] = numbers[table.owner]
        if np.array_equal(table.owner, np.arange(len(labels))):  # one box per label, the usual case
            grouped = [[slot] for slot in slots.tolist()]
        else:
            grouped = [[] for _ in labels]
            for slot, owner in zip(slots.tolist(), table.owner.tolist(), strict=True):
                grouped[owner].append(slot)
        self._slots.update(zip(labels, grouped, strict=True))
        if len(slots) and self.dims:
            from matcher.filters._dynamic_kernels import write_boxes

            write_boxes(
                slots, *self._bounds(), self._splits, self._n_splits, self._maybe, self._sure, self._free_dims, True
            )
        self._order = None

    def _bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self._lo, self._hi, self._lo_closed, self._hi_closed

    def _take_slots(self, count: int) -> np.ndarray:
        """``count`` free slots, lowest first.  When they run out the tables grow, at least doubling, with a
        quarter of a bulk load's size to spare, so that the adds after a build rarely pay for a growth."""
        if len(self._free) < count:
            self._grow(count - len(self._free) + count // 4)
        if count == 1:
            return np.array([heapq.heappop(self._free)], dtype=np.int64)
        self._free.sort()  # a sorted list is a heap too
        taken = self._free[:count]
        del self._free[:count]
        return np.array(taken, dtype=np.int64)

    def _grow(self, slots: int) -> None:
        words = self._maybe.shape[2]
        more = max(words, -(-slots // 64))
        pad = ((0, 0), (0, 0), (0, more))
        self._maybe = np.pad(self._maybe, pad)
        self._sure = np.pad(self._sure, pad)
        self._free_dims = np.pad(self._free_dims, ((0, 0), (0, more)))
        rows = ((0, 64 * more), (0, 0))
        self._lo = np.pad(self._lo, rows, constant_values=-np.inf)
        self._hi = np.pad(self._hi, rows, constant_values=np.inf)
        self._lo_closed = np.pad(self._lo_closed, rows)
        self._hi_closed = np.pad(self._hi_closed, rows)
        self._owner = np.pad(self._owner, (0, 64 * more), constant_values=-1)
        self._free.extend(range(64 * words, 64 * (words + more)))
        heapq.heapify(self._free)

    def _add_dim(self, dim: str, table: BoxTable) -> None:
        """A new attribute: its splits from the bounds ``table`` (the boxes being added) gives it, every box
        already here unconstrained on it (its ``free`` bit set)."""
        k = table.dims.index(dim)
        bounds = np.concatenate([table.lo[:, k], table.hi[:, k]])
        bounds = bounds[np.isfinite(bounds)]
        # quantiles of (a regular sample of at most SAMPLE of) the bounds: the splits only decide how many
        # candidates are checked exactly, so an estimate does
        sample = np.sort(bounds[:: max(1, len(bounds) // SAMPLE)])
        at = np.linspace(0, len(sample) - 1, self.buckets - 1).round().astype(np.int64)
        splits = np.unique(sample[at]) if len(sample) else sample
        self._column[dim] = len(self.dims)
        self.dims = (*self.dims, dim)
        width = max(self._splits.shape[1], len(splits), 1)
        grown = np.full((len(self.dims), width), np.inf)
        grown[:-1, : self._splits.shape[1]] = self._splits
        grown[-1, : len(splits)] = splits
        self._splits = grown
        self._n_splits = np.append(self._n_splits, len(splits))
        live = np.zeros(self._maybe.shape[2], dtype=np.uint64)
        used = np.flatnonzero(self._owner >= 0)
        np.bitwise_or.at(live, used >> 6, np.left_shift(np.uint64(1), (used & 63).astype(np.uint64)))
        empty = np.zeros((1, self.buckets, len(live)), dtype=np.uint64)
        self._maybe = np.concatenate([self._maybe, empty])
        self._sure = np.concatenate([self._sure, empty])
        self._free_dims = np.vstack([self._free_dims, live[None, :]])
        for name in ("_lo", "_hi", "_lo_closed", "_hi_closed"):
            array = getattr(self, name)
            fill = -np.inf if name == "_lo" else (np.inf if name == "_hi" else False)
            setattr(self, name, np.hstack([array, np.full((len(array), 1), fill, dtype=array.dtype)]))

    # --- reading ------------------------------------------------------------------------------------------

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def _positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per slot, its label's output position; and the words holding a box (cached until a change)."""
        if self._order is None:
            position_of = np.full(max(1, self._next_number), -1, dtype=np.int64)
            position_of[[self._number[label] for label in self._slots]] = np.arange(len(self._slots))
            position = np.where(self._owner >= 0, position_of[np.maximum(self._owner, 0)], -1)
            live = (
                np.flatnonzero((self._owner >= 0).reshape(-1, 64).any(axis=1))
                if len(self._owner)
                else np.zeros(0, np.int64)
            )
            self._order = (position, live)
        return self._order

    def match_csr(self, columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Satisfied label positions per tuple: ``indices[indptr[i]:indptr[i + 1]]``, ascending.  Raises
        KeyError naming an attribute some label constrains that the columns lack."""
        values = stack_columns(columns, self.dims)
        n = values.shape[1] if self.dims else (len(next(iter(columns.values()))) if columns else 0)
        position, live = self._positions()
        if not self.dims:  # every box constrains nothing: each label with a box matches every tuple
            hits = np.unique(position[position >= 0])
            return np.arange(n + 1, dtype=np.int64) * len(hits), np.tile(hits, n)
        from matcher.filters._dynamic_kernels import match_csr

        tables = (self._splits, self._n_splits, self._maybe, self._sure, self._free_dims, live)
        return match_csr(values, *tables, *self._bounds(), position, max(1, len(self._slots)))

    def match(self, columns: Mapping[str, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """``(n_tuples, len(labels))`` bool; ``out``, when given, a zeroed array filled and returned."""
        indptr, indices = self.match_csr(columns)
        n = len(indptr) - 1
        out = np.zeros((n, len(self._slots)), dtype=bool) if out is None else out
        out[np.repeat(np.arange(n), np.diff(indptr)), indices] = True
        return out

    def nbytes(self) -> int:
        """Bytes held by the tables (bitsets, exact bounds, slot owners)."""
        tables = (self._maybe, self._sure, self._free_dims, *self._bounds(), self._owner, self._splits)
        return sum(a.nbytes for a in tables)

    # --- shipping -----------------------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The labelled boxes as plain arrays (label order), from which :meth:`from_arrays` rebuilds."""
        labels = self.labels
        slots = [s for label in labels for s in self._slots[label]]
        owner = np.array([j for j, label in enumerate(labels) for _ in self._slots[label]], dtype=np.int64)
        chosen = np.array(slots, dtype=np.int64)
        return {
            "labels": np.array(labels, dtype=str),
            "dims": np.array(self.dims, dtype=str),
            "owner": owner,
            **{
                key: array[chosen]
                for key, array in zip(("lo", "hi", "lo_closed", "hi_closed"), self._bounds(), strict=True)
            },
            "buckets": np.array(self.buckets),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> DynamicMatcher:
        labels = [str(x) for x in arrays["labels"]]
        table = BoxTable.from_arrays([str(d) for d in arrays["dims"]], len(labels), arrays)
        boxes: list[list] = [[] for _ in labels]
        for r, owner in enumerate(table.owner.tolist()):
            boxes[owner].append(r)
        from matcher.predicate import Box, Interval

        def box(r: int) -> Box:
            return Box(
                (d, Interval(table.lo[r, k], table.hi[r, k], bool(table.lo_closed[r, k]), bool(table.hi_closed[r, k])))
                for k, d in enumerate(table.dims)
            )

        labelled = [(label, Predicate([box(r) for r in rows])) for label, rows in zip(labels, boxes, strict=True)]
        return cls(labelled, buckets=int(arrays["buckets"]))

    def __reduce__(self):
        return (DynamicMatcher.from_arrays, (self.to_arrays(),))
