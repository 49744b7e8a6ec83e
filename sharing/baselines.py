"""The four baselines of SPEC section 3: data-shipping, query-shipping, multicast and the ideal bound.

Each is a pure function of the subscriptions active in an epoch, so a flow keeps its id (derived from the
subscription, or from the tree edge) for as long as it exists.  Every delivery is exact: it applies the
subscription's WHERE unless the flow it reads already holds exactly that result (query-shipping).
"""

from __future__ import annotations

from itertools import pairwise

from matcher import Predicate
from network.routing import Network
from sharing.plan import Delivery, Flow
from topologies.model import Scenario, SubscriptionSpec

BASELINES = ("data-shipping", "query-shipping", "multicast", "ideal")


def baseline_epoch(
    scenario: Scenario, network: Network, strategy: str, active: list[SubscriptionSpec]
) -> tuple[tuple[Flow, ...], tuple[Delivery, ...]]:
    """Flows (parents first) and deliveries of ``strategy`` for the ``active`` subscriptions (scenario order)."""
    if strategy == "data-shipping":
        return _per_subscription(scenario, network, active, ship_results=False)
    if strategy == "query-shipping":
        return _per_subscription(scenario, network, active, ship_results=True)
    return _tree(scenario, network, active, trimmed=strategy == "ideal")


def _select(scenario: Scenario, sub: SubscriptionSpec) -> tuple[str, ...]:
    return sub.query.attributes(scenario.stream(sub.stream).attribute_names)


def _source_sp(scenario: Scenario, stream: str) -> str:
    return scenario.home(scenario.stream(stream).source)


def _per_subscription(
    scenario: Scenario, network: Network, active: list[SubscriptionSpec], *, ship_results: bool
) -> tuple[tuple[Flow, ...], tuple[Delivery, ...]]:
    flows: list[Flow] = []
    deliveries: list[Delivery] = []
    for sub in active:
        home, source = scenario.home(sub.peer), _source_sp(scenario, sub.stream)
        select = _select(scenario, sub)
        if home == source:  # nothing crosses the backbone: filter the raw stream where it enters
            deliveries.append(Delivery(sub.id, sub.peer, home, None, sub.query.where, select))
            continue
        path = network.route(source, home)
        if ship_results:
            flow = Flow(f"result.{sub.id}", sub.stream, None, source, path, sub.query.where, select)
            deliveries.append(Delivery(sub.id, sub.peer, home, flow.id, Predicate.TRUE, select))
        else:
            schema = scenario.stream(sub.stream).attribute_names
            flow = Flow(f"raw.{sub.id}", sub.stream, None, source, path, Predicate.TRUE, schema)
            deliveries.append(Delivery(sub.id, sub.peer, home, flow.id, sub.query.where, select))
        flows.append(flow)
    return tuple(flows), tuple(deliveries)


def _tree(
    scenario: Scenario, network: Network, active: list[SubscriptionSpec], *, trimmed: bool
) -> tuple[tuple[Flow, ...], tuple[Delivery, ...]]:
    """One flow per link of the union of routes from each stream's source super-peer (a tree, see
    network.routing), parents first; ``trimmed`` gives the ideal bound's per-edge filters and trims."""
    flows: list[Flow] = []
    deliveries: list[Delivery] = []
    for stream in scenario.streams:
        subs = [s for s in active if s.stream == stream.id]
        if not subs:
            continue
        source = _source_sp(scenario, stream.id)
        downstream: dict[tuple[str, str], list[SubscriptionSpec]] = {}
        depth: dict[tuple[str, str], int] = {}
        for sub in subs:
            route = network.route(source, scenario.home(sub.peer))
            for i, edge in enumerate(pairwise(route)):
                downstream.setdefault(edge, []).append(sub)
                depth[edge] = i
        into: dict[str, str] = {}  # super-peer -> id of the flow entering it
        for edge in sorted(downstream, key=lambda e: (depth[e], e)):
            tail, head = edge
            flow_id = f"{stream.id}:{tail}>{head}"
            parent = into.get(tail)
            if trimmed:
                below = downstream[edge]
                predicate = Predicate([b for s in below for b in s.query.where.boxes]).canonical()
                wanted = {a for s in below for a in _select(scenario, s)}
                attrs = tuple(a for a in stream.attribute_names if a in wanted)
                trim = tuple((s.query.where, _select(scenario, s)) for s in below)
                flows.append(Flow(flow_id, stream.id, parent, tail, edge, predicate, attrs, trim))
            else:
                flows.append(Flow(flow_id, stream.id, parent, tail, edge, Predicate.TRUE, stream.attribute_names))
            into[head] = flow_id
        for sub in subs:
            home = scenario.home(sub.peer)
            deliveries.append(Delivery(sub.id, sub.peer, home, into.get(home), sub.query.where, _select(scenario, sub)))
    order = {s.id: i for i, s in enumerate(active)}
    deliveries.sort(key=lambda d: order[d.subscription])
    return tuple(flows), tuple(deliveries)
