"""Write ``topologies/large.yaml``: 100 super-peers, 4 streams, 500 subscriptions with shared interests.

``python -m topologies.make_large [--out PATH] [--seed N]``.  Deterministic: the same seed writes the
same bytes (a test regenerates the shipped file and compares).

Interests overlap the way they do in practice: each stream has a few hot spots in its (x, y) plane and
every subscription asks for a box around one of them (sometimes OR a second one), of random size, with
an optional cut on ``z`` or ``k``; so many subscriptions contain, overlap or widen one another.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

STREAMS = 4
RATE = 200  # tuples/s per stream: 4 * 200 * 100 s = 80,000 tuples in all
DURATION = 100
SUBSCRIPTIONS = 500
SUBSCRIBER_PEERS = 150
HOT_SPOTS = 5
# transit-stub with 4 * (1 + 3 * 8) = 100 super-peers; SP0..SP3 are the transit nodes
TOPOLOGY = {"transit": 4, "stubs_per_transit": 3, "nodes_per_stub": 8}
SUPER_PEERS = 100

HEADER = """\
# large: 100 super-peers (generated transit-stub), 4 streams, 500 subscriptions with overlapping interests.
#
# Written by `python -m topologies.make_large` (seed {seed}); do not edit by hand, change the script and
# run it again.  Each stream feedN has a few hot spots in its (x, y) plane; every subscription asks for a
# box around one (sometimes OR another), of random size, sometimes with a cut on z or k, and selects a
# random subset of the attributes.  Subscriptions arrive over [0, 80) s; about a third leave again.
# Sources attach to stub nodes; subscribers to random stub nodes (SP{transit}..SP99).  The generator sets
# the backbone's bandwidths and latencies; network.defaults apply to the thin-peers' access links.
# 4 streams x {rate} tuples/s x {duration} s = {tuples} tuples.
"""


def _box(rng: np.random.Generator, center: np.ndarray) -> str:
    half = rng.integers(20, 120, size=2)
    x_lo, y_lo = (int(v) for v in np.clip(center - half, 0, 1000))
    x_hi, y_hi = (int(v) for v in np.clip(center + half, 0, 1000))
    return f"x BETWEEN {x_lo} AND {x_hi} AND y BETWEEN {y_lo} AND {y_hi}"


def _query(rng: np.random.Generator, stream: int, spots: np.ndarray) -> str:
    first = rng.integers(0, HOT_SPOTS)
    condition = _box(rng, spots[first])
    cut = rng.random()
    if cut < 0.25:
        condition += f" AND z > {int(rng.integers(40, 60))}"
    elif cut < 0.4:
        condition += f" AND k IN ({', '.join(str(v) for v in sorted(rng.choice(4, size=2, replace=False)))})"
    if rng.random() < 0.3:
        second = (first + 1 + rng.integers(0, HOT_SPOTS - 1)) % HOT_SPOTS
        condition = f"({condition}) OR ({_box(rng, spots[second])})"
    attributes = [a for a in ("x", "y", "z", "k") if rng.random() < 0.6] or ["x"]
    select = "*" if len(attributes) == 4 else ", ".join(attributes)
    return f"SELECT {select} FROM feed{stream} WHERE {condition}"


def render(seed: int = 11) -> str:
    """The YAML text of the scenario for ``seed``."""
    rng = np.random.default_rng(seed)
    transit = TOPOLOGY["transit"]
    stub_nodes = np.arange(transit, SUPER_PEERS)
    lines = [HEADER.format(seed=seed, transit=transit, rate=RATE, duration=DURATION, tuples=STREAMS * RATE * DURATION)]
    lines += [
        "name: large",
        f"seed: {seed}",
        f"duration: {DURATION}",
        "network:",
        "  defaults: {bandwidth: 100Mbit, latency: 1ms}",
        "  generate: {model: transit-stub, "
        + ", ".join(f"{k}: {v}" for k, v in TOPOLOGY.items())
        + f", seed: {seed}}}",
        "thin_peers:",
    ]
    for s, node in enumerate(rng.choice(stub_nodes, size=STREAMS, replace=False)):
        lines.append(f"  - {{id: source{s}, attach: SP{node}}}")
    for p, node in enumerate(rng.choice(stub_nodes, size=SUBSCRIBER_PEERS)):
        lines.append(f"  - {{id: P{p}, attach: SP{node}}}")
    lines.append("streams:")
    for s in range(STREAMS):
        lines += [
            f"  - id: feed{s}",
            f"    source: source{s}",
            f"    rate: {RATE}",
            "    schema:",
            "      x: {type: float, distribution: {uniform: [0, 1000]}}",
            "      y: {type: float, distribution: {uniform: [0, 1000]}}",
            "      z: {type: float, distribution: {normal: [50, 10]}}",
            "      k: {type: int, distribution: {choice: [0, 1, 2, 3]}}",
        ]
    spots = rng.integers(100, 900, size=(STREAMS, HOT_SPOTS, 2))
    lines.append("subscriptions:")
    for q in range(SUBSCRIPTIONS):
        stream = int(rng.integers(0, STREAMS))
        at = round(float(rng.uniform(0, 80)), 1)
        # an until past the end is cut to the end, where it changes nothing (and warns nobody)
        until = f", until: {min(round(at + float(rng.uniform(10, 50)), 1), DURATION)}" if rng.random() < 0.35 else ""
        peer = int(rng.integers(0, SUBSCRIBER_PEERS))
        query = _query(rng, stream, spots[stream])
        lines.append(f'  - {{id: Q{q}, peer: P{peer}, at: {at}{until}, query: "{query}"}}')
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.make_large", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "large.yaml"))
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(render(args.seed))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
