"""Scenarios designed to probe the link model where it is easiest to get wrong, each small enough to play
packet by packet: exact ties (constant-rate streams and round parameters put arrivals and the end of a
service on the very same picosecond), links loaded to exactly 100 %, buffers exactly full, overload,
long and short paths merging across a window boundary, a ring whose flows feed each other, failures.

Streams carry two attributes (16 header bytes + 2 x 8 bytes = 32 bytes raw: 1 ms at 256 kbit/s);
subscriptions selecting one attribute get 24-byte copies.
"""

from __future__ import annotations

_STREAM = """
  - id: {id}
    source: {source}
    rate: {rate}
    schema:
      a: {{type: float, distribution: {{uniform: [0, 100]}}}}
      b: {{type: float, distribution: {{uniform: [0, 100]}}}}"""

_HEAD = """name: {name}
seed: 3
duration: {duration}
header_bytes: 16
network:
  defaults: {{bandwidth: 100Mbit, latency: 1ms}}
  super_peers: [{super_peers}]
  links:
{links}
thin_peers:
{peers}
streams:{streams}
subscriptions:
{subscriptions}
"""


def _scenario(name, super_peers, links, peers, streams, subscriptions, duration=6, events=(), planner=None):
    text = _HEAD.format(
        name=name,
        duration=duration,
        super_peers=", ".join(super_peers),
        links="\n".join(f"    - {link}" for link in links),
        peers="\n".join(f"  - {{id: {p}, attach: {sp}, bandwidth: 100Mbit, latency: 0ms}}" for p, sp in peers),
        streams="".join(_STREAM.format(id=s, source=src, rate=rate) for s, src, rate in streams),
        subscriptions="\n".join(f"  - {s}" for s in subscriptions),
    )
    if planner:
        text += f"planner: {planner}\n"
    if events:
        text += "events:\n" + "\n".join(f"  - {e}" for e in events) + "\n"
    return text


