"""What runs inside the Spark tasks: tuples generated in place, pushed through a super-peer operator tree.

The driver installs each epoch's operators with :func:`peers.superpeer.install` (the local engine's code,
with its cache, so an operator unchanged over many epochs is one object) and broadcasts every distinct
operator once, in :func:`portable` form: matchers travel as their plain arrays (``MultiMatcher.to_arrays``)
because index structures such as R-trees do not pickle, and every Python worker rebuilds an operator the
first time a unit needs it (:func:`rebuild`, cached per broadcast job).  A task then takes work units, each a
range of one stream's tuples inside one epoch, generates the tuples with ``topologies.workload.columns``
(the same values as the local engine, for any range) and walks them through the same
:class:`~peers.superpeer.FlowOperator` objects the simulator calls.  For every channel (an operator's output
to one reader along one route) a unit reaches, it writes ONE record: the positions of the carried tuples
in the unit as packed ``uint16`` (a unit never exceeds 65,536 tuples), their size on the wire (one number
when all tuples weigh the same, else packed ``int32`` per tuple), and their count and total bytes for
Spark's aggregation.  No clock runs here: which tuples a channel carries does not depend on time, so the
driver replays these records under the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from peers.superpeer import FlowOperator, raw_key
from topologies import workload
from topologies.model import Scenario

RECORD_SCHEMA = "channel int, start long, tuples int, bytes long, wire int, positions binary, wires binary"
_ARROW_SCHEMA = pa.schema(
    [
        ("channel", pa.int32()),
        ("start", pa.int64()),
        ("tuples", pa.int32()),
        ("bytes", pa.int64()),
        ("wire", pa.int32()),
        ("positions", pa.binary()),
        ("wires", pa.binary()),
    ]
)
POSITION_DTYPE = np.dtype("<u2")  # positions relative to the unit's first tuple
WIRES_DTYPE = np.dtype("<i4")
VARYING_WIRE = -1  # ``wire`` when the per-tuple sizes are in ``wires``
MAX_UNIT_TUPLES = 1 << 16


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
    """One epoch as the tasks need it: which distinct operator runs where, the channel each of its
    outputs feeds, and where each flow passes."""

    places: Mapping[tuple[str, Hashable], tuple[int, tuple[int, ...]]]  # place -> (operator, channel per target)
    paths: Mapping[Hashable, tuple[str, ...]]  # flow channel key -> the super-peers it visits, in order


@dataclass(frozen=True)
class Unit:
    """Tuples ``start..stop-1`` of ``stream``, all emitted inside epoch number ``epoch``."""

    epoch: int
    stream: str
    start: int
    stop: int


@dataclass(frozen=True)
class Job:
    """Everything the tasks of one strategy run read (broadcast once; an operator shared by many epochs
    is pickled once)."""

    scenario: Scenario
    operators: tuple[PortableOperator, ...]
    epochs: Mapping[int, EpochWork]
    units: tuple[Unit, ...]


def carry(
    scenario: Scenario, work: Mapping[tuple[str, Hashable], FlowOperator], paths: Mapping, unit: Unit
) -> Iterator[tuple[tuple[str, Hashable], int, np.ndarray, np.ndarray]]:
    """Every output the unit's tuples reach: ``(place, reader number, tuple indices, wire bytes per tuple)``.

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
            for j, out in enumerate(operator.process(len(indices), values)):
                carried = indices[out.positions]
                yield (node, key), j, carried, out.wire_bytes
                pending.append((out.target, paths.get(out.target, ()), carried, out.columns))


class _Rebuilt:
    """Per Python worker: the rebuilt operators of one broadcast job, by operator number."""

    def __init__(self) -> None:
        self.job_id: str | None = None
        self.operators: dict[int, FlowOperator] = {}

    def of(self, job_id: str, job: Job, work: EpochWork) -> dict[tuple[str, Hashable], FlowOperator]:
        if job_id != self.job_id:
            self.job_id, self.operators = job_id, {}
        placed = {}
        for place, (number, _) in work.places.items():
            if number not in self.operators:
                self.operators[number] = rebuild(job.operators[number])
            placed[place] = self.operators[number]
        return placed


_rebuilt = _Rebuilt()


def run_units(broadcast, job_id: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over batches of unit numbers (column ``id``) of the job ``broadcast``
    (``job_id`` names it uniquely, for the workers' cache): records of :data:`RECORD_SCHEMA`, one row per
    unit per channel it reaches."""
    # a partial of a module-level function pickles by reference, so the worker's module globals (the
    # cache of rebuilt operators) outlive a task; a closure would carry its own copy of them
    return partial(_process_units, broadcast, job_id)


def unit_records(job: Job, operators: Mapping[tuple[str, Hashable], FlowOperator], unit: Unit) -> pa.RecordBatch:
    """The records of one unit (``operators``: the unit's epoch's operators, rebuilt)."""
    work = job.epochs[unit.epoch]
    rows = []
    for place, j, indices, wire in carry(job.scenario, operators, work.paths, unit):
        if not len(indices):
            continue
        constant = len(wire) and wire[0] == wire[-1] and bool(np.all(wire == wire[0]))
        rows.append(
            (
                work.places[place][1][j],
                len(indices),
                int(wire.sum()),
                int(wire[0]) if constant else VARYING_WIRE,
                (indices - unit.start).astype(POSITION_DTYPE).tobytes(),
                b"" if constant else wire.astype(WIRES_DTYPE).tobytes(),
            )
        )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 6
    return pa.RecordBatch.from_arrays(
        [
            pa.array(columns[0], pa.int32()),
            pa.array(np.full(len(rows), unit.start, np.int64)),
            pa.array(columns[1], pa.int32()),
            pa.array(columns[2], pa.int64()),
            pa.array(columns[3], pa.int32()),
            pa.array(columns[4], pa.binary()),
            pa.array(columns[5], pa.binary()),
        ],
        schema=_ARROW_SCHEMA,
    )


def _process_units(broadcast, job_id: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    job: Job = broadcast.value
    for batch in batches:
        for unit_number in batch.column("id").to_numpy():
            unit = job.units[int(unit_number)]
            records = unit_records(job, _rebuilt.of(job_id, job, job.epochs[unit.epoch]), unit)
            if records.num_rows:
                yield records
