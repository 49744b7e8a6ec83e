"""Super-peer processors in the live mode (docs/LIVE.md, "Emulated processors"; docs/ACCOUNTING.md,
"Super-peer CPU").

When a scenario gives any super-peer a ``cpu`` or an ``input_buffer``, every super-peer has a processor
(:func:`network.emulated.processor_nodes`): the tuples reaching the operators a super-peer runs on a channel
wait there first in, first out, each served for the operations the operators spend on it, and a full input
buffer drops at the tail.  The live super-peer runs it as it runs a link direction's queue
(peers/live/links.py): :class:`Processor` is a :class:`~peers.live.links.LinkQueue` whose service time is
:func:`~network.linkrule.processing` of a tuple's operations, with the tally the simulator's meter keeps
(:class:`~network.meter.ProcessorTally`).  A tuple's operations are :func:`operator_work`'s, the
simulator's (:func:`peers.selection.processor_work`), and tuples reaching the processor at one instant are
served in the simulator's order: by the number of the processor's channel in the plan's layout
(:class:`ProcessorNumbers`), then by tuple index.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from network.linkrule import CARRIED, DROPPED
from network.meter import ProcessorTally
from network.routing import Network
from peers.live.links import LinkQueue
from peers.superpeer import ChannelKey, Operator, Output
from peers.timetable import channel_numbers
from sharing.plan import Plan
from topologies.model import CpuCosts, Scenario

LAST = 2**62  # the tie rank of an input the layout does not know (never met: every input read is laid out)
_EPOCHS_KEPT = 256  # epochs whose flow channels stay looked up (LRU), as the installed epochs (peers/live/plans.py)


def operator_work(operator: Operator, outputs: list[Output], costs: CpuCosts, count: int) -> np.ndarray:
    """Per tuple of a batch of ``count`` tuples that ``operator`` read (``outputs``: what it kept for each of
    its readers), the operations it costs the super-peer's processor: ``costs.box`` per box of each reader's
    predicate, and ``costs.projection`` for each reader keeping it with fewer attributes than the input
    carries (a ``trim`` flow keeps them all)."""
    tests = costs.box * sum(len(reader.predicate.boxes) for reader in operator.readers)
    work = np.full(count, tests, np.int64)
    if costs.projection:
        width = len(operator.available)
        for reader, out in zip(operator.readers, outputs, strict=True):
            if not reader.trim and len(reader.attrs) < width:
                work[out.positions] += costs.projection
    return work


class ProcessorNumbers:
    """The number of each processor channel in the simulator's layout of ``plan`` (peers/timetable.py),
    which orders the tuples reaching a processor at one instant: :meth:`number` of an input (``key``, in
    epoch ``epoch``) read at super-peer ``node``.  Channels are numbered by their definitions in order of
    first use, so a plan laid out alike numbers alike, whichever version of the live run carried it."""

    def __init__(self, scenario: Scenario, plan: Plan):
        numbers = channel_numbers(scenario, Network.of(scenario), plan)
        self._plan = plan
        self._routes = numbers.routes
        self._uploads = numbers.uploads
        self._processors = numbers.processors
        # (id(flow), the channel it reads) -> its channel; the plan's flow objects are kept by ``plan``
        self._flow_channels = numbers.flows
        self._delivery_channels = numbers.deliveries
        self._epochs: OrderedDict[int, dict[str, int]] = OrderedDict()

    def number(self, epoch: int, node: str, key: ChannelKey) -> int:
        """The number of the processor at ``node`` fed by input ``key`` of epoch ``epoch`` (:data:`LAST`: not
        laid out)."""
        above = self._uploads.get(key.name, -1) if key.kind == "raw" else self._channels(epoch).get(key.name, -1)
        if above < 0 or node not in self._routes[above]:
            return LAST
        return self._processors.get((above, self._routes[above].index(node)), LAST)

    def flow(self, epoch: int, flow_id: str) -> int:
        """The number of the channel of flow ``flow_id`` of epoch ``epoch`` (:data:`LAST`: not laid out), which
        orders the tuples reaching one link direction at one instant."""
        found = self._channels(epoch).get(flow_id, -1)
        return LAST if found < 0 else found

    def delivery(self, epoch: int, sub: str) -> int:
        """The number of the channel of subscription ``sub``'s delivery in epoch ``epoch`` (:data:`LAST`: not
        laid out), which orders the records reaching its access link at one instant."""
        for delivery in self._plan.epochs[epoch].deliveries:
            if delivery.subscription == sub:
                parent = None if delivery.flow is None else self._channels(epoch).get(delivery.flow, -1)
                return self._delivery_channels.get((id(delivery), parent), LAST)
        return LAST

    def _channels(self, epoch: int) -> dict[str, int]:
        """Per flow of epoch ``epoch``, its channel (-1: not laid out, an epoch past the run)."""
        found = self._epochs.get(epoch)
        if found is not None:
            self._epochs.move_to_end(epoch)
            return found
        flows = {f.id: f for f in self._plan.epochs[epoch].flows}
        found = {}
        for flow_id in flows:
            chain = []  # the flow and its ancestors not looked up yet, the nearest first
            while flow_id is not None and flow_id not in found:
                chain.append(flows[flow_id])
                flow_id = flows[flow_id].parent
            for flow in reversed(chain):
                parent = self._uploads[flow.stream] if flow.parent is None else found[flow.parent]
                found[flow.id] = self._flow_channels.get((id(flow), parent), -1) if parent >= 0 else -1
        self._epochs[epoch] = found
        if len(self._epochs) > _EPOCHS_KEPT:
            self._epochs.popitem(last=False)
        return found


class Processor:
    """One super-peer's processor as its live service runs it: the queue (``cpu`` operations per second,
    ``inf``: unlimited; an input buffer of ``buffer`` bytes, ``inf``: none; down over ``downs``) and what it
    did, by load bins of ``load_bin_s`` seconds as the simulator's meter counts it."""

    def __init__(self, cpu: float, buffer: float, downs: np.ndarray, load_bin_s: float):
        self.queue = LinkQueue(0.0, 0.0, buffer, downs, cpu=cpu)
        self.load_bin_s = load_bin_s
        self.tally = ProcessorTally()

    def serve(self, arrivals: np.ndarray, wire: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per tuple (``arrivals``: ticks it reaches the queue, ascending, ties in the simulator's order;
        ``wire``: its bytes, which the input buffer holds; ``work``: its operations), when it leaves the
        processor (ticks) and its fate; counted in the tally (as the simulator's meter counts)."""
        due, fate = self.queue.send_ticks(arrivals, wire, work)
        departures = np.where(fate == CARRIED, due, -1)
        dropped = int(np.count_nonzero(fate == DROPPED))
        self.tally = self.tally.plus(ProcessorTally.of_jobs(arrivals, departures, work, dropped, self.load_bin_s))
        return due, fate

    def to_json(self) -> dict:
        t = self.tally
        return {"ops": t.ops, "offered": t.offered.tolist(), "delay_ticks": t.delay_ticks, "jobs": t.jobs,
                "dropped": t.dropped}  # fmt: skip


def tally_of(doc: dict, length: int) -> ProcessorTally:
    """A processor's tally from a node's counters (:meth:`Processor.to_json`), its offered load padded to
    ``length`` bins (the simulator's meter keeps every processor's over the same bins)."""
    offered = np.zeros(max(length, len(doc["offered"])), np.int64)
    offered[: len(doc["offered"])] = doc["offered"]
    return ProcessorTally(doc["ops"], offered, doc["delay_ticks"], doc["jobs"], doc["dropped"])
