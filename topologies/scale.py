"""Big seeded scenarios for exactness tests at size and for benchmarks: ``scale_scenario(seed, ...)``.

``python -m topologies.scale [--name NAME] [--seed N] [--subscriptions N] ... --out PATH`` writes the YAML
instead.  The text opens with a comment saying what the scenario is, in words and numbers, and the command
that writes it again byte for byte: every flag spelled out (so a changed default cannot silently change
the file) and ``--out topologies/<name>.yaml``, where a shipped scenario lives (the text does not depend
on ``--out``).  ``topologies/metro.yaml``, the scale scenario, is such a file.

The shape is the one that exposed sharing-hcr's size-only bug (300 super-peers, 500 subscriptions with
churn), with every size a parameter:

- name ``name``, by default ``scale<seed>``;
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
  0.05-0.4 durations after arrival (cut to ``duration`` for a few late arrivals, which then stay to the end);
  the subscribing peer is random, so peers often hold several subscriptions.

Everything is drawn from ``np.random.default_rng(seed)``: the same arguments give the same YAML text and
the same :class:`Scenario`.  The text goes through :func:`topologies.loader.load_scenario`, so a generated
scenario is validated like any user file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
import textwrap

import numpy as np
import yaml

from topologies import generators
from topologies.loader import MAX_ID_LENGTH, PEER_ID, load_scenario
from topologies.model import Scenario, StreamSpec
from topologies.workload import tuple_count

ATTRIBUTES = ("x", "y", "z", "k")
K_VALUES = (1, 2, 3, 4, 5)
# the command-line flags after --name and --seed, with render()'s defaults, in the order the header's
# command lists them
FLAGS = (
    ("transit", int, 6),
    ("stubs-per-transit", int, 7),
    ("nodes-per-stub", int, 7),
    ("streams", int, 5),
    ("rate", float, 200),
    ("duration", float, 100),
    ("subscriber-peers", int, 400),
    ("subscriptions", int, 500),
    ("churn", float, 0.35),
    ("cut", float, 0.3),
    ("disjunction", float, 0.2),
    ("hot-spots", int, 4),
)


def super_peer_count(transit: int, stubs_per_transit: int, nodes_per_stub: int) -> int:
    """How many super-peers the transit-stub backbone of these sizes has."""
    sizes = {"transit": transit, "stubs_per_transit": stubs_per_transit, "nodes_per_stub": nodes_per_stub}
    return generators.node_count("transit-stub", sizes)


def _number(value: float) -> str:
    """The shortest text that parses back to exactly ``value``: ``1000`` rather than ``1000.0``."""
    text = f"{value:g}"
    return text if float(text) == value else repr(float(value))


def _span(prefix: str, count: int) -> str:
    return "none" if count == 0 else f"{prefix}0" if count == 1 else f"{prefix}0..{prefix}{count - 1}"


def _header(
    name: str, seed: int, sizes: dict[str, float], *, super_peers: int, per_stream: int, untils: list[float]
) -> str:
    """The comment block that opens the file: what it is, the command that writes it, the shape in words."""
    command = ["python", "-m", "topologies.scale", "--name", name, "--seed", str(seed)]
    for flag, kind, _ in FLAGS:
        value = sizes[flag.replace("-", "_")]
        command += [f"--{flag}", str(value) if kind is int else _number(value)]
    command += ["--out", f"topologies/{name}.yaml"]
    streams, subscriptions, peers = sizes["streams"], sizes["subscriptions"], sizes["subscriber_peers"]
    # rate and duration as the file writes them; the command spells every value out exactly
    rate, duration, transit = f"{sizes['rate']:g}", sizes["duration"], sizes["transit"]
    paragraphs = [
        f"{name}: {super_peers} super-peers (generated transit-stub), {streams} streams, {subscriptions} "
        "subscriptions on overlapping hot spots, arriving and leaving over the run.",
        "Written by topologies/scale.py; do not edit by hand: change the arguments or the script and run it "
        "again.  From the repository root, this command writes the file byte for byte:",
        f"Backbone: the transit-stub generator (seed {seed}), {transit} transit nodes {_span('SP', transit)}, "
        f"each serving {sizes['stubs_per_transit']} stub domains of {sizes['nodes_per_stub']} nodes; it sets "
        "the backbone's bandwidths and latencies, network.defaults (100Mbit, 1ms) the thin-peers' access links.",
        f"Streams {_span('feed', streams)}, {rate} tuples/s each for {duration:g} s, published by thin-peers "
        f"{_span('src', streams)} on random super-peers; attributes x and y uniform on [0, 100], z normal "
        "(50, 15), k an int chosen from 1..5.",
        f"Each stream has {sizes['hot_spots']} hot spots in its (x, y) plane.  Each subscription "
        f"({_span('Q', subscriptions)}) asks one random stream for a box of half-width 2-15 around one of its "
        f"hot spots, so that many contain, overlap or widen one another; with probability {_number(sizes['cut'])}"
        f" AND z > c, with probability {_number(sizes['disjunction'])} the box OR (x > a AND y < b AND k = n) "
        "for a hot spot (a,\N{NO-BREAK SPACE}b); SELECT a random non-empty subset of x, y, z, k.  The subscribers are "
        f"{peers} thin-peers {_span('U', peers)} on random super-peers (transit nodes included), so a peer "
        "often holds several subscriptions.",
        f"Arrivals are uniform over [0, {0.9 * duration:g}) s; with probability {_number(sizes['churn'])} a "
        f"subscription leaves again 0.05-0.4 durations ({0.05 * duration:g}-{0.4 * duration:g} s) after it "
        f"arrives: {len(untils)} carry an until ({sum(until < duration for until in untils)} of them before "
        "the run ends).",
        f"{streams} streams x {per_stream} tuples ({rate} tuples/s for {duration:g} s) = "
        f"{streams * per_stream} tuples.",
    ]
    wrap = textwrap.TextWrapper(width=110, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
    # a no-break space keeps a pair such as (a, b) on one line
    blocks = [wrap.fill(paragraph).replace("\N{NO-BREAK SPACE}", " ") for paragraph in paragraphs]
    blocks[1] += "\n#   " + shlex.join(command)
    return "\n#\n".join(blocks[:2]) + "\n#\n" + "\n".join(blocks[2:]) + "\n"


def render(
    seed: int = 0,
    *,
    name: str | None = None,
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
    """The YAML text of the scenario (see the module docstring).  Raises ValueError for sizes out of range
    and for a name the loader would refuse or the header's command could not pass."""
    name = f"scale{seed}" if name is None else name
    # the loader's rule for names, plus what the name: line and the header's command need: YAML must read
    # it as text (not 7, true or null) and argparse as a value (not -x)
    if not (PEER_ID.fullmatch(name) and len(name) <= MAX_ID_LENGTH and name[0] != "-" and yaml.safe_load(name) == name):
        raise ValueError(
            f"name must be 1-{MAX_ID_LENGTH} characters of A-Za-z0-9_-, not '-' first, that YAML reads as text, "
            f"got {name!r}"
        )
    for what, size in (
        ("transit", transit),
        ("stubs_per_transit", stubs_per_transit),
        ("nodes_per_stub", nodes_per_stub),
    ):
        if size < 1:
            raise ValueError(f"{what} must be >= 1, got {size}")
    if streams < 1 or subscriber_peers < 1 or subscriptions < 0 or hot_spots < 1:
        raise ValueError("need streams >= 1, subscriber_peers >= 1, subscriptions >= 0 and hot_spots >= 1")
    if rate <= 0 or duration <= 0:
        raise ValueError(f"need rate > 0 and duration > 0, got {rate}, {duration}")
    for what, p in (("churn", churn), ("cut", cut), ("disjunction", disjunction)):
        if not 0 <= p <= 1:
            raise ValueError(f"{what} must lie in [0, 1], got {p}")
    n = super_peer_count(transit, stubs_per_transit, nodes_per_stub)
    rng = np.random.default_rng(seed)
    lines = [
        f"name: {name}",
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
    untils: list[float] = []
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
        if leaves:
            untils.append(min(round(at + life, 2), duration))  # past the end it would stay anyway
        until = f", until: {untils[-1]}" if leaves else ""
        peer = int(rng.integers(0, subscriber_peers))
        lines.append(
            f'  - {{id: Q{i}, peer: U{peer}, at: {at}{until}, query: "SELECT {select} FROM feed{s} WHERE {where}"}}'
        )
    sizes = {
        "transit": transit,
        "stubs_per_transit": stubs_per_transit,
        "nodes_per_stub": nodes_per_stub,
        "streams": streams,
        "rate": rate,
        "duration": duration,
        "subscriber_peers": subscriber_peers,
        "subscriptions": subscriptions,
        "churn": churn,
        "cut": cut,
        "disjunction": disjunction,
        "hot_spots": hot_spots,
    }
    # the file's own rate and duration, as written above, decide how many tuples it has
    per_stream = tuple_count(StreamSpec("feed0", "src0", float(f"{rate:g}"), ()), float(f"{duration:g}"))
    header = _header(name, seed, sizes, super_peers=n, per_stream=per_stream, untils=untils)
    return header + "\n" + "\n".join(lines) + "\n"


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
    parser.add_argument("--name", help="the scenario's name (default scale<seed>)")
    parser.add_argument("--seed", type=int, default=0)
    for flag, kind, default in FLAGS:
        parser.add_argument(f"--{flag}", type=kind, default=default)
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
