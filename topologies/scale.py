"""Big seeded scenarios for exactness tests at size and for benchmarks: ``scale_scenario(seed, ...)``.

``python -m topologies.scale [--seed N] [--subscriptions N] ... --out PATH`` writes the YAML instead.

The shape is the one that exposed sharing-hcr's size-only bug (300 super-peers, 500 subscriptions with
churn), with every size a parameter:

- backbone: a generated transit-stub network with ``transit * (1 + stubs_per_transit * nodes_per_stub)``
  super-peers (defaults 6 x 7 x 7 = 300), seeded with ``seed``; thin-peers' access links 100Mbit, 1ms;
- ``streams`` streams ``feed0..`` of ``rate`` tuples/s, each published by a source thin-peer ``src<s>``
  attached to a random super-peer; four attributes: ``x``, ``y`` uniform on [0, 100], ``z`` normal
  (50, 15), ``k`` an int chosen from 1..5;
- ``subscriber_peers`` thin-peers ``U<p>``, each attached to a random super-peer (transit nodes included);
- ``subscriptions`` subscriptions ``Q<i>``: a random stream, a box of random half-width (2-15) around one
  of that stream's ``hot_spots`` (x, y) points, so that many subscriptions contain, overlap or widen one
  another; with probability ``cut`` ``AND z > c``; with probability ``disjunction`` the whole box OR
  ``(x > a AND y < b AND k = n)`` (a, b another hot spot of the stream); a random non-empty SELECT subset of
  the four attributes; arrival uniform in [0, 0.9 * duration); with probability ``churn`` an ``until``
  0.05-0.4 durations after arrival (beyond ``duration`` for a few late arrivals, which then never leave);
  the subscribing peer is random, so peers often hold several subscriptions.

Everything is drawn from ``np.random.default_rng(seed)``: the same arguments give the same YAML text and
the same :class:`Scenario`.  The text goes through :func:`topologies.loader.load_scenario`, so a generated
scenario is validated like any user file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile

import numpy as np

from topologies import generators
from topologies.loader import load_scenario
from topologies.model import Scenario

ATTRIBUTES = ("x", "y", "z", "k")
K_VALUES = (1, 2, 3, 4, 5)


def super_peer_count(transit: int, stubs_per_transit: int, nodes_per_stub: int) -> int:
    """How many super-peers the transit-stub backbone of these sizes has."""
    sizes = {"transit": transit, "stubs_per_transit": stubs_per_transit, "nodes_per_stub": nodes_per_stub}
    return generators.node_count("transit-stub", sizes)


def render(
    seed: int = 0,
    *,
    transit: int = 6,
    stubs_per_transit: int = 7,
    nodes_per_stub: int = 7,
    streams: int = 5,
    rate: float = 200,
    duration: float = 100,
    subscriber_peers: int = 400,
    subscriptions: int = 500,
    churn: float = 0.35,
    cut: float = 0.3,
    disjunction: float = 0.2,
    hot_spots: int = 4,
) -> str:
    """The YAML text of the scenario (see the module docstring).  Raises ValueError for sizes out of range."""
    for name, size in (
        ("transit", transit),
        ("stubs_per_transit", stubs_per_transit),
        ("nodes_per_stub", nodes_per_stub),
    ):
        if size < 1:
            raise ValueError(f"{name} must be >= 1, got {size}")
    if streams < 1 or subscriber_peers < 1 or subscriptions < 0 or hot_spots < 1:
        raise ValueError("need streams >= 1, subscriber_peers >= 1, subscriptions >= 0 and hot_spots >= 1")
    if rate <= 0 or duration <= 0:
        raise ValueError(f"need rate > 0 and duration > 0, got {rate}, {duration}")
    for name, p in (("churn", churn), ("cut", cut), ("disjunction", disjunction)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {p}")
    n = super_peer_count(transit, stubs_per_transit, nodes_per_stub)
    rng = np.random.default_rng(seed)
    lines = [
        f"# scale scenario: seed {seed}, {n} super-peers, {streams} streams x {rate:g} tuples/s x {duration:g} s,",
        f"# {subscriber_peers} subscriber peers, {subscriptions} subscriptions (churn {churn:g}); "
        "written by topologies/scale.py",
        f"name: scale{seed}",
        f"seed: {seed}",
        f"duration: {duration:g}",
        "header_bytes: 16",
        "network:",
        "  defaults: {bandwidth: 100Mbit, latency: 1ms}",
        f"  generate: {{model: transit-stub, transit: {transit}, stubs_per_transit: {stubs_per_transit}, "
        f"nodes_per_stub: {nodes_per_stub}, seed: {seed}}}",
        "thin_peers:",
    ]
    lines += [f"  - {{id: src{s}, attach: SP{int(node)}}}" for s, node in enumerate(rng.integers(0, n, streams))]
    lines += [f"  - {{id: U{p}, attach: SP{int(node)}}}" for p, node in enumerate(rng.integers(0, n, subscriber_peers))]
    lines.append("streams:")
    for s in range(streams):
        lines += [
            f"  - id: feed{s}",
            f"    source: src{s}",
            f"    rate: {rate:g}",
            "    schema:",
            "      x: {type: float, distribution: {uniform: [0, 100]}}",
            "      y: {type: float, distribution: {uniform: [0, 100]}}",
            "      z: {type: float, distribution: {normal: [50, 15]}}",
            f"      k: {{type: int, distribution: {{choice: [{', '.join(map(str, K_VALUES))}]}}}}",
        ]
    spots = rng.uniform(10, 90, size=(streams, hot_spots, 2))
    lines.append("subscriptions:" if subscriptions else "subscriptions: []")
    for i in range(subscriptions):
        s = int(rng.integers(0, streams))
        cx, cy = spots[s, int(rng.integers(0, hot_spots))]
        w = float(rng.uniform(2, 15))
        where = f"x BETWEEN {cx - w:.1f} AND {cx + w:.1f} AND y BETWEEN {cy - w:.1f} AND {cy + w:.1f}"
        if rng.random() < cut:
            where += f" AND z > {rng.uniform(30, 70):.1f}"
        if rng.random() < disjunction:
            a, b = spots[s, int(rng.integers(0, hot_spots))]
            where = f"({where}) OR (x > {a:.1f} AND y < {b:.1f} AND k = {int(rng.choice(K_VALUES))})"
        chosen = rng.choice(len(ATTRIBUTES), size=int(rng.integers(1, len(ATTRIBUTES) + 1)), replace=False)
        select = ", ".join(ATTRIBUTES[j] for j in sorted(chosen))
        at = round(float(rng.uniform(0, 0.9 * duration)), 2)
        leaves = rng.random() < churn
        life = float(rng.uniform(0.05, 0.4)) * duration
        until = f", until: {round(at + life, 2)}" if leaves else ""
        peer = int(rng.integers(0, subscriber_peers))
        lines.append(
            f'  - {{id: Q{i}, peer: U{peer}, at: {at}{until}, query: "SELECT {select} FROM feed{s} WHERE {where}"}}'
        )
    return "\n".join(lines) + "\n"


def scale_scenario(seed: int = 0, **sizes) -> Scenario:
    """The validated :class:`Scenario` of :func:`render` (same keyword arguments); ``path`` is None."""
    text = render(seed, **sizes)
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        path = os.path.join(tmp, f"scale{seed}.yaml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        scenario = load_scenario(path)
    return dataclasses.replace(scenario, path=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    for name, kind, default in (
        ("transit", int, 6),
        ("stubs-per-transit", int, 7),
        ("nodes-per-stub", int, 7),
        ("streams", int, 5),
        ("rate", float, 200),
        ("duration", float, 100),
        ("subscriber-peers", int, 400),
        ("subscriptions", int, 500),
        ("churn", float, 0.35),
    ):
        parser.add_argument(f"--{name}", type=kind, default=default)
    args = vars(parser.parse_args(argv))
    out, seed = args.pop("out"), args.pop("seed")
    try:
        text = render(seed, **args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
