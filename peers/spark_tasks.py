"""What runs inside the Spark tasks: tuples generated in place, pushed through a super-peer operator tree.

The driver installs each epoch's operators with :func:`peers.superpeer.install` (the local engine's code)
and broadcasts them in :func:`portable` form: matchers travel as their plain arrays
(``MultiMatcher.to_arrays``) because index structures such as R-trees do not pickle, and every Python
worker rebuilds them once (:func:`rebuild`, cached per broadcast and epoch).  A task then takes work units,
each a range of one stream's tuples inside one epoch, generates the tuples with
``topologies.workload.columns`` (the same values as the local engine, for any range) and walks them through
the same :class:`~peers.superpeer.FlowOperator` objects the simulator calls, recording for every flow and
delivery channel which tuples it carries and their size on the wire.  No clock runs here: which tuples a
channel carries does not depend on time, so the driver replays these records under the simulator.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from peers.superpeer import FlowOperator, delivery_key, flow_key, raw_key
from sharing.plan import Epoch
from topologies import workload
from topologies.model import Scenario

RECORD_SCHEMA = "channel int, tuple long, wire int"
_ARROW_SCHEMA = pa.schema([("channel", pa.int32()), ("tuple", pa.int64()), ("wire", pa.int32())])
_REBUILT_EPOCHS = 64  # epochs of rebuilt operators a Python worker keeps (units arrive sorted by epoch)


@dataclass(frozen=True)
class PortableOperator:
    """A :class:`FlowOperator` with its matcher replaced by the matcher's class and plain arrays."""

    state: dict
    matcher_class: type
    matcher_arrays: dict[str, np.ndarray]


def portable(operator: FlowOperator) -> PortableOperator:
    state = dict(vars(operator))
    matcher = state.pop("matcher")
    return PortableOperator(state, type(matcher), matcher.to_arrays())


def rebuild(shipped: PortableOperator) -> FlowOperator:
    operator = FlowOperator.__new__(FlowOperator)
    vars(operator).update(shipped.state)
    operator.matcher = shipped.matcher_class.from_arrays(shipped.matcher_arrays)
    return operator


@dataclass(frozen=True)
class EpochWork:
    """One epoch as the tasks need it: its operators, where each flow passes, and channel numbers."""

    operators: Mapping[tuple[str, Hashable], PortableOperator]
    paths: Mapping[Hashable, tuple[str, ...]]  # flow channel key -> the super-peers it visits, in order
    channel_ids: Mapping[Hashable, int]  # flow/delivery channel key -> globally unique channel number
    deliveries: Mapping[Hashable, tuple[str, str, str]]  # delivery channel key -> (subscription, home, peer)


@dataclass(frozen=True)
class Unit:
    """Tuples ``start..stop-1`` of ``stream``, all emitted inside epoch number ``epoch``."""

    epoch: int
    stream: str
    start: int
    stop: int


@dataclass(frozen=True)
class Job:
    """Everything the tasks of one strategy run read (broadcast once)."""

    scenario: Scenario
    epochs: Mapping[int, EpochWork]
    units: tuple[Unit, ...]


def epoch_work(scenario: Scenario, epoch: Epoch, operators: Mapping, first_channel: int) -> EpochWork:
    """Ship ``operators`` (from ``install(scenario, epoch)``), numbering channels from ``first_channel``."""
    paths = {flow_key(f.id): f.path for f in epoch.flows}
    targets = [t for op in operators.values() for t in op.targets]
    channel_ids = {t: first_channel + i for i, t in enumerate(targets)}
    deliveries = {delivery_key(k): (d.subscription, d.home, d.peer) for k, d in enumerate(epoch.deliveries)}
    return EpochWork({k: portable(op) for k, op in operators.items()}, paths, channel_ids, deliveries)


def carry(
    scenario: Scenario, work: Mapping[tuple[str, Hashable], FlowOperator], paths: Mapping, unit: Unit
) -> Iterator[tuple[Hashable, np.ndarray, np.ndarray]]:
    """Every channel the unit's tuples reach: ``(channel key, tuple indices, wire bytes per tuple)``.

    The walk visits operators exactly where the simulator taps them: the raw stream at its source's
    super-peer, each flow at every super-peer of its path that runs an operator on it.
    """
    home = scenario.home(scenario.stream(unit.stream).source)
    columns = workload.columns(scenario, unit.stream, unit.start, unit.stop)
    pending = [(raw_key(unit.stream), (home,), np.arange(unit.start, unit.stop, dtype=np.int64), columns)]
    while pending:
        key, nodes, indices, values = pending.pop()
        for node in nodes:
            operator = work.get((node, key))
            if operator is None:
                continue
            for out in operator.process(len(indices), values):
                carried = indices[out.positions]
                yield out.target, carried, out.wire_bytes
                pending.append((out.target, paths.get(out.target, ()), carried, out.columns))


class _Rebuilt:
    """Per Python worker: the rebuilt operators of recently used epochs of one broadcast job."""

    def __init__(self) -> None:
        self.job_id: str | None = None
        self.epochs: OrderedDict[int, dict] = OrderedDict()

    def operators(self, job_id: str, job: Job, epoch: int) -> dict:
        if job_id != self.job_id:
            self.job_id, self.epochs = job_id, OrderedDict()
        if epoch not in self.epochs:
            self.epochs[epoch] = {k: rebuild(p) for k, p in job.epochs[epoch].operators.items()}
            if len(self.epochs) > _REBUILT_EPOCHS:
                self.epochs.popitem(last=False)
        self.epochs.move_to_end(epoch)
        return self.epochs[epoch]


_rebuilt = _Rebuilt()


def run_units(broadcast, job_id: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over batches of unit numbers (column ``id``) of the job ``broadcast``
    (``job_id`` names it uniquely, for the workers' cache): records of :data:`RECORD_SCHEMA`, one row per
    tuple per channel it reaches."""
    # a partial of a module-level function pickles by reference, so the worker's module globals (the
    # cache of rebuilt operators) outlive a task; a closure would carry its own copy of them
    return partial(_process_units, broadcast, job_id)


def _process_units(broadcast, job_id: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    job: Job = broadcast.value
    for batch in batches:
        for unit_number in batch.column("id").to_numpy():
            unit = job.units[int(unit_number)]
            work = job.epochs[unit.epoch]
            operators = _rebuilt.operators(job_id, job, unit.epoch)
            parts = [
                (work.channel_ids[target], indices, wire)
                for target, indices, wire in carry(job.scenario, operators, work.paths, unit)
                if len(indices)
            ]
            if parts:
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.concatenate([np.full(len(i), c, np.int32) for c, i, _ in parts])),
                        pa.array(np.concatenate([i for _, i, _ in parts])),
                        pa.array(np.concatenate([w for _, _, w in parts]).astype(np.int32)),
                    ],
                    schema=_ARROW_SCHEMA,
                )
