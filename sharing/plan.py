"""The frozen Plan every data plane executes (local simulator, Spark, MQTT).

A plan is a sequence of epochs, one per interval between plan changes (subscription arrivals and
departures, backbone failures and recoveries).  In an epoch, each source stream feeds a tree of
:class:`Flow` s: a flow is produced at one super-peer by an operator (filter by ``predicate``, project to
``attrs``) reading its parent flow, and is then carried along ``path``.  A :class:`Delivery` hands a
subscription its exact result, taken from a flow available at the subscriber's super-peer.  A tuple is
routed by the epoch in force at its *emission* time, which is what makes every engine's counts identical.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property, partial
from itertools import pairwise
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from matcher import Predicate
from matcher.text import predicate_to_text

if TYPE_CHECKING:
    from network.routing import Network
    from topologies.model import Scenario


_CHECKED: weakref.WeakValueDictionary[int, Plan] = weakref.WeakValueDictionary()
"""The plans :meth:`Plan.check` passed, by identity (a plan is frozen: once checked, it stays so)."""


@dataclass(frozen=True)
class Panes:
    """What a pane flow carries (docs/ACCOUNTING.md, "Panes"): per pane of ``length`` seconds of emission
    time (pane ``j`` covers ``[j * length, (j + 1) * length)``) and group (the values of ``groups``) holding
    input tuples, one **pane row**: the pane's number, the group's values, the count of its tuples and the
    partial states ``states`` (``(state, attribute)`` pairs, as :func:`peers.aggregation.states_needed`
    names them, sorted) of its attributes.

    With ``cells`` (its readers' WHEREs, which overlap without being equivalent) the flow carries
    **fragments**: the partial states are kept per pane, group and *cell*, the set of ``cells`` a tuple
    satisfies (its bits), which its row carries as one value more; a reader whose WHERE is ``cells[i]``
    combines the rows of the cells holding bit ``i``.

    A pane flow whose readers changed may have been **widened** (or narrowed) as it ran: these panes hold
    from emission time ``since`` on, and ``earlier`` holds the *eras* before it, oldest first, each the
    panes (length, groups, states; the same cells) from its own ``since`` until the next era's.  At an
    era's start the pane of the era before that holds it is cut short there (its row closes at the cut),
    and the new panes start from it (:meth:`eras`)."""

    length: Fraction
    groups: tuple[str, ...]
    states: tuple[tuple[str, str], ...]
    cells: tuple[Predicate, ...] = ()
    since: Fraction = Fraction(0)
    earlier: tuple[Panes, ...] = ()

    def values(self) -> int:
        """How many values a pane row carries: its pane number, its group's values, its count, its cell when
        it has cells, and one value per partial state (the wire charges a value, as it does a record's)."""
        return 2 + len(self.groups) + len(self.states) + (1 if self.cells else 0)

    def eras(self) -> tuple[Panes, ...]:
        """Each era of these panes, oldest first, as panes without eras of their own: era ``k`` holds from its
        ``since`` until the next era's (the last, for good)."""
        return (*self.earlier, replace(self, earlier=())) if self.earlier else (self,)

    def pane_start(self, t: float) -> Fraction:
        """Where the pane holding emission time ``t`` starts (in its era; an era's first starts at the era)."""
        era = next(e for e in reversed(self.eras()) if e.since <= t or e.since == 0)
        return max(era.since, math.floor(Fraction(t) / era.length) * era.length)

    def reading(self) -> tuple[str, ...]:
        """The attributes its operator reads over every era: the group attributes, then the states'."""
        eras = self.eras()
        return tuple(dict.fromkeys([*(g for e in eras for g in e.groups), *(a for e in eras for _, a in e.states)]))

    def to_json(self, text: Callable[[Predicate], Any] = Predicate.to_text) -> dict:
        out: dict[str, Any] = {
            "length": str(self.length), "groups": list(self.groups), "states": [list(s) for s in self.states]
        }  # fmt: skip
        if self.cells:
            out["cells"] = [text(c) for c in self.cells]
        if self.earlier or self.since:
            out["since"] = str(self.since)
        if self.earlier:
            out["earlier"] = [{k: v for k, v in e.to_json(text).items() if k != "cells"} for e in self.earlier]
        return out

    @classmethod
    def from_json(cls, doc: dict, predicates: Sequence[Predicate] = ()) -> Panes:
        """The inverse of :meth:`to_json` (``predicates``: what its cells' indices name)."""
        cells = tuple(predicates[c] for c in doc.get("cells", ()))

        def era(d: dict) -> Panes:
            states = tuple(tuple(s) for s in d["states"])
            return cls(Fraction(d["length"]), tuple(d["groups"]), states, cells, Fraction(d.get("since", 0)))

        return replace(era(doc), earlier=tuple(era(e) for e in doc.get("earlier", ())))

    def text(self) -> str:
        """As ``run.py plan`` prints it: ``PANES 5 s BY region KEEPING sum(energy)``, and ``IN n CELLS``; a
        widened flow's earlier eras after it, newest first: ``PANES 2 s ... SINCE 120 s AFTER PANES 10 s ...``."""
        by = f" BY {','.join(self.groups)}" if self.groups else ""
        keeping = f" KEEPING {','.join(f'{s}({a})' for s, a in self.states)}" if self.states else ""
        cells = f" IN CELLS OF {len(self.cells)} WHERES" if self.cells else ""
        since = f" SINCE {self.since} s" if self.since or self.earlier else ""
        before = "".join(f" AFTER {replace(e, cells=()).text()}" for e in reversed(self.earlier))
        return f"PANES {self.length} s{by}{keeping}{cells}{since}{before}"


@dataclass(frozen=True)
class Flow:
    """One stream instance in the network during an epoch.

    Produced at ``origin`` from ``parent`` (a flow available at ``origin``; ``None`` is the raw source
    stream, available at the source's super-peer), keeping the tuples that satisfy ``predicate`` and
    projecting them to ``attrs``.  It then crosses the links ``(path[i], path[i+1])`` and is available at
    every super-peer of ``path`` (``path[0] == origin``; a single-node path crosses no link).

    ``trim`` holds a flow's need classes (the ``ideal`` bound's flows and the sharing strategies'; see
    docs/PLANNER.md, "Cost model"): when non-empty, a tuple carries just the union of the attribute lists
    of the ``(predicate, attrs)`` pairs it satisfies, instead of ``attrs``.

    ``aggregate`` names an aggregate subscription when the flow is its **record flow**: an operator at
    ``origin`` aggregates the tuples of ``parent`` that satisfy ``predicate`` (the subscription's WHERE),
    projected to ``attrs`` (its input's attributes), and the flow carries the subscription's result records
    along ``path`` instead (docs/ACCOUNTING.md, "Records").  Only that subscription's delivery reads it.

    ``panes`` makes the flow a **pane flow** (docs/ACCOUNTING.md, "Panes"), which carries pane rows
    (:class:`Panes`) instead of tuples.  One whose parent carries tuples is a pane tree's root: an operator
    at ``origin`` folds the tuples of ``parent`` that satisfy ``predicate``, projected to ``attrs``, into
    the partial states of each pane and group.  One whose parent is a pane flow passes that flow's rows on
    (its ``panes`` equal, its ``attrs`` the parent's, its ``predicate`` TRUE, or with cells the OR of those
    whose rows it carries: the rows of any cell holding one of them).  The aggregate subscriptions
    whose input is the root's (an equivalent WHERE) and whose windows and aggregates the panes serve read
    it: each one's records are combined from the rows at its super-peer.
    """

    id: str
    stream: str
    parent: str | None
    origin: str
    path: tuple[str, ...]
    predicate: Predicate
    attrs: tuple[str, ...]
    trim: tuple[tuple[Predicate, tuple[str, ...]], ...] = ()
    aggregate: str | None = None
    panes: Panes | None = None

    @property
    def hops(self) -> tuple[tuple[str, str], ...]:
        return tuple(pairwise(self.path))

    def to_json(self, text: Callable[[Predicate], Any] = Predicate.to_text) -> dict:
        """The flow as JSON; each predicate written as ``text(predicate)`` (default: its query text)."""
        out = {
            "id": self.id,
            "stream": self.stream,
            "parent": self.parent,
            "origin": self.origin,
            "path": list(self.path),
            "where": text(self.predicate),
            "attrs": list(self.attrs),
        }
        if self.trim:
            out["trim"] = [{"where": text(p), "attrs": list(a)} for p, a in self.trim]
        if self.aggregate is not None:
            out["records_of"] = self.aggregate
        if self.panes is not None:
            out["panes"] = self.panes.to_json(text)
        return out


@dataclass(frozen=True)
class Delivery:
    """Subscription ``subscription`` receives, at thin-peer ``peer``, the tuples of ``flow`` (read at the
    peer's super-peer ``home``; ``None`` is the raw stream, then ``home`` is the source's super-peer) that
    satisfy ``predicate`` (the subscription's own WHERE, so results are exact), projected to ``attrs``."""

    subscription: str
    peer: str
    home: str
    flow: str | None
    predicate: Predicate
    attrs: tuple[str, ...]

    def to_json(self, text: Callable[[Predicate], Any] = Predicate.to_text) -> dict:
        """The delivery as JSON; its predicate written as ``text(predicate)`` (default: its query text)."""
        return {
            "subscription": self.subscription,
            "peer": self.peer,
            "home": self.home,
            "flow": self.flow,
            "where": text(self.predicate),
            "attrs": list(self.attrs),
        }


@dataclass(frozen=True)
class Epoch:
    """The installed flows and deliveries for tuples emitted in ``[start, end)`` (``flows`` lists parents
    before children): a plan's state over one interval, built on demand from its changes
    (:attr:`Plan.epochs`, :meth:`Plan.epoch_at`), or given to :class:`Plan` by a planner that makes
    snapshots."""

    start: float
    end: float
    flows: tuple[Flow, ...]
    deliveries: tuple[Delivery, ...]

    def flow(self, flow_id: str) -> Flow:
        return next(f for f in self.flows if f.id == flow_id)

    def to_json(self) -> dict:
        return {
            "start": self.start,
            "end": self.end,
            "flows": [f.to_json() for f in self.flows],
            "deliveries": [d.to_json() for d in self.deliveries],
        }


class Edit(NamedTuple):
    """How one list of an epoch (its flows, or its deliveries) differs from the epoch before's: the
    objects at positions ``gone`` of the list before left (ascending), and each ``(position, object)`` of
    ``came`` came, at that position of the new list (ascending).  The objects kept stay in their order; an
    object that leaves and comes in one edit (the very object) moved among the others."""

    gone: tuple[int, ...]
    came: tuple[tuple[int, Any], ...]

    def applied(self, before: Sequence) -> list:
        """The list ``before`` becomes, made anew."""
        rest: list = []
        at = 0
        for p in self.gone:
            if p > at:
                rest.extend(before[at:p])
            at = p + 1
        rest.extend(before[at:])
        if not self.came:
            return rest
        out: list = []
        at = 0
        for p, item in self.came:
            if p > len(out):  # the kept objects before it
                take = p - len(out)
                out.extend(rest[at : at + take])
                at += take
            out.append(item)
        out.extend(rest[at:])
        return out


@dataclass(frozen=True)
class Change:
    """The start of the epoch ``[start, end)``: how its flows and its deliveries differ from the epoch
    before's (the first epoch's, from none)."""

    start: float
    end: float
    flows: Edit
    deliveries: Edit


@dataclass(frozen=True)
class Decision:
    """What the planner did at one event, in words and in structure (for ``run.py plan``)."""

    time: float
    event: str  # "subscribe", "unsubscribe" or "replan" (a subscription placed again when the backbone changed)
    subscription: str
    summary: str  # one readable line
    reused: str | None = None  # flow id reused, if any
    widened: tuple[str, ...] = ()  # flow ids whose predicate or attributes were widened
    narrowed: tuple[str, ...] = ()  # flow ids narrowed or removed (on departure, or replaced by a re-plan)
    added_bytes_per_s: float = 0.0  # the cost model's estimate for this decision

    def to_json(self) -> dict:
        return {
            "time": self.time,
            "event": self.event,
            "subscription": self.subscription,
            "summary": self.summary,
            "reused": self.reused,
            "widened": list(self.widened),
            "narrowed": list(self.narrowed),
            "added_bytes_per_s": self.added_bytes_per_s,
        }

    @classmethod
    def from_json(cls, d: dict) -> Decision:
        """The inverse of :meth:`to_json`."""
        return cls(
            float(d["time"]),
            d["event"],
            d["subscription"],
            d["summary"],
            d["reused"],
            tuple(d["widened"]),
            tuple(d["narrowed"]),
            float(d["added_bytes_per_s"]),
        )


@dataclass(frozen=True)
class Replan:
    """What a strategy did when the backbone changed (docs/DYNAMICS.md): at ``time``, for the scenario's
    events there (``event``, one readable line), how long re-planning took (wall seconds, the one figure
    of a plan that is not a function of the scenario), how many flows it removed or installed
    (``flows_moved``: the flows that crossed a failed element and those hanging off them, and their
    replacements), the subscriptions left with no path (``cut_off``) and those served again
    (``restored``)."""

    time: float
    event: str
    seconds: float
    flows_moved: int
    cut_off: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()

    def text(self) -> str:
        """One readable line: when, what, how long, what moved."""
        line = f"re-plan t={self.time:g}s ({self.event}): {self.seconds:.3g} s, {self.flows_moved} flows moved"
        for label, subs in (("cut off", self.cut_off), ("restored", self.restored)):
            if subs:
                shown = ", ".join(subs[:10]) + (f" and {len(subs) - 10} more" if len(subs) > 10 else "")
                line += f"; {len(subs)} {label}: {shown}"
        return line

    def to_json(self) -> dict:
        return {
            "time": self.time,
            "event": self.event,
            "replan_s": self.seconds,
            "flows_moved": self.flows_moved,
            "cut_off": list(self.cut_off),
            "restored": list(self.restored),
        }

    @classmethod
    def from_json(cls, d: dict) -> Replan:
        """The inverse of :meth:`to_json`."""
        return cls(
            float(d["time"]),
            d["event"],
            float(d["replan_s"]),
            int(d["flows_moved"]),
            tuple(d["cut_off"]),
            tuple(d["restored"]),
        )


@dataclass(frozen=True, init=False, eq=False)
class Plan:
    """What every strategy makes: the flows and deliveries in force for the tuples emitted in each epoch,
    as ``changes`` (one per epoch, in time order: how it differs from the epoch before, :class:`Change`),
    the planner's decisions, and the subscriptions it ``rejected`` (by id, each with a one-line reason: a
    network-aware planner found no option within the network limits; such a subscription has no delivery
    and receives nothing from then on, :meth:`rejected_from`), and what each change of the backbone made it
    do (``replans``).  A plan made by :func:`sharing.make_plan` has passed :meth:`check`; the engines check
    any other once before they lay it out.

    A plan is made from its changes (``changes=``), or from its epochs (``Plan(strategy, scenario, epochs)``),
    whose changes are then found by comparing each epoch's flows and deliveries with the epoch before's by
    value (an equal one is kept, whether the very object or one made anew).  Its epochs are built from the
    changes when asked (:attr:`epochs`); two plans are equal when their epochs, decisions, rejections and
    re-plans are."""

    strategy: str
    scenario: str
    changes: tuple[Change, ...]
    decisions: tuple[Decision, ...]
    rejected: Mapping[str, str]
    replans: tuple[Replan, ...]  # one per change of the backbone, in time order (docs/DYNAMICS.md)

    def __init__(
        self,
        strategy: str,
        scenario: str,
        epochs: tuple[Epoch, ...] = (),
        decisions: tuple[Decision, ...] = (),
        rejected: Mapping[str, str] | None = None,
        replans: tuple[Replan, ...] = (),
        *,
        changes: tuple[Change, ...] | None = None,
    ) -> None:
        if changes is not None and epochs:
            raise TypeError("a plan is made from its epochs or from its changes, not both")
        if changes is None:
            changes = _changes_of(epochs)
        for name, value in (
            ("strategy", strategy),
            ("scenario", scenario),
            ("changes", tuple(changes)),
            ("decisions", tuple(decisions)),
            ("rejected", {} if rejected is None else rejected),
            ("replans", tuple(replans)),
        ):
            object.__setattr__(self, name, value)

    @cached_property
    def epochs(self) -> tuple[Epoch, ...]:
        """Every epoch, built by applying the changes in turn (once, when first asked)."""
        return tuple(self.iter_epochs())

    def iter_epochs(self) -> Iterator[Epoch]:
        """The epochs one by one, each built from the one before and its change."""
        flows: tuple[Flow, ...] = ()
        deliveries: tuple[Delivery, ...] = ()
        for change in self.changes:
            flows = tuple(change.flows.applied(flows))
            deliveries = tuple(change.deliveries.applied(deliveries))
            yield Epoch(change.start, change.end, flows, deliveries)

    @cached_property
    def pane_chains(self) -> dict[str, Panes]:
        """Per pane flow id, its panes in the last epoch it is in: with every era it went through (a widened
        flow's panes in an earlier epoch are those of its eras up to then, :class:`Panes`)."""
        found: dict[str, Panes] = {}
        for change in self.changes:
            for _, flow in change.flows.came:
                if flow.panes is not None:
                    found[flow.id] = flow.panes
        return found

    def __getstate__(self) -> dict:
        """What a copy or a pickle takes: the changes, not the epochs built from them."""
        state = dict(self.__dict__)
        state.pop("epochs", None)
        state.pop("pane_chains", None)
        return state

    def with_epochs(self, epochs: tuple[Epoch, ...]) -> Plan:
        """This plan with ``epochs`` instead of its own (``dataclasses.replace`` keeps the changes)."""
        return Plan(self.strategy, self.scenario, epochs, self.decisions, self.rejected, self.replans)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return (self.strategy, self.scenario, self.decisions, dict(self.rejected), self.replans) == (
            other.strategy,
            other.scenario,
            other.decisions,
            dict(other.rejected),
            other.replans,
        ) and self.epochs == other.epochs

    def __hash__(self) -> int:
        return hash((self.strategy, self.scenario, len(self.changes), self.decisions, self.replans))

    def rejected_from(self) -> dict[str, float]:
        """Per rejected subscription, the time from which it is rejected: that of the decision rejecting
        it (its arrival, or a re-plan after a failure, docs/DYNAMICS.md); ``-inf`` when no decision says
        (it is then rejected for the whole run)."""
        times = dict.fromkeys(self.rejected, -math.inf)
        for d in self.decisions:
            if d.subscription in times and d.summary.startswith("rejected"):
                times[d.subscription] = d.time
        return times

    def operators(self) -> dict[str, int]:
        """Per super-peer with any, the most operators it runs in one epoch: the flows produced there
        (a filter and a projection each) and the deliveries taken there."""
        most: dict[str, int] = {}
        for epoch in self.epochs:
            here: dict[str, int] = {}
            for flow in epoch.flows:
                here[flow.origin] = here.get(flow.origin, 0) + 1
            for delivery in epoch.deliveries:
                here[delivery.home] = here.get(delivery.home, 0) + 1
            for node, n in here.items():
                most[node] = max(most.get(node, 0), n)
        return dict(sorted(most.items()))

    def check(self, scenario: Scenario, network: Network | None = None) -> Plan:
        """This plan, once it keeps the rules every plan keeps over ``scenario`` (sharing/rules.py);
        raises PlanError naming the epoch, flow or subscription of the first broken rule.  A plan is
        checked once: checking it again costs nothing."""
        if _CHECKED.get(id(self)) is self:
            return self
        from sharing.rules import check_plan

        check_plan(self, scenario, network)
        _CHECKED[id(self)] = self
        return self

    def splice(self, after: Plan, at: float) -> Plan:
        """This plan's epochs up to time ``at``, then ``after``'s (an epoch across ``at`` is cut), with the
        decisions of each side: how a running network moves to a new plan while the tuples emitted before
        ``at`` keep the routes they were given."""
        head = tuple(replace(e, end=min(e.end, at)) for e in self.epochs if e.start < at)
        tail = tuple(replace(e, start=max(e.start, at)) for e in after.epochs if e.end > at)
        decisions = tuple(d for d in self.decisions if d.time < at) + tuple(d for d in after.decisions if d.time >= at)
        rejected = {**_rejected_by(self, lambda t: t < at), **_rejected_by(after, lambda t: t >= at)}
        replans = tuple(r for r in self.replans if r.time < at) + tuple(r for r in after.replans if r.time >= at)
        return Plan(after.strategy, after.scenario, head + tail, decisions, rejected, replans)

    def epoch_at(self, t: float) -> Epoch | None:
        """The epoch in force for a tuple emitted at time ``t`` (None outside every epoch)."""
        for epoch in self.epochs:
            if epoch.start <= t < epoch.end:
                return epoch
        return None

    def to_json(self) -> dict:
        return {
            "strategy": self.strategy,
            "scenario": self.scenario,
            "epochs": [e.to_json() for e in self.epochs],
            "decisions": [d.to_json() for d in self.decisions],
            "rejected": dict(self.rejected),
            "replans": [r.to_json() for r in self.replans],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def to_text(self) -> str:
        return "\n".join(self.text_lines())

    def text_lines(self) -> Iterator[str]:
        """A readable account, line by line: each decision, then each epoch's changes (the flows and
        deliveries installed, changed or removed since the epoch before), so that the text grows with the
        plan's changes, not with epochs times flows."""
        yield f"plan {self.scenario} / {self.strategy}"
        for d in self.decisions:
            yield f"  t={d.time:g}s {d.event} {d.subscription}: {d.summary}"
        for sub, reason in self.rejected.items():
            yield f"rejected {sub}: {reason}"
        for r in self.replans:
            yield r.text()
        flows: dict[str, Flow] = {}
        deliveries: dict[str, Delivery] = {}
        for e in self.epochs:
            now_flows = {f.id: f for f in e.flows}
            now_deliveries = {d.subscription: d for d in e.deliveries}
            yield f"epoch [{e.start:g}, {e.end:g}): {len(e.flows)} flows, {len(e.deliveries)} deliveries"
            for f in e.flows:
                if flows.get(f.id) != f:
                    src = f.parent or f"{f.stream}(raw)"
                    route = " -> ".join(f.path)
                    mark = "~" if f.id in flows else "+"
                    yield (
                        f"  {mark} {f.id} <- {src} at {f.origin}: WHERE {f.predicate.to_text()}"
                        f" SELECT {','.join(f.attrs)}"
                        + (f" AGGREGATE {f.aggregate}" if f.aggregate is not None else "")
                        + (f" {f.panes.text()}" if f.panes is not None else "")
                        + f"; {route}"
                    )
            for flow_id in flows:  # in the order the epoch before listed them
                if flow_id not in now_flows:
                    yield f"  - {flow_id}"
            for d in e.deliveries:
                if deliveries.get(d.subscription) != d:
                    mark = "~" if d.subscription in deliveries else "+"
                    yield f"  {mark} {d.subscription} <- {d.flow or 'raw'} at {d.home} -> {d.peer}"
            for sub in deliveries:
                if sub not in now_deliveries:
                    yield f"  - {sub}"
            flows, deliveries = now_flows, now_deliveries

    def write_json(self, out: TextIO) -> None:
        """Write the plan as compact JSON, epoch by epoch (never the whole document in memory).

        Consecutive epochs share most flows and deliveries, so each distinct flow, delivery and predicate
        text is written once, in the tables ``flow_table``, ``delivery_table`` and ``texts``, and each epoch
        gives its flows and deliveries as indices into them, as a change to the epoch before: ``{"keep":
        [head, tail], "put": [...]}`` is the previous epoch's list with its first ``head`` and last ``tail``
        entries kept and ``put`` between them (the first epoch keeps nothing).  An epoch that changes one
        subscription therefore costs a few numbers, not the whole list.  :func:`plan_from_wire` reads it
        back.
        """
        texts: dict[str, int] = {}
        flow_docs: list[dict] = []
        delivery_docs: list[dict] = []
        by_value: dict[Flow | Delivery, int] = {}

        by_predicate: dict[Predicate, int] = {}  # rendering a predicate costs more than looking it up
        box_texts: dict = {}

        def text(p: Predicate) -> int:
            index = by_predicate.get(p)
            if index is None:
                index = by_predicate[p] = texts.setdefault(predicate_to_text(p, box_texts), len(texts))
            return index

        def indices(before: list[int], edit: Edit, docs: list[dict]) -> list[int]:
            """``before``, the indices of an epoch's list, as ``edit`` makes them (each new object written
            to ``docs`` at its first coming)."""
            came = []
            for p, item in edit.came:
                index = by_value.get(item)
                if index is None:
                    index = by_value[item] = len(docs)
                    docs.append(item.to_json(text))
                came.append((p, index))
            return Edit(edit.gone, tuple(came)).applied(before)

        dump = partial(json.dumps, separators=(",", ":"))
        out.write(f'{{"strategy":{dump(self.strategy)},"scenario":{dump(self.scenario)},"epochs":[')
        flows: list[int] = []
        deliveries: list[int] = []
        for k, change in enumerate(self.changes):
            now_flows = indices(flows, change.flows, flow_docs)
            now_deliveries = indices(deliveries, change.deliveries, delivery_docs)
            doc = {
                "start": change.start,
                "end": change.end,
                "flows": _change(flows, now_flows, change.flows),
                "deliveries": _change(deliveries, now_deliveries, change.deliveries),
            }
            flows, deliveries = now_flows, now_deliveries
            out.write(("," if k else "") + "\n" + dump(doc))
        out.write('],\n"texts":' + dump(list(texts)))
        out.write(',\n"flow_table":[' + ",\n".join(dump(d) for d in flow_docs) + "]")
        out.write(',\n"delivery_table":[' + ",\n".join(dump(d) for d in delivery_docs) + "]")
        out.write(',\n"decisions":[' + ",\n".join(dump(d.to_json()) for d in self.decisions) + "]")
        out.write(',\n"rejected":' + dump(dict(self.rejected)))
        out.write(',\n"replans":[' + ",\n".join(dump(r.to_json()) for r in self.replans) + "]}")


def plan_from_wire(doc: dict) -> Plan:
    """The inverse of :meth:`Plan.write_json`; equal flows of different epochs are one shared object."""
    from matcher import parse_condition

    predicates = [parse_condition(t) for t in doc["texts"]]

    def flow(f: dict) -> Flow:
        trim = tuple((predicates[t["where"]], tuple(t["attrs"])) for t in f.get("trim", ()))
        where = predicates[f["where"]]
        return Flow(
            f["id"], f["stream"], f["parent"], f["origin"], tuple(f["path"]), where, tuple(f["attrs"]), trim,
            f.get("records_of"), Panes.from_json(f["panes"], predicates) if "panes" in f else None,
        )  # fmt: skip

    flows = [flow(f) for f in doc["flow_table"]]
    deliveries = [
        Delivery(d["subscription"], d["peer"], d["home"], d["flow"], predicates[d["where"]], tuple(d["attrs"]))
        for d in doc["delivery_table"]
    ]
    changes = []
    flow_count = delivery_count = 0
    for e in doc["epochs"]:
        flow_edit = _edit(flow_count, e["flows"], flows)
        delivery_edit = _edit(delivery_count, e["deliveries"], deliveries)
        flow_count += len(flow_edit.came) - len(flow_edit.gone)
        delivery_count += len(delivery_edit.came) - len(delivery_edit.gone)
        changes.append(Change(float(e["start"]), float(e["end"]), flow_edit, delivery_edit))
    decisions = tuple(Decision.from_json(d) for d in doc.get("decisions", ()))
    replans = tuple(Replan.from_json(r) for r in doc.get("replans", ()))
    rejected = dict(doc.get("rejected", {}))
    return Plan(doc["strategy"], doc["scenario"], (), decisions, rejected, replans, changes=tuple(changes))


def _rejected_by(plan: Plan, when: Callable[[float], bool]) -> dict[str, str]:
    """``plan``'s rejections decided at a time ``when`` accepts."""
    times = plan.rejected_from()
    return {sub: why for sub, why in plan.rejected.items() if when(times[sub])}


def _change(before: list[int], after: list[int], edit: Edit) -> dict:
    """``after`` (``before`` as ``edit`` makes it) as a change to ``before``: the longest common head kept,
    then the longest common tail of the rest, and the middle put anew.  Both lists are alike up to the
    first place ``edit`` touches and past the last: the scans start there."""
    short = min(len(before), len(after))
    touched = [*edit.gone[:1], *(p for p, _ in edit.came[:1])]
    head = min([*touched, short])
    while head < short and before[head] == after[head]:
        head += 1
    ends = [len(before) - 1 - p for p in edit.gone[-1:]] + [len(after) - 1 - p for p, _ in edit.came[-1:]]
    tail = min([*ends, short - head])
    while tail < short - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return {"keep": [head, tail], "put": after[head : len(after) - tail]}


def _edit(before: int, change: dict, table: list) -> Edit:
    """The inverse of :func:`_change` over the objects of ``table``, for a list of ``before`` entries;
    ValueError for a change that does not fit it."""
    head, tail = change["keep"]
    if not (type(head) is int and type(tail) is int and head >= 0 and tail >= 0 and head + tail <= before):
        raise ValueError(f"epoch change keeps {head!r} + {tail!r} of {before} entries")
    return Edit(tuple(range(head, before - tail)), tuple((head + k, table[i]) for k, i in enumerate(change["put"])))


def _changes_of(epochs: tuple[Epoch, ...]) -> tuple[Change, ...]:
    """Each epoch as a change to the epoch before (the first, to none), by value: a flow or delivery equal
    to one of the epoch before is kept, whether given again or made anew (each is first replaced by the
    first equal one given, so the lists are compared as the producers' are, object by object)."""
    from sharing.epochs import Listing

    flows, deliveries = Listing(), Listing()
    first: dict = {}

    def alike(items: tuple) -> tuple:
        return tuple(first.setdefault(x, x) for x in items)

    return tuple(
        Change(e.start, e.end, flows.change(alike(e.flows)), deliveries.change(alike(e.deliveries))) for e in epochs
    )
