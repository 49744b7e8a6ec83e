"""What a live super-peer does for record flows and pane trees (docs/LIVE.md, "Records"), mixed into
:class:`~peers.live.superpeer_service.SuperPeerService`, whose node, plan book, clock, operator inputs, costs
and link queues it uses.

**Record flows** (peers/live/records.py).  At a record flow's origin the copies its reader keeps are the
aggregate subscription's input at the operator: counted for the coordinator, never forwarded; each one that
completes records (its window's last input of its group) makes them, due to leave at the later of the
window's closing and the input's arrival, held like received tuples until then, and served in the pass that
reaches that time.  A record of a window closing past the horizon of the clock waits for it: a stop, or the
end of its subscription, may still cut that window off.  Records pass every node of the path without an
operator or the processor, and go down to the subscriber whole, on the channel ``("records", sub)``.

**Pane trees** (peers/live/panes.py).  At a tree's root the copies its reader keeps are folded into panes
(counted as the input of every subscription reading the tree), and each one completing a pane row makes
it, due at the later of its pane's closing and the input's arrival; the rows pass the tree's flows as
records do (a child flow passes its parent's on unchanged).  Where a reader's delivery reads them, each
row completing records of the reader (the windows whose last input tuple of their group is the row's)
makes them, due at the later of their window's closing and the row's arrival, and they go down as a
record flow's do; a row dropped or lost on the way is told to the subscriber on the channel ``("panes",
sub)``, with its fate, and makes its records with that fate.  A row waits for no horizon; a stop cuts the
pane holding the end short, whose rows the root's super-peer then completes with the tuples before it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from peers.live.panes import pane_class
from peers.live.plans import PlanVersion
from peers.live.records import Schedule, pane_schedule_of, record_flows, schedule_of
from peers.live.wire import Batch
from peers.superpeer import Operator, Output, flow_key
from peers.timetable import cells_of
from sharing.plan import Flow


class RecordOperators:
    """The records and pane rows of a live super-peer (module docstring).  The service it is mixed into
    holds what they read and keep: its ``node``, plan ``book``, ``topics``, ``costs``, the clock's
    ``horizon``, ``limit`` and ``end``; the ``schedules`` of records and the ``panes`` (rows) computed here,
    the pane inputs ``recent``, the records held (``unripe``) and the rows waiting (``pending``), the operator
    ``inputs`` counted, and ``wake``; and it sends with ``_send``, ``_route`` and ``_at_node``."""

    def _schedule_records(self, version: PlanVersion) -> None:
        """The records of every record flow of ``version`` that starts here, the rows of every pane tree whose
        root is here, and the records of every subscription whose delivery here reads a pane tree (those not
        computed yet)."""
        for sub, origin in record_flows(version.plan).items():
            if origin == self.node and sub not in self.schedules:
                self.schedules[sub] = schedule_of(version.scenario, sub)
        sites = self.book.pane_sites(version.version)
        for root in sites.roots.get(self.node, ()):
            self._pane_rows(version, root)
        for sub in sites.readers.get(self.node, ()):
            self._schedule(version, sub)

    def _pane_rows(self, pv: PlanVersion, root: Flow) -> Schedule:
        """The rows of the pane tree whose root is ``root`` (of its pane class, computed once)."""
        key = pane_class(root, pv.plan.pane_chains)
        found = self.panes.get(key)
        if found is None:
            whole = replace(root, panes=key[-1])  # with every era the plan gives its panes
            found = self.panes[key] = (whole, pane_schedule_of(pv.scenario, whole))
        return found[1]

    def _schedule(self, pv: PlanVersion, sub: str) -> Schedule:
        found = self.schedules.get(sub)
        if found is None:  # (every record flow of the plan is scheduled when its version comes)
            found = self.schedules[sub] = schedule_of(pv.scenario, sub)
        return found

    def _aggregation_work(
        self, pv: PlanVersion, flows: dict[str, Flow], operator: Operator, outputs: list[Output], batch: Batch,
        work: np.ndarray,
    ) -> None:  # fmt: skip
        """Add to ``work`` what a record flow's or a pane tree root's reader here costs besides testing and
        projecting: every tuple it keeps is folded into each aggregate (a pane's count and each partial state
        it keeps, its cell told for fragments), and every record (pane row) it completes is built
        (docs/ACCOUNTING.md, "Super-peer CPU")."""
        for reader, out in zip(operator.readers, outputs, strict=True):
            flow = flows.get(reader.target.name) if reader.target.kind == "flow" else None
            if flow is None or not len(out.positions):
                continue
            if flow.aggregate is not None:
                folds = len(pv.scenario.subscription(flow.aggregate).query.aggregates)
                schedule = self._schedule(pv, flow.aggregate)
            elif flow.panes is not None:  # (and, with fragments, telling a tuple's cell: a test per box)
                folds, schedule = 1 + len(flow.panes.states), self._pane_rows(pv, flow)
                work[out.positions] += self.costs.box * sum(len(cell.boxes) for cell in flow.panes.cells)
            else:
                continue
            work[out.positions] += self.costs.aggregate * folds
            _, at = schedule.completed_by(batch.indices[out.positions])
            np.add.at(work, out.positions[at], self.costs.record)

    def _aggregate(self, pv: PlanVersion, epoch: int, flow: Flow, inputs: Batch) -> None:
        """The copies of a record flow's input its operator here receives (each at its due time, or with its
        fate): counted, and the records they complete made, due at the later of their window's closing and
        the arrival of their last input; a record whose last input did not arrive goes on at once with its
        fate."""
        sub = flow.aggregate
        self.inputs.add(sub, inputs)
        self._complete(pv, epoch, flow, self._schedule(pv, sub), inputs, self._hold)

    def _complete(self, pv: PlanVersion, epoch: int, flow: Flow, schedule: Schedule, inputs: Batch, due) -> None:
        """The rows of ``schedule`` that the copies ``inputs`` of ``flow``'s operator complete: on along
        ``flow`` at once with their fate, when the copies had one, else handed to ``due`` (:meth:`_hold`
        for records, :meth:`_release` for pane rows)."""
        numbers, at = schedule.completed_by(inputs.indices)
        if not len(numbers):
            return
        rows = self._made(pv, epoch, ("flow", flow.id), flow.stream, schedule, numbers, inputs, at)
        if inputs.fate is not None:
            self._at_node(pv, epoch, flow_key(flow.id), rows, forward=True)
        else:
            due(rows)

    def _made(
        self, pv: PlanVersion, epoch: int, channel: tuple[str, str], stream: str, schedule: Schedule,
        numbers: np.ndarray, completing: Batch, at: np.ndarray,
    ) -> Batch:  # fmt: skip
        """Rows ``numbers`` of ``schedule`` (records, or pane rows) on ``channel``, each completed by the tuple
        (input, or pane row) at position ``at`` of ``completing``: due at the later of its closing and that
        one's arrival, or with its fate."""
        closes = schedule.closes[numbers]
        return Batch(
            self.node, 0, pv.version, epoch, channel, stream, schedule.windows[numbers], closes,
            {a: v[numbers] for a, v in schedule.groups.items()}, schedule.wires(numbers),
            due=np.maximum(closes, completing.arrivals[at]), fate=completing.fate,
        )  # fmt: skip

    def _fold(self, pv: PlanVersion, epoch: int, root: Flow, inputs: Batch) -> None:
        """The copies of a pane tree's input its root's operator here receives (each at its due time, or with
        its fate): counted as the input of every subscription reading the tree in this epoch (the
        simulator's companion channels), and the pane rows they complete made, due at the later of their
        pane's closing and the arrival of their last input; a row whose last input did not arrive goes on at
        once with its fate.  Unlike a record, a row never waits for the horizon: a stop cannot change a pane
        whose last input tuple was emitted."""
        for sub in self.book.installed(pv.version, epoch).pane_readers.get(root.id, ()):
            # with cells, a reader's input is the tuples of its own cell
            self.inputs.add(sub, self._of_cells(pv, root, inputs, self._reader_cells(pv, root, sub)))
        self.recent.setdefault(pane_class(root, pv.plan.pane_chains), []).append((pv, epoch, root, inputs))
        self._complete(pv, epoch, root, self._pane_rows(pv, root), inputs, self._release)

    def _cut_panes(self, end: float) -> None:
        """The run ends at ``end``: the rows of the pane trees rooted here are those of the run as it runs now
        (the pane holding ``end`` keeps the tuples emitted before it, as the simulator of that run has it).
        Its rows whose last input tuple already came (:attr:`recent`) are made at once; the others are
        completed as their tuples come."""
        pv = self.book.latest
        if end >= pv.scenario.duration:
            return
        cut_short = replace(pv.scenario, duration=end)
        for key, (root, schedule) in self.panes.items():
            cut = pane_schedule_of(cut_short, root)
            self.panes[key] = (root, cut)
            fresh = np.flatnonzero(~np.isin(cut.last, schedule.last))
            if not len(fresh):
                continue
            made = Schedule(cut.last[fresh], cut.closes[fresh], cut.windows[fresh], {}, cut.wires(fresh))
            for version, epoch, read_by, inputs in self.recent.get(key, []):
                self._complete(version, epoch, read_by, made, inputs, self._release)

    def _forget_panes(self) -> None:
        """Forget the pane inputs no stop can matter to any more: those of panes that closed before the horizon
        (a stop ends the run at the horizon or later)."""
        if self.horizon == -math.inf:
            return
        for key, entries in self.recent.items():
            start = float(key[-1].pane_start(self.horizon))
            self.recent[key] = [e for e in entries if float(e[3].times.max()) >= start]

    def _pass_panes(self, pv: PlanVersion, epoch: int, flow: Flow, operator: Operator | None, rows: Batch) -> None:
        """Pane rows of ``flow`` are here: on to the child flows read here (which pass them on unchanged), to
        the deliveries made here (:meth:`_combine`), and on along the path (no processor: nothing is read)."""
        installed = self.book.installed(pv.version, epoch)
        for reader in operator.readers if operator is not None else ():
            if reader.target.kind == "flow":  # with cells, a child keeps the rows of those its filter holds
                child = installed.flows[reader.target.name]
                kept = self._of_cells(pv, flow, rows, self._flow_cells(flow, child))
                self._at_node(pv, epoch, reader.target, replace(kept, channel=("flow", reader.target.name)), True)
            else:  # and a reader those of its cell
                sub = reader.target.name
                self._combine(pv, epoch, sub, self._of_cells(pv, flow, rows, self._reader_cells(pv, flow, sub)))
        position = flow.path.index(self.node)
        if position + 1 < len(flow.path):
            after = flow.path[position + 1]
            self._send(self.topics.link(self.node, after), (self.node, after), rows)

    def _flow_cells(self, flow: Flow, child: Flow) -> int:
        """The cells of ``flow``'s tree (as bits) whose rows ``child`` keeps: all without cells or a filter."""
        cells = flow.panes.cells
        if not cells or child.predicate.is_true():
            return -1
        return sum(1 << i for i, cell in enumerate(cells) if cell.implies(child.predicate))

    def _reader_cells(self, pv: PlanVersion, flow: Flow, sub: str) -> int:
        """The cell of ``flow``'s tree (as a bit) subscription ``sub`` reads: all without cells."""
        cells = flow.panes.cells
        if not cells:
            return -1
        where = pv.scenario.subscription(sub).query.where
        return next(1 << i for i, cell in enumerate(cells) if cell.equivalent(where))

    @staticmethod
    def _of_cells(pv: PlanVersion, flow: Flow, batch: Batch, bits: int) -> Batch:
        """The tuples (pane rows: their last input tuples) of ``batch`` in the cells ``bits`` of ``flow``'s
        tree (docs/ACCOUNTING.md, "Panes")."""
        if bits == -1 or not len(batch.indices):
            return batch
        inside = (cells_of(pv.scenario, flow.stream, flow.panes.cells, batch.indices) & bits) != 0
        return batch if inside.all() else batch.part(np.flatnonzero(inside))

    def _combine(self, pv: PlanVersion, epoch: int, sub: str, rows: Batch) -> None:
        """Pane rows reach the super-peer of a subscription reading them: each completing records of it (those
        whose window's last input tuple of their group is the row's) makes them, due at the later of their
        window's closing and the row's arrival and held as a record flow's are (:meth:`_hold`).  Rows that
        did not come are told to the subscriber, as the simulator's pane sink tells its meter, and make their
        records with their fate."""
        peer = pv.subscribers[sub]
        topic, direction = self.topics.down(peer, sub), (self.node, peer)
        if rows.fate is not None:
            self._send(topic, direction, replace(rows, channel=("panes", sub)))
        schedule = self._schedule(pv, sub)
        numbers, at = schedule.completed_by(rows.indices)
        if not len(numbers):
            return
        records = self._made(pv, epoch, ("records", sub), rows.stream, schedule, numbers, rows, at)
        if rows.fate is not None:
            self._send(topic, direction, records)
        else:
            self._hold(records)

    def _hold(self, records: Batch) -> None:
        """Records as they come due: those whose window closes past the end of the run or of their
        subscription are never shipped, those past the clock's horizon wait for it (:meth:`_ripen`); the
        others are released (:meth:`_release`)."""
        closes = records.times
        cut = min(self.end, self._until(records))
        gone, ripe = closes > cut, closes <= self.horizon
        waiting = np.flatnonzero(~gone & ~ripe)
        if len(waiting):
            self.unripe.append(records.part(waiting))
        if (ripe & ~gone).any():
            self._release(records.part(np.flatnonzero(ripe & ~gone)))

    def _release(self, rows: Batch) -> None:
        """Rows made here (records, pane rows) as they come due: served in this pass when due within it, else
        held as received tuples are."""
        now = rows.arrivals <= self.limit
        if now.all():
            self._route(rows)
            return
        if now.any():
            self._route(rows.part(np.flatnonzero(now)))
        self.pending.append(rows.part(np.flatnonzero(~now)))
        self.wake.set()

    def _ripen(self) -> None:
        """The records waiting for the horizon, after a clock: those it now covers are held until due."""
        waiting, self.unripe = self.unripe, []
        for records in waiting:
            self._hold(records)

    def _until(self, records: Batch) -> float:
        """When the subscription whose records ``records`` are ends, as the latest plan version has it (a
        record of a window closing later is not its)."""
        kind, name = records.channel
        if kind == "flow":  # a record flow's
            name = self.book.installed(records.version, records.epoch).flows[name].aggregate
        sub = self.book.latest.scenario.subscriptions_by_id.get(name)
        if sub is None:
            return -math.inf
        return math.inf if sub.until is None else sub.until

    def _pass_records(self, pv: PlanVersion, epoch: int, flow: Flow, operator: Operator | None, batch: Batch) -> None:
        """Records of ``flow`` are here: down to the subscriber, whole, when its delivery reads them here (no
        operator, no processor: they are forwarded), and on along the path."""
        for reader in operator.readers if operator is not None else ():
            if reader.target.kind == "delivery":
                sub = reader.target.name
                peer = pv.subscribers[sub]
                self._send(self.topics.down(peer, sub), (self.node, peer), replace(batch, channel=("records", sub)))
        position = flow.path.index(self.node)
        if position + 1 < len(flow.path):
            after = flow.path[position + 1]
            self._send(self.topics.link(self.node, after), (self.node, after), batch)
