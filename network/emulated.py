"""The emulated network: every link direction a tuple may cross (the backbone's both ways, and every
thin-peer's access link both ways) with what the link rule (network/linkrule.py) needs of it, built once
from a scenario for every engine: the local and Spark engines' queues (network/queues.py) and the live
mode's link queues (peers/live/links.py); the planner's network limits (sharing/limits.py) read the same
bandwidths.  A super-peer's processor is emulated like a link direction too (:func:`processor_specs`)."""

from __future__ import annotations

import numpy as np

from network.routing import Network
from topologies.model import Direction, Scenario
from topologies.outages import down_intervals, super_peer_down_intervals


def link_specs(scenario: Scenario, network: Network | None = None) -> dict[Direction, tuple[float, float, float]]:
    """Every link direction a tuple may cross, the backbone's (sorted) then the access links, as (bandwidth
    bit/s, latency s, buffer bytes: ``inf`` for none)."""
    network = network or Network.of(scenario)
    links = {}
    for d in network.directions:
        link = network.link(*d)
        links[d] = (link.bandwidth, float(link.latency), np.inf if link.buffer is None else float(link.buffer))
    for peer in scenario.thin_peers:
        access = (peer.bandwidth, float(peer.latency), np.inf)
        links[(peer.id, peer.attach)] = links[(peer.attach, peer.id)] = access
    return links


def processor_nodes(scenario: Scenario) -> frozenset[str]:
    """The super-peers whose processor is emulated (docs/ACCOUNTING.md, "Super-peer CPU"): every one once
    any has a ``cpu`` or an ``input_buffer`` (an unlimited one takes no time, but counts its operations),
    none otherwise (a scenario that sets neither runs as it always did, at no cost)."""
    return frozenset(scenario.super_peers) if scenario.cpus or scenario.input_buffers else frozenset()


def limited_processors(scenario: Scenario) -> frozenset[str]:
    """The super-peers whose processor is a queue: those with a ``cpu`` or an ``input_buffer``.  An
    unlimited processor passes every tuple on at once: it only counts operations, and is no queue (it would
    tie the queues of the links around it into cycles for nothing, network/queues.py)."""
    return frozenset(scenario.cpu) | frozenset(scenario.input_buffer)


def processor_specs(scenario: Scenario) -> dict[Direction, tuple[float, float, float]]:
    """The limited processors (:func:`limited_processors`) as the queues take them (network/queues.py,
    "Processors"): the direction ``(n, n)`` mapped to (operations per second, 0, input buffer bytes),
    ``inf`` where unlimited."""
    cpu, buffers = scenario.cpu, scenario.input_buffer
    nodes = sorted(limited_processors(scenario))
    return {(sp, sp): (cpu.get(sp, np.inf), 0.0, buffers.get(sp, np.inf)) for sp in nodes}


def processor_downs(scenario: Scenario) -> dict[Direction, list[tuple[float, float]]]:
    """Per limited processor whose super-peer is ever down, its down intervals (a tuple queued there at a
    failure, or reaching it while its super-peer is down, is lost)."""
    nodes = limited_processors(scenario)
    return {(sp, sp): spans for sp, spans in super_peer_down_intervals(scenario).items() if sp in nodes}


def down_directions(scenario: Scenario) -> dict[Direction, list[tuple[float, float]]]:
    """Per link direction that is ever down, its down intervals ``[fail, recover)`` (``inf``: never
    recovered): the backbone's (:func:`~topologies.outages.down_intervals`), and both directions of a
    thin-peer's access link while its super-peer is down (a tuple uploaded to it, or delivered from it, is
    lost like one on a backbone link; so a source's upload is not counted while its super-peer is down))."""
    down = down_intervals(scenario)
    nodes = super_peer_down_intervals(scenario)
    for peer in scenario.thin_peers:
        spans = nodes.get(peer.attach)
        if spans:
            down[(peer.id, peer.attach)] = down[(peer.attach, peer.id)] = spans
    return down
