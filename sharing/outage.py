"""The backbone a strategy plans over while elements are down (docs/DYNAMICS.md), shared by the planner and
the baselines: the surviving network of the current state, what an event changed, and whether a path
crosses a failed element.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import NamedTuple

from network.routing import Network
from topologies.outages import NetworkState


class Change(NamedTuple):
    """What one backbone event did: the links (sorted pairs) and super-peers that failed with it, and
    whether anything came back."""

    failed_links: frozenset[tuple[str, str]]
    failed_nodes: frozenset[str]
    recovered: bool

    @property
    def failed(self) -> bool:
        return bool(self.failed_links or self.failed_nodes)


def crosses(path: tuple[str, ...], links: frozenset[tuple[str, str]], nodes: frozenset[str]) -> bool:
    """Whether ``path`` visits one of ``nodes`` or crosses one of ``links`` (sorted pairs), either way."""
    if nodes and not nodes.isdisjoint(path):
        return True
    return bool(links) and any((a, b) in links or (b, a) in links for a, b in pairwise(path))


class Outage:
    """The whole backbone, the state in force and the network that survives in it."""

    def __init__(self, network: Network):
        self.whole = network
        self.network = network
        self.state = NetworkState(0.0, float("inf"), frozenset(), frozenset())

    @property
    def intact(self) -> bool:
        return self.state.intact

    def switch(self, state: NetworkState) -> Change:
        """Move to ``state``: the surviving network is routed afresh (its routes are the rule over what
        survives); what failed and whether something recovered."""
        before = self.state
        change = Change(
            state.failed_links - before.failed_links,
            state.failed_nodes - before.failed_nodes,
            bool(before.failed_links - state.failed_links or before.failed_nodes - state.failed_nodes),
        )
        self.state = state
        self.network = self.whole.surviving(state.failed_links, state.failed_nodes)
        return change

    def joins(self, a: str, b: str) -> bool:
        """Whether both super-peers are up and a path over the surviving links joins them."""
        down = self.state.failed_nodes
        return a not in down and b not in down and b in self.network.routes_from(a)

    def down_on(self, path: Iterable[str]) -> bool:
        """Whether ``path`` meets an element that is down now."""
        return crosses(tuple(path), self.state.failed_links, self.state.failed_nodes)
