"""Helpers for the sharing tests: small random scenarios; the plan checker is the library's (sharing.check)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from matcher import Box, Predicate, Query, Uniform, interval
from sharing.check import plan_problems
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


__all__ = ["boxes", "plan_problems", "scenarios"]
