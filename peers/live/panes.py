"""Pane trees in a plan, as the live mode runs them (docs/LIVE.md, "Records"; docs/ACCOUNTING.md, "Panes").

Aggregate subscriptions folding one input over time windows may share a **pane tree** (``Flow.panes``):
the operator of its root, at the source's super-peer, folds the tuples of the root's WHERE into partial
states per pane and group, every *pane row* crosses the tree's links as a record does, and each reader's
records are combined from the rows at its own super-peer.  The live super-peers run it as the simulator
does (peers/live/record_operators.py; peers/live/records.py holds the rows' schedule); this module holds what
they and the coordinator read off a plan: which pane flows make one tree in an epoch, who reads each tree,
and how a reader that live mode cannot ship records to is served its input instead (:func:`with_input_twins`).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, replace

from matcher import Predicate
from sharing.plan import Delivery, Epoch, Flow, Panes, Plan

INPUT = ":input"
"""What a pane flow's input twin adds to its id (:func:`with_input_twins`)."""


def pane_roots(epoch: Epoch) -> dict[str, str]:
    """Per pane flow of ``epoch``, the root of its tree (itself for a root: its parent carries tuples)."""
    roots: dict[str, str] = {}
    for flow in epoch.flows:  # (parents listed before their children)
        if flow.panes is not None:
            roots[flow.id] = roots.get(flow.parent, flow.id) if flow.parent is not None else flow.id
    return roots


def pane_class(root: Flow, chains: Mapping[str, Panes]) -> tuple:
    """What makes two pane roots fold the same rows (the simulator's pane class): the stream, the WHERE and
    the panes over the whole plan (``chains``: :attr:`~sharing.plan.Plan.pane_chains`), every era of a
    widened flow's."""
    return root.stream, root.predicate, chains.get(root.id, root.panes)


@dataclass(frozen=True)
class PaneSites:
    """Where a plan's pane trees are run: per super-peer, a root of each pane class folded there, and the
    subscriptions whose records are combined there (their deliveries read a pane tree)."""

    roots: dict[str, list[Flow]]
    readers: dict[str, list[str]]


def pane_sites(plan: Plan) -> PaneSites:
    """The :class:`PaneSites` of ``plan``, over all its epochs."""
    roots: dict[str, dict[tuple, Flow]] = {}
    readers: dict[str, dict[str, None]] = {}
    for epoch in plan.epochs:
        found = pane_roots(epoch)
        if not found:
            continue
        for flow in epoch.flows:
            if found.get(flow.id) == flow.id:
                roots.setdefault(flow.origin, {}).setdefault(pane_class(flow, plan.pane_chains), flow)
        for delivery in epoch.deliveries:
            if delivery.flow in found:
                readers.setdefault(delivery.home, {})[delivery.subscription] = None
    return PaneSites({n: list(r.values()) for n, r in roots.items()}, {n: list(r) for n, r in readers.items()})


def tree_readers(epoch: Epoch) -> dict[str, tuple[str, ...]]:
    """Per root pane flow of ``epoch``, the subscriptions whose deliveries read a flow of its tree (in the
    epoch's order): the operator at the root counts its input as theirs, as the simulator does."""
    roots = pane_roots(epoch)
    found: dict[str, list[str]] = {}
    for delivery in epoch.deliveries:
        if delivery.flow in roots:
            found.setdefault(roots[delivery.flow], []).append(delivery.subscription)
    return {root: tuple(subs) for root, subs in found.items()}


def pane_readers(plan: Plan) -> dict[str, str]:
    """Per subscription some delivery of ``plan`` reads a pane flow for, the super-peer folding its panes (the
    origin of that tree's root, in the first epoch it reads one), as the simulator names it."""
    found: dict[str, str] = {}
    for epoch in plan.epochs:
        roots = pane_roots(epoch)
        if not roots:
            continue
        origins = {f.id: f.origin for f in epoch.flows if roots.get(f.id) == f.id}
        for delivery in epoch.deliveries:
            if delivery.flow in roots:
                found.setdefault(delivery.subscription, origins[roots[delivery.flow]])
    return found


def with_input_twins(
    epoch: Epoch, subscriptions: Set[str], made: dict[tuple, Flow | Delivery], wheres: Mapping[str, Predicate]
) -> Epoch:
    """``epoch`` with the deliveries of ``subscriptions`` that read a pane tree reading instead the tree's
    *input twins*: tuple flows along the same paths carrying the root's input (the tuples of its WHERE,
    which each reader's WHERE is equivalent to, projected to what the panes read), ids ``<flow>:input``.
    Each pane flow stays where another delivery reads it or what is below it, so the tree's other readers
    keep having their records combined from its rows (a subscription served its records over part of a
    run and its input over another would be checked by neither).  ``made`` keeps one twin per flow object
    and one moved delivery per delivery object, so that the epochs of a plan keep sharing them.  A tree of
    fragments (``Panes.cells``) holds other readers' tuples too: its twins also carry the attributes its
    cells read, and a moved delivery filters by its subscription's WHERE (``wheres``)."""
    roots = pane_roots(epoch)
    if not roots:
        return epoch
    parents = {f.id: f.parent for f in epoch.flows}
    by_id = {f.id: f for f in epoch.flows}
    twinned: set[str] = set()  # pane flows a delivery of ``subscriptions`` reads, or reads below
    kept: set[str] = set()  # pane flows another delivery reads, or reads below
    for delivery in epoch.deliveries:
        if delivery.flow in roots:
            into = twinned if delivery.subscription in subscriptions else kept
            flow_id = delivery.flow
            while flow_id in roots and flow_id not in into:
                into.add(flow_id)
                flow_id = parents[flow_id]
    if not twinned:
        return epoch
    flows: list[Flow] = []
    gone: set[str] = set()
    for flow in epoch.flows:
        if flow.id not in roots:
            flows.append(flow)
            continue
        if flow.id in kept or (flow.id not in twinned and flow.parent not in gone):
            flows.append(flow)
        else:
            gone.add(flow.id)
        if flow.id in twinned:
            root = roots[flow.id] == flow.id
            key = ("flow", id(flow), root)
            if key not in made:
                parent = flow.parent if root else flow.parent + INPUT
                attrs = tuple(dict.fromkeys([*flow.attrs, *sorted({d for c in flow.panes.cells for d in c.dims})]))
                made[key] = replace(flow, id=flow.id + INPUT, parent=parent, panes=None, attrs=attrs)
            flows.append(made[key])
    deliveries = []
    for delivery in epoch.deliveries:
        if delivery.flow in roots and delivery.subscription in subscriptions:
            key = ("delivery", id(delivery))
            if key not in made:
                cells = by_id[delivery.flow].panes.cells
                where = wheres[delivery.subscription] if cells else delivery.predicate
                made[key] = replace(delivery, flow=delivery.flow + INPUT, predicate=where)
            delivery = made[key]
        deliveries.append(delivery)
    return replace(epoch, flows=tuple(flows), deliveries=tuple(deliveries))