SCENARIOS = {
    # a chain whose middle link is loaded to exactly 100 % by one copy of the stream (1,000 tuples/s of
    # 1 ms each): every tuple reaches the queue on the very picosecond the one before leaves the wire, and
    # the buffer holds exactly one tuple; data-shipping sends two copies: 200 %, the buffer overflows
    "full-link": _scenario(
        "full-link",
        ["SP0", "SP1", "SP2"],
        ["[SP0, SP1]", "[SP1, SP2, {bandwidth: 256Kbit, latency: 2ms, buffer: 32B}]"],
        [("P0", "SP0"), ("P1", "SP2"), ("P2", "SP2")],
        [("s", "P0", 1000)],
        [
            '{id: Q1, peer: P1, at: 0, query: "SELECT a, b FROM s"}',
            '{id: Q2, peer: P2, at: 0, query: "SELECT a, b FROM s WHERE a >= 0"}',
        ],
        planner="{max_utilization: 1.0, peak_sd: 0}",  # the sharing strategies too fill it to the last bit
    ),
    # a 400 ms path and a 1 ms path merge onto a bottleneck: the long path's tuples of one batch window
    # reach it after the short path's tuples of the next window
    "merge": _scenario(
        "merge",
        ["SP0", "SP1", "SP2", "SP3"],
        ["[SP0, SP2, {latency: 400ms}]", "[SP1, SP2]", "[SP2, SP3, {bandwidth: 256Kbit, buffer: 64B}]"],
        [("P0", "SP0"), ("P1", "SP1"), ("P2", "SP3"), ("P3", "SP3")],
        [("s", "P0", 500), ("t", "P1", 490)],
        [
            '{id: Q1, peer: P2, at: 0, query: "SELECT a, b FROM s"}',
            '{id: Q2, peer: P3, at: 0, query: "SELECT a, b FROM t"}',
        ],
    ),
    # one stream at 150 % of a bottleneck with a 1 KB buffer: a backlog, tail drops, the buffer full to the
    # byte again and again; the subscribers downstream select less, so sharing strategies relieve it
    "overload": _scenario(
        "overload",
        ["SP0", "SP1", "SP2", "SP3"],
        ["[SP0, SP1, {bandwidth: 256Kbit, buffer: 1KB}]", "[SP1, SP2]", "[SP1, SP3, {latency: 3ms}]"],
        [("P0", "SP0"), ("P1", "SP2"), ("P2", "SP3"), ("P3", "SP3")],
        [("s", "P0", 1500)],
        [
            '{id: Q1, peer: P1, at: 0, query: "SELECT a, b FROM s WHERE a < 90"}',
            '{id: Q2, peer: P2, at: 0, query: "SELECT a FROM s WHERE b < 50"}',
            '{id: Q3, peer: P3, at: 1, until: 5, query: "SELECT b FROM s"}',
        ],
    ),
    # a tree: one stream to leaves with other predicates and attributes (copies of other sizes read off
    # flows at the branches), a buffered root link near capacity
    "tree": _scenario(
        "tree",
        ["SP0", "SP1", "SP2", "SP3", "SP4"],
        [
            "[SP0, SP1, {bandwidth: 512Kbit, buffer: 96B}]",
            "[SP1, SP2, {bandwidth: 256Kbit}]",
            "[SP1, SP3]",
            "[SP3, SP4, {bandwidth: 256Kbit, buffer: 48B, latency: 5ms}]",
        ],
        [("P0", "SP0"), ("P1", "SP2"), ("P2", "SP3"), ("P3", "SP4"), ("P4", "SP4")],
        [("s", "P0", 1600)],
        [
            '{id: Q1, peer: P1, at: 0, query: "SELECT a, b FROM s WHERE a < 60"}',
            '{id: Q2, peer: P2, at: 0, query: "SELECT a FROM s"}',
            '{id: Q3, peer: P3, at: 0, query: "SELECT b FROM s WHERE a < 50"}',
            '{id: Q4, peer: P4, at: 2, query: "SELECT a, b FROM s WHERE b > 40"}',
        ],
    ),
    # a ring of five: each super-peer's stream goes two hops clockwise, so every link carries two streams
    # (105 % of its bandwidth and more: drops) and the flows feed each other all the way round (a cycle of
    # link dependencies)
    "ring": _scenario(
        "ring",
        ["SP0", "SP1", "SP2", "SP3", "SP4"],
        [f"[SP{i}, SP{(i + 1) % 5}, {{bandwidth: 512Kbit, buffer: 64B}}]" for i in range(5)],
        [(f"P{i}", f"SP{i}") for i in range(5)] + [(f"R{i}", f"SP{(i + 2) % 5}") for i in range(5)],
        [(f"s{i}", f"P{i}", 950 + 60 * i) for i in range(5)],
        [f'{{id: Q{i}, peer: R{i}, at: 0, query: "SELECT a, b FROM s{i}"}}' for i in range(5)],
    ),
    # failures: a loaded chain with a detour; the middle link fails and recovers, then a super-peer
    "failures": _scenario(
        "failures",
        ["SP0", "SP1", "SP2", "SP3"],
        [
            "[SP0, SP1, {bandwidth: 256Kbit, buffer: 128B}]",
            "[SP1, SP2, {bandwidth: 256Kbit, buffer: 64B}]",
            "[SP0, SP3, {latency: 7ms}]",
            "[SP3, SP2, {latency: 7ms}]",
        ],
        [("P0", "SP0"), ("P1", "SP2"), ("P2", "SP2"), ("P3", "SP1")],
        [("s", "P0", 800)],
        [
            '{id: Q1, peer: P1, at: 0, query: "SELECT a, b FROM s"}',
            '{id: Q2, peer: P2, at: 0, query: "SELECT a FROM s WHERE a < 70"}',
            '{id: Q3, peer: P3, at: 0, query: "SELECT a, b FROM s WHERE b < 30"}',
        ],
        events=[
            "{at: 1.5, fail: link, link: [SP1, SP2]}",
            "{at: 2.75, recover: link, link: [SP1, SP2]}",
            "{at: 4, fail: super_peer, id: SP1}",
            "{at: 5, recover: super_peer, id: SP1}",
        ],
    ),
}

STRATEGIES = ("data-shipping", "query-shipping", "multicast", "sharing-em")
WINDOWS = (None, 0.1, 0.35, 1.0, 2.5, 6.0)  # None: the engine's default
