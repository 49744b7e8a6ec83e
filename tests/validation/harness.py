"""A scenario's plan as packets: the channels and copies the emulator moves, handed to a packet engine (the
plain reference, tests/packet_reference.py, or ns-3, tests/validation/packets.py), and both engines'
fates per tuple copy side by side.

A copy is one tuple on its way to one subscription; its fate is ``("delivered", latency ticks)``,
``("dropped",)`` or ``("lost",)``.  The emulator's come from its report of the run (every delivered copy
with its latency, every copy dropped or lost on the way); the packet engine's from the very channels and
copies the emulator's timetable lays out for the run (one window over the whole run: which tuples each
channel carries and their bytes do not depend on windows), so both move the same packets over the same
routes and only the link model is compared.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from network.emulated import down_directions, link_specs
from network.linkrule import TICKS, to_ticks
from network.routing import Network
from peers.local import Simulation, run_local
from sharing.plan import Plan
from topologies import workload
from topologies.model import Scenario

Fate = tuple


@dataclass(frozen=True)
class Packets:
    """What a packet engine plays (tests/packet_reference.py's input) and which channel feeds whom."""

    network: dict
    channels: list[dict]
    emitted: dict
    sinks: dict[int, str]  # channel -> subscription


def packets(scenario: Scenario, plan: Plan) -> Packets:
    """The plan's channels and copies over the whole run, in the packet engines' terms (ticks, bytes)."""
    simulation = Simulation(scenario, plan, window=float(scenario.duration))
    timetable = simulation.timetable
    routes = timetable.routes()
    times = workload.run_emission_times(scenario)

    def values(stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
        return workload.columns(scenario, stream_id, start, stop)

    blocks = timetable.window(0.0, float(scenario.duration), values, times)
    network = {}
    downs = down_directions(scenario)
    for d, (bandwidth, latency, buffer) in link_specs(scenario, Network.of(scenario)).items():
        network[d] = {
            "bandwidth": int(bandwidth),  # the designed scenarios' are whole bits per second
            "latency": int(to_ticks(latency)),
            "buffer": None if not np.isfinite(buffer) else int(buffer),
            "down": [(int(to_ticks(f)), None if not np.isfinite(r) else int(to_ticks(r))) for f, r in downs.get(d, [])],
        }
    channels, emitted, keys, sinks = [], {}, [], {}
    for c, route in enumerate(routes):
        n, first = int(blocks.count[c]), int(blocks.first[c])
        if route.parent < 0:
            mine = [(route.stream, int(blocks.indices[first + j])) for j in range(n)]
            for j, key in enumerate(mine):
                emitted[key] = int(to_ticks(blocks.emitted[first + j]))
        else:
            mine = [keys[route.parent][int(blocks.parents[first + j])] for j in range(n)]
        keys.append(mine)
        wire = {key: int(blocks.wire[first + j]) for j, key in enumerate(mine)}
        channels.append({"hops": list(route.hops), "parent": route.parent, "tap": route.tap, "sink": route.sink,
                         "wire": wire})  # fmt: skip
        if route.sink is not None:
            sinks[c] = route.sink
    return Packets(network, channels, emitted, sinks)


def packet_fates(played, setup: Packets) -> dict[tuple[str, int], list[Fate]]:
    """A packet engine's :class:`~tests.packet_reference.Fates` per (subscription, tuple index): the fate of
    each copy it got (sorted)."""
    fates: dict[tuple[str, int], list[Fate]] = {}
    for c, per_key in played.deliveries.items():
        sub = setup.sinks[c]
        for key, fate in per_key.items():
            fate = ("delivered", fate[1] - setup.emitted[key]) if fate[0] == "delivered" else (fate[0],)
            fates.setdefault((sub, key[1]), []).append(fate)
    return {k: sorted(v) for k, v in fates.items()}


def emulator_fates(scenario: Scenario, plan: Plan, window: float | None) -> tuple[dict, dict, dict]:
    """The local engine's run of ``plan`` with batch windows of ``window`` seconds: the fate of each copy
    per (subscription, tuple index) as :func:`packet_fates` gives them, and per backbone direction the
    copies dropped and lost there."""
    run = run_local(scenario, plan, window=window)
    fates: dict[tuple[str, int], list[Fate]] = {}
    for sub, indices in run.delivered.items():
        ticks = np.rint(np.asarray(run.latencies[sub]) * TICKS).astype(np.int64)
        for index, latency in zip(indices.tolist(), ticks.tolist(), strict=True):
            fates.setdefault((sub, index), []).append(("delivered", latency))
    for kind, per_sub in (("dropped", run.dropped), ("lost", run.lost)):
        for sub, indices in per_sub.items():
            for index in np.asarray(indices).tolist():
                fates.setdefault((sub, index), []).append((kind,))
    dropped = {d: n for d, n in run.link_dropped.items() if n}
    lost = {d: n for d, n in run.link_lost.items() if n}
    return {k: sorted(v) for k, v in fates.items()}, dropped, lost


def differences(ours: dict, theirs: dict) -> list[tuple]:
    """The copies whose fates differ: (subscription, tuple index, ours, theirs), by subscription and index."""
    return [
        (k[0], k[1], ours.get(k), theirs.get(k))
        for k in sorted(set(ours) | set(theirs))
        if ours.get(k) != theirs.get(k)
    ]


def backbone(counts: dict, scenario: Scenario) -> dict:
    """``counts`` (per direction) on the backbone's directions only."""
    directions = set(Network.of(scenario).directions)
    return {d: n for d, n in counts.items() if d in directions and n}


def fate_counts(fates: dict) -> Counter:
    """How many copies had each kind of fate."""
    return Counter(f[0] for copies in fates.values() for f in copies)


def assert_fares_alike(scenario: Scenario, plan: Plan, setup: Packets, played, windows) -> None:
    """The local engine, at each batch window of ``windows``, gives every copy the fate a packet engine's
    run ``played`` of ``setup`` gave it, and each backbone direction the same drops and losses."""
    theirs = packet_fates(played, setup)
    for window in windows:
        ours, dropped, lost = emulator_fates(scenario, plan, window)
        assert differences(ours, theirs) == [], f"window {window}"
        assert dropped == backbone(played.dropped, scenario)
        assert lost == backbone(played.lost, scenario)
