"""What a shared flow's tuples carry: the attribute-need classes of the subscriptions it serves.

A sharing flow is a bundle of need classes (docs/PLANNER.md, "Need classes"): a tuple it carries takes
attribute ``a`` only if a subscription served through the flow (delivered from it, or from a flow below
it) selects ``a`` and is satisfied by the tuple.  For each attribute that set of tuples is ``U_a``, the
OR of those subscriptions' WHEREs: the flow's ``trim`` entries in the plan (:class:`sharing.plan.Flow`).
A flow of selectivity ``s`` along ``h`` hops then costs

    rate * h * (header_bytes * s + 8 * sum over a of sel(U_a))        bytes per second,

which is what :class:`sharing.trees.FlowTrees` counts and the search (:mod:`sharing.search`) ranks by.
"""

from __future__ import annotations

import numpy as np

from matcher import Box, Predicate
from matcher.selectivity import UniformSpace
from sharing.cost import BoxBounds, CostModel


class NeedUnion:
    """``U_a`` for one attribute of one flow: the OR of the WHEREs of the subscriptions served through the
    flow that select the attribute, box by box (a box several of them share is kept once, counted), and
    its selectivity, kept by increment as subscriptions come and go."""

    __slots__ = ("_bounds", "_boxes", "_fresh", "_n_rows", "_predicate", "_rows", "_space", "members", "sel")

    def __init__(self) -> None:
        self._boxes: dict[Box, int] = {}
        self.members = 0  # the subscriptions in it (one whose WHERE is a contradiction adds no box)
        self.sel = 0.0
        self._predicate: Predicate | None = Predicate.FALSE
        self._bounds: BoxBounds | None = None
        self._fresh: list[Box] = []  # boxes added since ``_bounds`` was made (they come last in the union)
        # over uniform attributes: the boxes as the compiled kernel's rows, in order, grown by doubling
        self._rows: np.ndarray | None = None
        self._n_rows = 0
        self._space: UniformSpace | None = None

    def __bool__(self) -> bool:
        return self.members > 0

    def copy(self) -> NeedUnion:
        twin = NeedUnion()
        twin._boxes = dict(self._boxes)
        twin.members, twin.sel = self.members, self.sel
        twin._predicate, twin._bounds = self._predicate, self._bounds  # immutable values: shared
        twin._fresh = list(self._fresh)
        twin._rows = None if self._rows is None else self._rows.copy()
        twin._n_rows, twin._space = self._n_rows, self._space
        return twin

    def predicate(self) -> Predicate:
        """The union as a predicate, its boxes in the order they first came (the same object until the
        union changes: epochs compare flows by identity)."""
        if self._predicate is None:
            self._predicate = Predicate.from_nonempty(self._boxes)
        return self._predicate

    def near(self, box: Box) -> list[Box]:
        """The boxes of the union that may overlap ``box``."""
        if self._bounds is None:
            self._bounds, self._fresh = BoxBounds(self.predicate()), []
        elif self._fresh:
            self._bounds, self._fresh = self._bounds.appended(tuple(self._fresh), self.predicate()), []
        return self._bounds.overlapping(box)

    def gain(self, cost: CostModel, stream: str, where: Predicate) -> float:
        """sel(``where`` outside the union): what the union's selectivity grows by when ``where`` joins."""
        if not self._boxes:
            return cost.selectivity(stream, where) if where.boxes else 0.0
        return self._added(cost, stream, where)

    def _added(self, cost: CostModel, stream: str, where: Predicate) -> float:
        space = cost.uniform_space(stream)
        if space is None:
            return cost.added_selectivity(stream, where, self.near)
        if self._rows is None:
            self._space = space
            self._rows = np.empty((max(16, 2 * len(self._boxes)), space.width))
            for i, box in enumerate(self._boxes):
                self._rows[i] = space.row(box)
            self._n_rows = len(self._boxes)
        return cost.added_selectivity_rows(stream, where, self._rows[: self._n_rows])

    def _append_row(self, box: Box) -> None:
        if self._n_rows == len(self._rows):
            grown = np.empty((2 * len(self._rows), self._rows.shape[1]))
            grown[: self._n_rows] = self._rows
            self._rows = grown
        self._rows[self._n_rows] = self._space.row(box)
        self._n_rows += 1

    def add(self, where: Predicate, gain: float) -> bool:
        """``where`` joins the union, which grows by ``gain`` (:meth:`gain`, computed before); whether its
        predicate changed (not when every box of ``where`` is in it already)."""
        boxes = self._boxes
        self.members += 1
        fresh = False
        for box in where.boxes:
            count = boxes.get(box)
            boxes[box] = 1 if count is None else count + 1
            if count is None:
                fresh = True
                if self._bounds is not None:
                    self._fresh.append(box)
                if self._rows is not None:
                    self._append_row(box)
        self.sel += gain
        if fresh:  # else the same boxes: the same predicate object
            self._predicate = None
        return fresh

    def remove(self, cost: CostModel, stream: str, where: Predicate) -> bool:
        """``where`` leaves the union: its boxes go (those no other WHERE shares), and the selectivity falls
        by what ``where`` adds to the union left; whether its predicate changed."""
        boxes = self._boxes
        self.members -= 1
        gone = False
        for box in where.boxes:
            count = boxes[box]
            if count == 1:
                del boxes[box]
                gone = True
            else:
                boxes[box] = count - 1
        if not boxes:
            self.sel, self._bounds, self._fresh, self._rows = 0.0, None, [], None
            changed, self._predicate = self._predicate is not Predicate.FALSE, Predicate.FALSE
            return changed
        if gone:
            self._predicate = self._bounds = self._rows = None  # rows went: rebuilt on demand
            self._fresh = []
        self.sel = max(0.0, self.sel - self._added(cost, stream, where))
        return gone
