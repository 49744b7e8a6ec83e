"""Helpers for the sharing tests: small random scenarios and a checker of any plan's invariants."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from matcher import Box, Predicate, Query, Uniform, interval
from network.routing import Network
from sharing.epochs import is_active
from sharing.plan import Plan
from topologies.model import AttributeSpec, LinkSpec, Scenario, StreamSpec, SubscriptionSpec, ThinPeerSpec

ATTRS = ("a", "b", "c")


@st.composite
def boxes(draw) -> Box:
    dims = draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=2, unique=True))
    items = []
    for d in dims:
        lo = draw(st.integers(0, 90))
        hi = draw(st.integers(lo + 1, 100))
        items.append((d, interval(lo, hi, draw(st.booleans()), True)))
    return Box(items)


@st.composite
def scenarios(draw) -> Scenario:
    """A connected backbone of 2-6 super-peers, 1-2 streams, up to 7 subscriptions arriving and leaving."""
    n = draw(st.integers(2, 6))
    sps = tuple(f"SP{i}" for i in range(n))
    pairs = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}  # a spanning tree, then extra links
    pairs |= set(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3)))
    links = tuple(
        LinkSpec(sps[i], sps[j], 1e6, Fraction(draw(st.integers(1, 3)), 1000)) for i, j in sorted(pairs) if i < j
    )
    peers = tuple(ThinPeerSpec(f"P{i}", draw(st.sampled_from(sps))) for i in range(4))
    streams = tuple(
        StreamSpec(
            f"s{k}",
            f"P{k}",
            float(draw(st.integers(1, 50))),
            tuple(AttributeSpec(a, "float", Uniform(0, 100)) for a in ATTRS),
        )
        for k in range(draw(st.integers(1, 2)))
    )
    subs = []
    for i in range(draw(st.integers(1, 7))):
        stream = draw(st.sampled_from(streams)).id
        select = tuple(draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=3, unique=True)))
        where = Predicate(draw(st.lists(boxes(), min_size=1, max_size=2)))
        at = draw(st.sampled_from([0, 0, 10, 20]))
        until = draw(st.sampled_from([None, None, at + 10, at + 15]))
        subs.append(SubscriptionSpec(f"Q{i}", draw(st.sampled_from(peers)).id, at, until, Query(select, stream, where)))
    return Scenario("random", 1, 40, 16, sps, links, peers, streams, tuple(subs))


def plan_problems(plan: Plan, scenario: Scenario, network: Network) -> list[str]:
    """Every violated invariant of ``plan``, as readable lines (empty: the plan is sound)."""
    problems = []
    ends = [0.0] + [e.end for e in plan.epochs]
    if [e.start for e in plan.epochs] != ends[:-1] or ends[-1] != scenario.duration:
        problems.append(f"epochs do not tile [0, {scenario.duration}): {[(e.start, e.end) for e in plan.epochs]}")
    oracle = plan.strategy == "ideal"  # the ideal bound's trimmed flows are an accounting bound
    for epoch in plan.epochs:
        where = f"[{epoch.start}, {epoch.end})"
        flows, chains = {}, {}  # flow id -> flow, and -> its ancestors (root first)
        for f in epoch.flows:
            stream = scenario.stream(f.stream)
            source = scenario.home(stream.source)
            schema = stream.attribute_names
            if f.id in flows:
                problems.append(f"{where} {f.id}: duplicate id")
            if f.path[0] != f.origin:
                problems.append(f"{where} {f.id}: path does not start at the origin")
            for a, b in f.hops:
                if (a, b) not in network.directions:
                    problems.append(f"{where} {f.id}: {a}-{b} is not a backbone link")
            if f.parent is None:
                parent_attrs, chain = schema, []
                if f.origin != source:
                    problems.append(f"{where} {f.id}: raw stream read away from its source {source}")
            elif f.parent not in flows:
                problems.append(f"{where} {f.id}: parent {f.parent} not listed before it")
                continue
            else:
                parent = flows[f.parent]
                parent_attrs, chain = parent.attrs, [*chains[f.parent], parent]
                if f.origin not in parent.path:
                    problems.append(f"{where} {f.id}: parent {parent.id} not available at {f.origin}")
                if not oracle and not set(f.attrs) <= set(parent_attrs):
                    problems.append(f"{where} {f.id}: attrs {f.attrs} not all in parent's {parent_attrs}")
                if (
                    not oracle
                    and not set(f.predicate.dims) <= set(parent_attrs)
                    and not parent.predicate.implies(f.predicate)
                ):
                    problems.append(f"{where} {f.id}: filter needs attributes its parent lacks")
            flows[f.id] = f
            chains[f.id] = chain
        delivered = [d.subscription for d in epoch.deliveries]
        active = [s.id for s in scenario.subscriptions if is_active(s, epoch.start, epoch.end)]
        if sorted(delivered) != sorted(active):
            problems.append(f"{where}: deliveries {delivered} but active {active}")
        for d in epoch.deliveries:
            sub = scenario.subscription(d.subscription)
            stream = scenario.stream(sub.stream)
            select = sub.query.attributes(stream.attribute_names)
            if d.home != scenario.home(sub.peer) or d.peer != sub.peer or d.attrs != select:
                problems.append(f"{where} {d.subscription}: wrong home, peer or attributes")
            if d.flow is None:
                if d.home != scenario.home(stream.source) or d.predicate != sub.query.where:
                    problems.append(f"{where} {d.subscription}: raw delivery away from the source or unfiltered")
                continue
            flow = flows.get(d.flow)
            if flow is None or flow.stream != sub.stream or d.home not in flow.path:
                problems.append(f"{where} {d.subscription}: flow {d.flow} not available at {d.home}")
                continue
            for f in [*chains[flow.id], flow]:  # nothing the subscription needs is filtered away upstream
                if not sub.query.where.implies(f.predicate):
                    problems.append(f"{where} {d.subscription}: WHERE does not imply {f.id}'s predicate")
            if d.predicate != sub.query.where and not (
                d.predicate.is_true()
                and flow.predicate.implies(d.predicate)
                and flow.predicate.implies(sub.query.where)
            ):
                problems.append(f"{where} {d.subscription}: delivery filter is not exact")
            if not oracle:
                needed = set(select) | (set(sub.query.where.dims) if d.predicate == sub.query.where else set())
                if not needed <= set(flow.attrs):
                    problems.append(f"{where} {d.subscription}: {flow.id} lacks attributes {needed - set(flow.attrs)}")
    return problems
