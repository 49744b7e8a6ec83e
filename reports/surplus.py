"""Attribute surplus: the backbone bytes a plan spends on attribute values nobody downstream selects.

A tuple crossing a link carries its header and some attribute values.  The subscriptions *downstream* of
that crossing are those whose delivery reads the flow at a later super-peer of its path, or reads a flow
produced from it there (recursively).  A value is **needed** there when one of them selects the attribute
and the tuple satisfies its WHERE; every other value is **surplus**: a filter attribute carried to a
filter that could have run upstream, an attribute of a shared flow's union that this tuple's receivers do
not select, a value of a tuple nobody downstream wants at all.

``ideal`` carries no surplus, by definition (docs/ACCOUNTING.md): so the gap between a strategy's bytes and
ideal's splits into this surplus and the rest, the tuple-hops part (tuple copies beyond ideal's, each with
its header and the values its receivers need).  The figures are computed here from the plan and the
stream's tuples, as offered to the links: independent of the engine, and equal to what the engines count
when no tuple is dropped or lost on the way.  Memory holds one chunk of tuples at a time.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from matcher import Predicate
from sharing.plan import Delivery, Flow, Plan
from topologies.expected import satisfies
from topologies.model import Scenario
from topologies.workload import columns, emission_times, tuple_count

# flows and deliveries summed over the spans of every stream (each span between two plan changes of its
# stream): past this many, some 15 s of work, the surplus is not computed (a plan of thousands of
# subscriptions arriving and leaving one by one, as metro.yaml's)
BUDGET = 500_000
CHUNK = 8192  # tuples per pass: a mask per distinct predicate of the stream's plan is held for one chunk


def surplus_values(scenario: Scenario, plan: Plan) -> dict[str, int] | None:
    """Per stream (every one of the scenario's), the surplus attribute values its flows put on backbone
    link directions over the run (multiply by 8 for bytes: one value is 8 bytes on the wire); None for a
    plan over :data:`BUDGET` (its work grows with the flows of every span between plan changes)."""
    spans = {s.id: _spans(plan, s.id) for s in scenario.streams}
    if sum(len(flows) + len(deliveries) for per in spans.values() for *_, flows, deliveries in per) > BUDGET:
        return None
    totals = dict.fromkeys((s.id for s in scenario.streams), 0)
    for stream in scenario.streams:
        count = tuple_count(stream, scenario.duration)
        for first in range(0, count, CHUNK):
            stop = min(count, first + CHUNK)
            times = emission_times(stream, first, stop)
            masks = _Masks(columns(scenario, stream.id, first, stop), stop - first)
            for start, end, flows, deliveries in spans[stream.id]:
                lo, hi = (int(i) for i in np.searchsorted(times, [start, end], side="left"))
                if hi > lo:
                    totals[stream.id] += _span_surplus(flows, deliveries, masks, slice(lo, hi), hi - lo)
    return totals


def _spans(plan: Plan, stream: str) -> list[tuple[float, float, tuple[Flow, ...], tuple[Delivery, ...]]]:
    """The plan's epochs as they are for ``stream``: consecutive epochs with the same flows and deliveries
    of the stream (a change to another stream's tree) made one span.  A record flow carries records, not
    the stream's tuples (docs/ACCOUNTING.md, "Records"): it has no attribute values to spare."""
    spans: list = []
    for epoch in plan.epochs:
        flows = tuple(f for f in epoch.flows if f.stream == stream and f.aggregate is None)
        ids = {f.id for f in flows}
        deliveries = tuple(d for d in epoch.deliveries if d.flow in ids)
        if spans and spans[-1][1] == epoch.start and spans[-1][2] == flows and spans[-1][3] == deliveries:
            spans[-1] = (spans[-1][0], epoch.end, flows, deliveries)
        elif flows:
            spans.append((epoch.start, epoch.end, flows, deliveries))
    return spans


class _Masks:
    """The tuples of one chunk satisfying each predicate asked for, evaluated once per chunk: the epochs
    of a run share most of their flows and deliveries (the very same predicates)."""

    def __init__(self, values: dict[str, np.ndarray], n: int):
        self._values, self._n = values, n
        self._known: dict[Predicate, np.ndarray] = {}

    def of(self, predicate: Predicate, part: slice) -> np.ndarray:
        mask = self._known.get(predicate)
        if mask is None:
            mask = self._known[predicate] = satisfies(predicate, self._values, self._n)
        return mask[part]


def _span_surplus(flows: tuple[Flow, ...], deliveries: tuple[Delivery, ...], masks: _Masks, part: slice, n: int) -> int:
    """The surplus values of one stream's ``flows`` (parents first), read by ``deliveries``, over the
    tuples ``part`` of the chunk (``n`` of them)."""
    # who reads each flow, and where: deliveries and child flows, by the super-peer they read it at
    readers: dict[str | None, list] = defaultdict(list)
    for d in deliveries:
        readers[d.flow].append((d.home, d))
    for f in flows:
        if f.parent is not None:
            readers[f.parent].append((f.origin, f))
    carried: dict[str, np.ndarray] = {}  # flow -> the mask of its tuples
    for f in flows:  # parents before children
        inside = np.ones(n, dtype=bool) if f.parent is None else carried[f.parent]
        carried[f.id] = inside & masks.of(f.predicate, part)
    surplus = 0
    needs: dict[str, dict[str, np.ndarray]] = {}  # flow -> attribute -> tuples someone reading it needs
    for f in reversed(flows):  # children before parents
        kept = carried[f.id]
        carrying = _carrying(f, masks, part, kept)
        position = {node: k for k, node in enumerate(f.path)}
        at: dict[int, list] = defaultdict(list)
        for node, reader in readers.get(f.id, ()):
            at[position[node]].append(reader)
        need: dict[str, np.ndarray] = {}
        # links from the last backwards: the need on link k is that of every reader at super-peer k+1 on
        for k in range(len(f.path) - 1, 0, -1):
            for reader in at.get(k, ()):
                _merge(need, _needs_of(reader, needs, masks, part))
            for a, mask in carrying.items():
                wanted = need.get(a)
                surplus += int(mask.sum()) - (0 if wanted is None else int((mask & wanted).sum()))
        for reader in at.get(0, ()):
            _merge(need, _needs_of(reader, needs, masks, part))
        needs[f.id] = {a: mask & kept for a, mask in need.items()}
        for _, reader in readers.get(f.id, ()):  # its children's needs are no longer asked for
            if isinstance(reader, Flow):
                needs.pop(reader.id, None)
    return surplus


def _needs_of(reader, needs: dict[str, dict[str, np.ndarray]], masks: _Masks, part: slice):
    if isinstance(reader, Flow):
        return needs.get(reader.id, {})
    return dict.fromkeys(reader.attrs, masks.of(reader.predicate, part))


def _merge(need: dict[str, np.ndarray], more: dict[str, np.ndarray]) -> None:
    for a, mask in more.items():
        have = need.get(a)
        need[a] = mask if have is None else have | mask


def _carrying(flow: Flow, masks: _Masks, part: slice, kept: np.ndarray) -> dict[str, np.ndarray]:
    """Per attribute ``flow`` carries, the tuples carrying it on the flow's links."""
    if not flow.trim:
        return dict.fromkeys(flow.attrs, kept)
    out: dict[str, np.ndarray] = {}
    for predicate, attrs in flow.trim:
        mask = kept & masks.of(predicate, part)
        for a in attrs:
            out[a] = mask if a not in out else out[a] | mask
    return out
