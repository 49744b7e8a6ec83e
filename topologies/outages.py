"""What a scenario's failures and recoveries leave of the backbone, over time (docs/DYNAMICS.md).

Pure functions of the scenario's ``events``: the network states between events, the intervals each link
direction is down, and which super-peers can reach which at a given time.  Connectivity here is plain
breadth-first search over the surviving links, independent of the route rule and of every strategy, so
the report's ``unreachable`` counts computed from it check the engines rather than repeat them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from topologies.model import Direction, NetworkEvent, Scenario


@dataclass(frozen=True)
class NetworkState:
    """The backbone from ``start`` until ``end``: the links (each as its sorted pair of ends) and the
    super-peers that are down."""

    start: float
    end: float
    failed_links: frozenset[tuple[str, str]]
    failed_nodes: frozenset[str]

    @property
    def intact(self) -> bool:
        return not self.failed_links and not self.failed_nodes

    def link_up(self, a: str, b: str) -> bool:
        """Whether the link ``a``-``b`` carries tuples: it and both its ends are up."""
        return (
            (min(a, b), max(a, b)) not in self.failed_links
            and a not in self.failed_nodes
            and b not in self.failed_nodes
        )


def apply(event: NetworkEvent, links: set[tuple[str, str]], nodes: set[str]) -> None:
    """Change the sets of failed ``links`` and ``nodes`` by one event."""
    target = links if event.element == "link" else nodes
    key = event.key if event.element == "link" else event.key[0]
    if event.action == "fail":
        target.add(key)
    else:
        target.discard(key)


def network_states(scenario: Scenario) -> list[NetworkState]:
    """The states of the backbone over ``[0, duration)``, in time order, one per interval between event
    times (all events at one instant take effect together); a scenario without events has one, intact."""
    links: set[tuple[str, str]] = set()
    nodes: set[str] = set()
    states: list[NetworkState] = []
    start = 0.0
    events = sorted(scenario.events, key=lambda e: e.at)
    k = 0
    while k < len(events):
        at = float(events[k].at)
        if at > start:
            states.append(NetworkState(start, at, frozenset(links), frozenset(nodes)))
            start = at
        while k < len(events) and float(events[k].at) == at:
            apply(events[k], links, nodes)
            k += 1
    states.append(NetworkState(start, float(scenario.duration), frozenset(links), frozenset(nodes)))
    return states


def event_times(scenario: Scenario) -> list[float]:
    """The distinct times at which the backbone changes, ascending."""
    return sorted({float(e.at) for e in scenario.events})


def _spans(states: list[NetworkState], down, duration: float | None) -> list[tuple[float, float]]:
    """The intervals of the ``states`` in which ``down(state)`` holds, merged and ascending; with a
    ``duration``, one still down at the end stays down (``math.inf``)."""
    spans: list[tuple[float, float]] = []
    for state in states:
        if down(state):
            if spans and spans[-1][1] == state.start:
                spans[-1] = (spans[-1][0], state.end)
            else:
                spans.append((state.start, state.end))
    if spans and duration is not None and spans[-1][1] == duration:
        spans[-1] = (spans[-1][0], math.inf)
    return spans


def down_intervals(scenario: Scenario) -> dict[Direction, list[tuple[float, float]]]:
    """Per link direction that is ever down, its down intervals ``[fail, recover)``, disjoint and
    ascending (a link direction is down while its link or either of its ends is down; ``math.inf``: never
    recovered).  A tuple entering the direction's queue at ``a`` and reaching the far end at ``d`` is lost
    there iff some interval has ``fail <= d`` and ``recover > a`` (docs/DYNAMICS.md)."""
    if not scenario.events:
        return {}
    states = network_states(scenario)
    duration = float(scenario.duration)
    out: dict[Direction, list[tuple[float, float]]] = {}
    for link in scenario.links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            spans = _spans(states, lambda state, a=a, b=b: not state.link_up(a, b), duration)
            if spans:
                out[(a, b)] = spans
    return out


def super_peer_down_intervals(scenario: Scenario) -> dict[str, list[tuple[float, float]]]:
    """Per super-peer that is ever down, its down intervals, as :func:`down_intervals` gives a link
    direction's."""
    if not scenario.events:
        return {}
    states = network_states(scenario)
    failed = sorted({node for state in states for node in state.failed_nodes})
    duration = float(scenario.duration)
    return {node: _spans(states, lambda state, node=node: node in state.failed_nodes, duration) for node in failed}


def components(scenario: Scenario, state: NetworkState) -> dict[str, int]:
    """Each live super-peer's connected component number in ``state`` (failed ones are absent)."""
    adjacent: dict[str, list[str]] = {sp: [] for sp in scenario.super_peers if sp not in state.failed_nodes}
    for link in scenario.links:
        if state.link_up(link.a, link.b):
            adjacent[link.a].append(link.b)
            adjacent[link.b].append(link.a)
    label: dict[str, int] = {}
    for root in adjacent:
        if root in label:
            continue
        label[root] = root_label = len(label)
        frontier = [root]
        while frontier:
            node = frontier.pop()
            for nxt in adjacent[node]:
                if nxt not in label:
                    label[nxt] = root_label
                    frontier.append(nxt)
    return label


def connected(labels: dict[str, int], a: str, b: str) -> bool:
    """Whether super-peers ``a`` and ``b`` are both up and joined by surviving links."""
    return a in labels and b in labels and labels[a] == labels[b]


class Reachability:
    """Which super-peers can reach which, state by state (each state's components computed once)."""

    def __init__(self, scenario: Scenario):
        self.states = [
            (state, None if state.intact else components(scenario, state)) for state in network_states(scenario)
        ]

    def unreachable_spans(self, source: str, home: str) -> list[tuple[float, float]]:
        """The intervals of emission time in which no path joins super-peers ``source`` and ``home`` (or
        either is down), merged and ascending."""
        cut = [state for state, labels in self.states if labels is not None and not connected(labels, source, home)]
        return _spans(cut, lambda state: True, None)


def in_spans(times: np.ndarray, spans: Iterable[tuple[float, float]]) -> np.ndarray:
    """A bool mask over ``times``: which fall in one of the half-open ``spans``."""
    mask = np.zeros(len(times), dtype=bool)
    for start, end in spans:
        mask |= (times >= start) & (times < end)
    return mask
