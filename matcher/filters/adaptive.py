"""Cost-based choice between the shared-filtering engines of one input stream.

A super-peer keeps one matcher per incoming stream.  Which engine is cheapest depends on the workload and
on the machine's load: the region-bitmap evaluator (:class:`MultiMatcher`) drops a tuple after its fixed
attribute order, the CACQ grouped filter and ASC (numba kernels, :mod:`matcher.filters._filter_kernels`) after the
attribute order they learn, and the region-bitmap kernel alone has a thread pool, which on the shared 2-core
machine is about 2x the serial kernels by wall clock at low load and 2.5-4x *slower* per tuple under load.
:class:`AdaptiveMultiMatcher` measures each engine on the live stream and runs the cheapest.

Candidates (``ENGINES``): the serial engines ``multi`` (the bitmap kernel without its pool), ``grouped`` and
``asc``, each matching a whole batch in one call (up to ``chunk`` rows), and ``multi-batch``, the same
compiled matcher as ``multi`` with its thread pool (from 8,192 rows).  Probe and verification calls write
into rows of the batch's output matrix (``out=``), so slicing costs no copy.  Batches below ``sample`` rows
go straight to the current choice (``multi`` before any probe); :func:`matcher_for` is the super-peer's rule
for when the adaptive matcher is worth having at all (``ADAPTIVE_MIN_BOXES``).

**Probes.**  Every engine first makes one untimed call on ``WARM_ROWS`` rows (a process's first call of a
numba kernel loads it; an engine's first call touches its fresh tables, 30-60 us).  A probe then runs rounds:
the whole-batch engine on one whole batch (at a batch start, only where it differs from ``multi``: from
8,192 rows, and only while :func:`pool_crowded` says other processes leave its workers cores), each
sliced engine on two disjoint slices (``sample // 4`` and ``sample`` rows, interleaved with the others'),
fitted to ``seconds = per_call + n * per_tuple`` and read at the live call size.  Probe rows are real output
(every engine returns exactly the same matrix), so a probe costs only the difference between engines.  After
a round, sliced engines more than ``eliminate`` times the best drop out, and the whole-batch engine stays
only while it is the cheapest (its rounds cost whole batches); at most ``repeats`` rounds.  During the first
probe the live rows go to the interim engine: the whole-batch engine once its batch was timed (a live-size
measure beats a short-slice fit), else the cheapest fit so far; its calls of at least half the live size
are timed too.

Each call is timed by ``min(wall, CPU)``: wall time is what the thread pool buys, and a serial call
preempted by other processes is charged only the CPU time it used, read on the calling thread's clock (see
:func:`_cpu_clock`).  Sliced engines keep the minimum per slice size, the whole-batch engine the median of
its batches, as its spread is the load itself.

**Verification before a decision.**  The fit on short slices is a lower bound in practice (ASC on
table2-30q/drift: 60 ns per tuple fitted from 128/512-row slices, 160 ns on 4,096-row calls), so unverified
fits are scaled up by ``SHORT_SLICES`` and a sliced winner is timed on a call of (up to ``VERIFY_ROWS`` rows
of) the live size before it is adopted, side by side in the same batch with the current choice and the sliced
engines whose fit comes within ``CLOSE`` of it.  If that leaves it within ``CLOSE`` of the whole-batch engine,
both are timed again on the same batch (engines timed on different batches are timed on different data: ASC
measured 97 ns on a batch of one drift phase against 102 ns for the thread pool on the other, while over the
stream it costs 1.5x the thread pool's).  The whole-batch engine wins only on the median of ``WHOLE_SAMPLES``
batches or on such a paired batch: under load a single batch may catch both cores free.  The engine switches
only when the winner is at least ``margin`` cheaper than the current choice (hysteresis).

**Re-probes** start after ``period`` tuples (doubling, up to ``max_backoff`` times, while re-probes confirm
the choice), when the stream's statistics move by ``drift`` away from every state measured while the choice
held (the drop ratio, counted on ``DROP_COUNTED`` evenly spaced rows of every ``COUNT_EVERY``-th batch, and
the choice's own evaluations per tuple when it counts them; a stream alternating between two distributions
is probed once in each), or when the choice's live batches cost ``SLOWER`` times its measured cost on data
of unchanged statistics (the machine's load changed).  Clear losers (more than ``eliminate`` times the
choice at their last probe) are screened on one ``sample // 4`` slice (one batch for the whole-batch engine)
and sit out ``1, 3, 7, ...`` re-probes unless the drop ratio moved by ``2 * drift``; a loser whose screen
comes within ``eliminate`` of the best rejoins for a full round.  Every re-probe waits until the probes'
cost so far, plus the last probe's, is within ``budget`` (3 %) of the time spent matching.

Measured (``python run.py bench filters``, docs/FILTERS.md): on the idle 2-core machine the automatic
choice reaches 0.95-0.98 of the best engine over 640,000 tuples and 0.89-0.98 over 160,000 on the ten
workloads.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence

import numpy as np

from matcher.filters.asc import ASCMatcher
from matcher.filters.grouped import ConjunctTable, GroupedFilter, row_count
from matcher.filters.multi import PARALLEL_MIN_TUPLES, MultiMatcher
from matcher.predicate import Box, Predicate, interval

WHOLE = "multi-batch"  # the region-bitmap engine called on whole batches (its thread pool from 8,192 rows)
ENGINES = ("multi", WHOLE, "grouped", "asc")
CLOSE = 1.3  # a verified sliced winner this close to the whole-batch engine is timed again beside it
SHORT_SLICES = 1.25  # the fit from short probe slices, scaled up until verified (see _decide)
WHOLE_SAMPLES = 3  # whole batches timed before the whole-batch engine may win (see _decide)
SLOWER = 1.5  # a choice whose live batches cost this much more than its measured cost is probed again
PAIRED = -1  # the rows of a verification task: a live-size call (see AdaptiveMultiMatcher._decide)
WARM_ROWS = 8  # an untimed first call of the bitmap engine loads its compiled kernels before anything is timed
STATISTICS_WINDOW = 32_768  # tuples over which the drift statistics are averaged before they are compared
MAX_STATES = 16  # confirmed states remembered: bounded, as the evaluations/tuple axis is unbounded
DROP_COUNTED = 256  # the drop ratio is counted on this many evenly spaced output rows of a batch ...
COUNT_EVERY = 4  # ... of every 4th batch (``any`` over 64 rows of a fresh output matrix cost 15 us in place)
ADAPTIVE_MIN_BOXES = 32  # from this many boxes a super-peer runs the adaptive matcher (see matcher_for)
CHUNK = 65_536  # rows per serial engine call at most: a batch up to this size is one call (see _call)
VERIFY_ROWS = 4_096  # rows of a verification call at most: a losing engine's call costs the difference on these
# rows; per tuple it costs within 3 % of a whole 8,192-row call (ASC's per-call work: 35 us)
ASC_SETTINGS = {"ordering": "macro", "period": 80_000, "threshold": 0.1}
"""The ASC candidate: the macro-sequence, re-learned when the drop ratio or the ASCs per tuple moved by 10 %
over a period of 80,000 tuples.  The paper's setting (every 10,000 tuples, mu = 0) spends more on re-learning
(the subset DP and its monitor sample, ~8 ms per period at 10 ASCs) than on evaluating: 1.1 M tuples/s
against 4.7 M for the kernel alone on table2-50q/D2; the probes time the kernel, so they would not see it."""


def _make(name: str, labelled: Sequence[tuple[str, Predicate]], built: Mapping[str, object]):
    if name in ("multi", WHOLE):
        # one compiled matcher serves both widths: they differ only in how the batch is cut
        return built.get("multi", built.get(WHOLE)) or MultiMatcher(labelled, scan_first=SCAN_FIRST_TUPLES)
    if name == "grouped":
        return GroupedFilter(labelled)
    return ASCMatcher(labelled, **ASC_SETTINGS)


class _Engines(MutableMapping):
    """The candidate engines by name, each built on first use: until a batch is large enough to probe, an
    operator only ever calls its first choice, and building the others' tables is most of its set-up (an
    operator over a few hundred boxes, rebuilt whenever a subscription below it comes or goes)."""

    def __init__(self, labelled: Sequence[tuple[str, Predicate]], names: Sequence[str]):
        self._labelled = labelled
        self._names = list(names)
        self._built: dict[str, object] = {}  # what each name holds (made, or set by the caller)
        self._made: dict[str, object] = {}  # what _make built, so the two widths share one compiled matcher

    def __getitem__(self, name: str):
        engine = self._built.get(name)
        if engine is None:
            if name not in self._names:
                raise KeyError(name)
            engine = self._built[name] = self._made[name] = _make(name, self._labelled, self._made)
        return engine

    def __setitem__(self, name: str, engine) -> None:
        if name not in self._names:
            self._names.append(name)
        self._built[name] = engine

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


class AdaptiveMultiMatcher:
    """The MultiMatcher interface over the engine the fitted cost model predicts cheapest.

    ``choice`` is the engine in use, ``history`` the ``(tuples seen, engine)`` choices, ``cost`` the last
    predicted seconds per tuple of each probed engine at the live batch size, ``probed_tuples`` the rows
    matched by a probe on an engine other than the final choice of that probe (the probing overhead).
    Raises ValueError for an unknown engine name, non-positive settings or a ``chunk`` below ``sample``.
    """

    def __init__(
        self,
        labelled: Sequence[tuple[str, Predicate]],
        *,
        engines: Sequence[str] = ENGINES,
        sample: int = 256,
        repeats: int = 2,
        period: int = 250_000,
        max_backoff: int = 8,
        drift: float = 0.15,
        margin: float = 0.05,
        eliminate: float = 1.5,
        chunk: int = CHUNK,
        budget: float = 0.03,
    ):
        unknown = [e for e in engines if e not in ENGINES]
        if unknown or not engines:
            raise ValueError(f"engines {list(engines)}: expected names from {', '.join(ENGINES)}")
        if sample < 4 * WARM_ROWS or min(repeats, period, max_backoff) <= 0:
            raise ValueError(
                f"sample {sample}, repeats {repeats}, period {period}, max_backoff {max_backoff}:"
                f" sample must be at least {4 * WARM_ROWS}, the others positive"
            )
        if not budget >= 0:
            raise ValueError(f"budget {budget}: must be a fraction of the matching time, 0 or more")
        if chunk < sample:
            raise ValueError(f"chunk {chunk}: must be at least sample {sample} (probe slices are engine calls)")
        settings = (
            int(sample),
            int(repeats),
            int(period),
            int(max_backoff),
            float(drift),
            float(margin),
            float(eliminate),
            int(chunk),
            float(budget),
        )
        self._setup(tuple(labelled), tuple(engines), settings)

    def _setup(self, labelled, engines, settings) -> None:
        self._labelled = labelled
        self.labels = tuple(label for label, _ in labelled)
        self.engines = _Engines(labelled, engines)
        self._settings = settings
        (
            self.sample,
            self.repeats,
            self.period,
            self.max_backoff,
            self.drift,
            self.margin,
            self.eliminate,
            self.chunk,
            self.budget,
        ) = settings
        self.cost: dict[str, float] = {}
        self.choice = engines[0]
        self.history: list[tuple[int, str]] = []
        self.tuples_seen = self.probed_tuples = self.probes = 0
        self._interim: str | None = None  # during the first probe: the cheapest engine of its rounds so far
        self._probe_rows: dict[str, int] = {}  # rows each engine matched in the current probe
        self._warm = False  # every engine has made its untimed first call
        self._rounds_left = 0
        self._verifying = False  # the probe's rounds are done: the winner is being timed on a live-size call
        self._tasks: list[tuple[str, int]] = []  # probe slices still to run: (engine, rows)
        self._timings: dict[str, dict[int, list[float]]] = {}
        self._paired: dict[str, float] = {}  # seconds per tuple of the current probe's verification calls
        self._pair: str | None = None  # the engine timed on the same batch as the whole-batch engine
        self._pair_rows = self.sample  # rows of each sliced verification call (see _decide)
        self._batch = self.sample  # rows per live sliced engine call, for the cost prediction
        self._width = self.sample  # rows of the latest batch: a whole-batch probe needs more than chunk
        self._next_probe = 0
        self._backoff = 1
        self._reference: tuple[float, float] | None = None  # (drop ratio, evaluations/tuple) after the last probe
        self._confirmed: list[tuple[float, float]] = []  # the references measured while the choice held
        self._window = [0, 0, 0, 0]  # tuples, counted rows, dropped of those, -evaluations at the window start
        self._fits: dict[str, tuple[float, float]] = {}  # per engine: (per call, per tuple) of its last fit
        self._screened: list[str] = []  # the clear losers timed on one slice in the current probe
        self._losers: dict[str, _Loser] = {}  # engines that lost by more than ``eliminate`` at their last probe
        self._last_drop = 0.0  # the drop ratio of the latest statistics window
        self._busy = 0.0  # seconds spent in match()
        self._live: list = [0.0, 0]  # seconds and rows of the statistics window's live batches on the choice
        self._baseline: float | None = None  # the choice's live cost per tuple, as measured (see _decide)
        self._calls = 0  # batches watched
        self._probe_seconds = self._last_probe = 0.0  # probing overhead: all probes, the latest

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = ConjunctTable.of(self._labelled).to_arrays()
        arrays["adaptive_engines"] = np.array(list(self.engines), dtype=object)
        arrays["adaptive_settings"] = np.array([*self._settings, self.choice], dtype=object)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AdaptiveMultiMatcher:
        """Rebuild from :meth:`to_arrays` (learned costs are not carried: the copy probes afresh)."""
        table = ConjunctTable.from_arrays(arrays)
        *settings, choice = arrays["adaptive_settings"]
        self = cls.__new__(cls)
        self._setup(_labelled(table), tuple(str(e) for e in arrays["adaptive_engines"]), tuple(settings))
        self.choice = str(choice)
        return self

    def __reduce__(self):
        return (AdaptiveMultiMatcher.from_arrays, (self.to_arrays(),))

    # -- matching ---------------------------------------------------------------------------------------
    def match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        # every COUNT_EVERY-th batch on the choice alone is timed as the probes time (for _watch): the CPU
        # clock is a system call, and on a loaded machine every system call is a chance to be preempted
        sampled = self._calls % COUNT_EVERY == 0 and bool(self.history) and not self._tasks
        began, probes = time.perf_counter(), self.probes
        clock = _cpu_clock(self.choice)
        began_cpu = clock() if sampled else 0.0
        out = self._match(columns)
        wall = time.perf_counter() - began
        self._busy += wall
        if sampled and probes == self.probes and not self._tasks and len(out) >= self.sample:
            self._live[0] += min(wall, clock() - began_cpu)
            self._live[1] += len(out)
        return out

    def _match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = row_count(columns)
        if n < self.sample:
            # a small batch goes straight to the current choice: a probe slice cut to a few rows would time
            # mostly the engines' per-call cost (10-20 us), and the statistics wait for batches that can be
            # probed
            self.tuples_seen += n
            return self.engines[self.choice].match(columns)
        self._batch = min(n, self.chunk)
        self._width = n
        if not self._warm:
            # one untimed call per engine before any timing: a process's first call of a numba kernel reads
            # it from numba's cache (milliseconds), and an engine's first call touches its freshly built
            # tables (measured: 30-60 us more than its next call on 64 rows, which made the 64-row probe slice
            # of ASC cost as much as its 256-row one and its fitted cost per tuple 0)
            self._warm = True
            for engine in {id(e): e for e in self.engines.values()}.values():
                getattr(engine, "prepare", lambda: None)()  # a lazily built table is built before any timing
                engine.match(_slice(columns, 0, WARM_ROWS))
        if not self._tasks and self.tuples_seen >= self._next_probe and self._affordable():
            self._start_probe()
        live = self._interim or self.choice
        if not self._tasks and (live == WHOLE or n <= self.chunk):
            # one engine call covers the batch: return its matrix (filling a preallocated one measured 30 us per
            # 8,192 x 50 batch, 4 % of the thread pool's time at 10 M tuples/s)
            out = self._call(live, columns)
            self.tuples_seen += n
            self._watch(out)
            return out
        out = np.zeros((n, len(self.labels)), dtype=bool)
        start = 0
        # probe slices are never split across batches (the first always fits: slices are at most sample rows)
        while self._tasks:
            name, rows = self._tasks[0]
            if rows == 0:  # a whole batch: only at the start of one, where it differs from the serial width
                if start > 0:
                    break
                if not self._pool_width(n):
                    self._tasks.pop(0)  # this batch would time the sliced engine again: not timed this round
                elif n >= PARALLEL_MIN_TUPLES and not _pool_loaded(self.engines[name]):
                    # the task stays queued for the next batch
                    self.engines[name].match(columns, out=out)
                    self._probe_rows[name] = self._probe_rows.get(name, 0) + n
                    start = n
                    break
                else:
                    self._tasks.pop(0)
                    self._timed(name, columns, out)
                    start = n
            elif rows == PAIRED:  # a verification call (see _decide): live-size calls of the sliced engines side
                # by side in a batch, then the whole-batch engine on the same batch
                if name == WHOLE:
                    self._tasks.pop(0)
                    if self._pool_width(n):
                        # over the sliced engines' rows too: every engine sets the same entries
                        self._timed(name, columns, out, paired=True)
                        start = n
                elif start > 0 and n - start < self._pair_rows:
                    break
                else:
                    self._tasks.pop(0)
                    stop = start + min(n, self._pair_rows)
                    self._timed(name, _slice(columns, start, stop), out[start:stop], paired=True)
                    start = stop
            elif n - start >= rows:
                self._tasks.pop(0)
                self._timed(name, _slice(columns, start, start + rows), out[start : start + rows])
                start += rows
            else:
                break
            if not self._tasks and self._round_done():
                self._decide()
        live = self._interim or self.choice
        engine = self.engines[live]
        if live == WHOLE and 0 < start < n and n - start < PARALLEL_MIN_TUPLES <= n:
            # probe slices took the head of the batch: the rest alone would run the serial kernel, so it
            # runs on the thread pool all the same (as the whole batch would have)
            engine.match(_slice(columns, start, n), parallel=True, out=out[start:])
            start = n
        width = n if live == WHOLE else self.chunk
        for begin in range(start, n, width):
            stop = min(n, begin + width)
            part = _slice(columns, begin, stop)
            if self._interim is not None and stop - begin >= (n if live == WHOLE else self._batch // 2):
                # during the first probe the live calls on the interim engine are timed too: calls of (about) the
                # live size, which the short probe slices cannot predict (see _decide), at no extra cost
                self._timed(live, part, out[begin:stop])
            else:
                self._call(live, part, out[begin:stop])
        self.tuples_seen += n
        self._watch(out)
        return out

    def _timed(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray, paired: bool = False) -> None:
        """Match ``columns`` into ``out`` (rows of the batch's matrix) on engine ``name``, timed for the probe."""
        n = len(out)
        clock = _cpu_clock(name)
        began, began_cpu = time.perf_counter(), clock()
        self._call(name, columns, out)
        # the call's cost: its wall time, but never more than the CPU time spent in it (see the module
        # docstring: a serial call preempted by the machine's load is charged its CPU time)
        elapsed = min(time.perf_counter() - began, clock() - began_cpu)
        self._timings[name].setdefault(n, []).append(elapsed)
        if paired:
            self._paired[name] = elapsed / n
        self._probe_rows[name] = self._probe_rows.get(name, 0) + n

    def _call(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """Match on engine ``name``: ``multi`` always on the serial kernel, the whole-batch engine on its pool
        from ``PARALLEL_MIN_TUPLES`` rows.  A serial engine matches a whole batch (up to ``chunk`` rows) in one
        call: cut into 4,096-row calls, ASC cost 8 % more than on whole 8,192-row batches (its per-call work,
        the slices' views and the batch's matrix: 60 us per batch on table2-30q/drift)."""
        engine = self.engines[name]
        if name == "multi":
            return engine.match(columns, parallel=False, out=out)
        return engine.match(columns, out=out)

    def _pool_width(self, n: int) -> bool:
        """Does the whole-batch engine differ from the serial ``multi`` on a batch of ``n`` rows?"""
        return n > self.chunk or n >= PARALLEL_MIN_TUPLES

    # -- probing ---------------------------------------------------------------------------------------
    def _start_probe(self) -> None:
        """Queue the first round of a new probe: every contender, plus one screening slice per clear loser.

        The whole-batch engine is timed only from a batch wider than ``chunk`` (narrower, it is the sliced
        engine), and only while the machine has a core for each of its pool's threads (:func:`pool_crowded`):
        on a crowded machine its probe would time the scheduler, and if it is the current choice, its cost
        measured on a quieter machine no longer holds.  With nothing else to time, the probe waits another
        ``period``.
        """
        whole = WHOLE in self.engines and self._pool_width(self._width)
        if whole and len(self.engines) > 1 and pool_crowded():
            whole = False
            if self.choice == WHOLE:
                self.cost.pop(WHOLE, None)  # the choice is re-made among the serial engines (see _decide)
        timeable = [name for name in self.engines if name != WHOLE or whole]
        if self.history and self.choice not in timeable:
            # the engines lost against a choice that cannot run now: each gets a full round
            self._losers = {}
        if not timeable:
            self._next_probe = self.tuples_seen + self.period
            return
        self.probes += 1
        self._timings = {}
        self._paired = {}
        self._pair = None
        self._probe_rows = {}
        self._rounds_left = self.repeats
        quarter = max(WARM_ROWS, self.sample // 4)
        self._screened = []
        if not self.cost:
            self._queue(timeable, (quarter, self.sample))
            return
        contenders = [name for name in timeable if name not in self._losers]
        screened = []
        for name, state in self._losers.items():
            if name not in timeable:
                continue
            if state.skips > 0 and not self._drop_moved_since(state):
                state.skips -= 1
            else:
                screened.append(name)
        self._queue(contenders, (quarter, self.sample))
        # a clear loser costs one slice, read against its last fit (see _predict); the whole-batch engine one
        # batch, its only measure
        screens = [(name, 0 if name == WHOLE else quarter) for name in screened]
        self._tasks = sorted(screens + self._tasks, key=lambda task: task[1] != 0)  # whole batches first
        self._timings.update({name: {} for name in screened})
        self._screened = screened

    def _queue(self, names: list[str], sizes: tuple[int, int]) -> None:
        for name in names:
            self._timings.setdefault(name, {})
        # rotate the engine order each round so that no engine always runs right after another
        shift = (self.repeats - self._rounds_left) % len(names)
        names = names[shift:] + names[:shift]
        whole = [(name, 0) for name in names if name == WHOLE]  # first: it needs the start of a batch
        self._tasks = whole + [(name, size) for size in sizes for name in names if name != WHOLE]
        self._rounds_left -= 1

    def _round_done(self) -> bool:
        """After a full round: continue with the engines still in contention, or report done.

        A screened loser that came within ``eliminate`` of the best fitted engine rejoins for a full round
        (one extra round if none is left): a single slice may let it back in, never decide the choice.
        """
        if self._verifying:
            return True
        predicted = self._predict()
        best = min(cost for name, cost in predicted.items() if name not in self._screened)
        factor = max(self.eliminate, 1.0)
        readmitted = [name for name in self._screened if predicted.get(name, np.inf) <= factor * best]
        # the whole-batch engine costs a whole batch per round: it stays only while it is the cheapest (under
        # load its thread pool costs 2.5-4x and the rounds would be paid at that price)
        contenders = [
            name
            for name in predicted
            if name not in self._screened and predicted[name] <= (1.0 if name == WHOLE else factor) * best
        ]
        if not self.history:
            # the interim runs live rows: an engine measured on live-size calls (the whole-batch engine's batch)
            # beats a fit from short slices, which under-predicts (ASC on table2-30q/drift: 100 ns fitted with
            # SHORT_SLICES, 180 ns live, against the thread pool's 128 ns)
            candidates = [WHOLE] if WHOLE in predicted else contenders
            self._interim = min(candidates, key=lambda e: (predicted[e], e))
        if readmitted:
            self._screened = [name for name in self._screened if name not in readmitted]
            self._rounds_left = max(self._rounds_left, 1)
        elif self._rounds_left == 0 or len(contenders) == 1:
            return True
        self._queue(contenders + readmitted, (max(WARM_ROWS, self.sample // 4), self.sample))
        return False

    def _predict(self) -> dict[str, float]:
        """Seconds per tuple at the live batch size, from the least probe time per size of each engine.

        The whole-batch engine's is its median time per tuple over the batches it matched.  Two slice
        sizes fit ``per_call`` and ``per_tuple``.  A single size (a screened loser) scales the
        engine's last fitted prediction by its slice time over the time that fit gives for the slice:
        reading the slice with the old ``per_call`` alone was measured to predict ASC at 103 ns per tuple
        on cacq-20q (421 measured), as the per-call cost is most of a 256-row slice and varies by 20 %.
        """
        predicted = {}
        for name, by_size in self._timings.items():
            if not by_size:
                continue  # a whole-batch engine that met no batch wider than chunk in this probe
            if name == WHOLE:
                predicted[name] = float(np.median([t / rows for rows, times in by_size.items() for t in times]))
                continue
            sizes = sorted(by_size)
            least = [min(by_size[s]) for s in sizes]
            if len(sizes) >= 2:
                per_tuple = max((least[-1] - least[0]) / (sizes[-1] - sizes[0]), 0.0)
                per_call = max(least[0] - sizes[0] * per_tuple, 0.0)
                self._fits[name] = (per_call, per_tuple)
            elif name in self._fits:
                per_call, per_tuple = self._fits[name]
                scale = least[0] / max(per_call + sizes[0] * per_tuple, 1e-12)
                per_call, per_tuple = per_call * scale, per_tuple * scale
            else:
                per_call, per_tuple = 0.0, least[0] / sizes[0]
            predicted[name] = per_tuple + per_call / max(self._batch, 1)
            if sizes[-1] < self._batch:
                predicted[name] *= SHORT_SLICES  # a lower bound in practice: see _decide
        return predicted

    def _decide(self) -> None:
        self._tasks = []
        predicted = self._predict()
        predicted.update(self._paired)
        fitted = [name for name in predicted if name not in self._screened]
        best = min(fitted, key=lambda e: (predicted[e], e))
        if best != WHOLE and len(fitted) > 1:
            # verify a sliced winner on one call of the live size before adopting it: the fit on short slices
            # is a lower bound in practice (table2-30q/drift: ASC fitted at 60 ns per tuple from 128/512-row
            # slices, 160 ns on 4,096-row calls, as its working set outgrows the caches).  The sliced engines
            # whose fit comes within CLOSE of it, and the current choice, are timed beside it in the same
            # batch: under load, fits from 64- and 256-row slices put the grouped filter ahead of ASC, which
            # costs 0.75x of it on live calls (cacq-20q, two busy processes beside it).  When that leaves the
            # winner within CLOSE of the whole-batch engine, both are timed again on the same batch: engines
            # timed on different batches are timed on different data (on the same workload ASC measured 97 ns
            # on a batch of one drift phase against 102 ns for the thread pool on a batch of the other, while
            # over the whole stream it costs 1.5x the thread pool's)
            incumbent = self.choice if self.history else None
            close = min(CLOSE, max(self.eliminate, 1.0))  # never one that the rounds eliminated
            sliced = [
                name
                for name in fitted
                if name != WHOLE and (name in (best, incumbent) or predicted[name] <= close * predicted[best])
            ]
            pending = [name for name in sliced if name not in self._paired]
            if pending:
                self._tasks = [(name, PAIRED) for name in sorted(pending, key=lambda e: (predicted[e], e))]
                # side by side: a live-size call each if the batch holds them all, else a share of it each down to
                # half the live size (two engines per batch); calls the size of the probe slices would tell
                # nothing new, so batches that small take one live-size call each
                rows = min(self._batch, max(self._width // len(pending), self._batch // 2), VERIFY_ROWS)
                self._pair_rows = rows if rows >= 2 * self.sample else self._batch
            elif WHOLE in predicted and self._pair != best and predicted[WHOLE] <= CLOSE * predicted[best]:
                self._tasks = [(best, PAIRED), (WHOLE, PAIRED)]
                self._pair = best
                self._pair_rows = min(self._batch, VERIFY_ROWS)
        elif best == WHOLE and len(fitted) > 1 and self._whole_unsettled():
            self._tasks = [(WHOLE, 0)]
        if self._tasks:
            self._verifying = True
            return
        self._verifying = False
        self._interim = None
        # engines eliminated after an early round keep their (higher) prediction from that round
        self.cost.update(predicted)
        current = self.cost.get(self.choice, np.inf) if self.history else np.inf
        if not self.history or (best != self.choice and predicted[best] < (1 - self.margin) * current):
            self.choice = best
            self.history.append((self.tuples_seen, best))
            self._backoff = 1
            self._confirmed = []
            for state in self._losers.values():
                state.skips = 0  # they lost against the previous choice: screen them against the new one
        else:
            self._backoff = min(self.max_backoff, self._backoff * 2)
        for name, cost in predicted.items():
            if name != self.choice and cost > self.eliminate * self.cost[self.choice]:
                previous = self._losers.get(name)
                backoff = 1 if previous is None else min(self.max_backoff, previous.backoff * 2)
                self._losers[name] = _Loser(backoff)
            else:
                self._losers.pop(name, None)
        # the live cost the choice is held to (see _watch): measured on calls of the live size, or else (a fit
        # on short slices) taken from its first statistics window
        measured = self.choice == WHOLE or self.choice in self._paired
        self._baseline = predicted[self.choice] if measured and self.choice in predicted else None
        self.probed_tuples += sum(rows for name, rows in self._probe_rows.items() if name != self.choice)
        # what the probe cost beyond running the choice: its timed calls of other engines, less the choice's
        # predicted time for the same rows
        chosen = self.cost[self.choice]
        self._last_probe = sum(
            max(t - chosen * rows, 0.0)
            for name, by_size in self._timings.items()
            if name != self.choice
            for rows, times in by_size.items()
            for t in times
        )
        self._probe_seconds += self._last_probe
        self._next_probe = self.tuples_seen + self.period * self._backoff
        self._reference = None
        self._window = [0, 0, 0, 0]
        self._live = [0.0, 0]

    def _whole_unsettled(self) -> bool:
        """Must the whole-batch engine be timed on more batches before it may win?  It wins on the median of
        at least WHOLE_SAMPLES batches, or on a batch it shared with the sliced runner-up: under load one batch
        may catch both cores free (measured at load 3: 0.9 to 3.9 M tuples/s between runs over one stream)."""
        samples = sum(len(times) for times in self._timings[WHOLE].values())
        return WHOLE not in self._paired and self._pool_width(self._width) and samples < WHOLE_SAMPLES

    def _affordable(self) -> bool:
        """May a re-probe start?  Only while the probes' cost stays within ``budget`` of the time spent matching,
        counting the next one at the cost of the last (the first probe always runs).  A stream whose statistics
        keep moving (drift phases, or an ASC choice re-learning its own order) would otherwise re-probe at
        every move, and a probe's losing engines cost up to a few batches."""
        if not self.history:
            return True
        return self._probe_seconds + self._last_probe <= self.budget * self._busy

    def _drop_moved_since(self, loser: _Loser) -> bool:
        """Did the drop ratio move by ``2 * drift`` since the loser's last measurement (then screen it)?"""
        return (
            loser.drop is not None
            and self._reference is not None
            and (abs(self._last_drop - loser.drop) >= 2 * self.drift)
        )

    # -- drift ------------------------------------------------------------------------------------------
    def _watch(self, out: np.ndarray) -> None:
        """Accumulate the exact statistics of the chosen engine; start a re-probe when they drifted."""
        if self._tasks:
            return
        engine = self.engines[self.choice]
        evaluations = getattr(engine, "evaluations", 0)
        window = self._window
        if window[0] == 0:
            window[3] = -evaluations
        window[0] += len(out)
        self._calls += 1
        if self._calls % COUNT_EVERY == 0 or window[1] == 0:
            counted = out[:: max(1, len(out) // DROP_COUNTED)]
            window[1] += len(counted)
            window[2] += len(counted) - int(np.count_nonzero(counted.any(axis=1)))
        if window[0] < STATISTICS_WINDOW:
            return
        now = (window[2] / window[1], (evaluations + window[3]) / window[0])
        self._window = [0, 0, 0, 0]
        self._last_drop = now[0]
        seconds, rows = self._live
        self._live = [0.0, 0]
        live = seconds / rows if rows else None
        if self._reference is None:
            self._reference = now
            if self._baseline is None:
                self._baseline = live  # the choice's cost was a fit on short slices: its live cost instead
            for loser in self._losers.values():
                loser.drop = now[0] if loser.drop is None else loser.drop
            self._confirmed = [*self._confirmed, now][-MAX_STATES:]
            return
        if all(self._moved(now, state) for state in self._confirmed):
            self._next_probe = self.tuples_seen
        if live and self._baseline and live > SLOWER * self._baseline and not self._moved(now, self._reference):
            # the choice runs slower than it was measured on data of the same statistics: the machine's load
            # changed (the thread pool costs 2.5-4x on a loaded machine, the serial kernels do not)
            self._next_probe = self.tuples_seen

    def _moved(self, now: tuple[float, float], state: tuple[float, float]) -> bool:
        drop_moved = abs(now[0] - state[0]) >= self.drift
        return drop_moved or (state[1] > 0 and abs(now[1] / state[1] - 1) >= self.drift)


class _Loser:
    """Back-off state of an engine that lost by more than ``eliminate``: it sits out ``skips`` re-probes
    (``backoff - 1`` after each confirmed loss, ``backoff`` doubling up to ``max_backoff``) unless the drop
    ratio moved by ``2 * drift`` from ``drop``, measured in the first statistics window after its loss."""

    def __init__(self, backoff: int):
        self.backoff, self.skips, self.drop = backoff, backoff - 1, None


def pool_crowded() -> bool:
    """Do other processes keep busy the cores the thread pool's workers would need?

    Read on Linux (False where /proc cannot be read): the cores other processes kept busy since the previous
    reading at least 100 ms earlier (:class:`_OtherLoad`), crowded above half a core more than the pool leaves
    spare; before the process has such an interval, the count of runnable threads (``procs_running`` in
    /proc/stat) less this process's own running threads, crowded when three readings in a row leave no core
    for a worker (a single reading was crowded on 0.5 % of probes of the idle machine: a daemon's burst).

    Measured on the 2-core machine, with two busy processes beside it: a 64-row call on the pool took 8 ms at
    the median (1.1 ms at the 10th percentile) against 46 us on the idle machine, as the worker waits for a
    core, and an 8,192-row batch 4-8 ms against ASC's 1.5 ms.  With one busy process the pool's median batch
    still beat ASC (1.1 against 1.6 ms) but its 90th percentile took 8 ms: what a stream pays is the mean.  A
    probe cannot afford to find this out on whole batches (the first probe's pool batch was 20-35 % of ASC's
    time over a 160,000-tuple stream).
    """
    try:
        from numba import get_num_threads

        spare = (os.cpu_count() or 1) - get_num_threads()
        others = _LOAD.read()
        if others is not None:
            return others > spare + 0.5
        return all(_others_running() > spare for _ in range(3))
    except (OSError, ValueError, IndexError, ImportError, AttributeError):  # AttributeError: no os.sysconf
        return False


class _OtherLoad:
    """The cores other processes kept busy over an interval: /proc/stat's CPU time (steal included) less the idle
    time and this process's own (all its threads, the pool's workers among them: ``os.times``), in clock ticks."""

    MIN_TICKS_PER_CPU = 10  # an interval of at least 100 ms at the usual 100 ticks per second

    def __init__(self):
        self._last: tuple[int, int, int] | None = None  # (total, idle, ours) ticks at the interval's start
        self.cores: float | None = None  # over the latest interval long enough

    def read(self) -> float | None:
        with open("/proc/stat", "rb") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        times = os.times()  # this process's CPU time, all threads, counted in the same clock ticks
        ours = round((times.user + times.system) * os.sysconf("SC_CLK_TCK"))
        now = (sum(ticks), ticks[3] + ticks[4], ours)
        cpus = os.cpu_count() or 1
        if self._last is None:
            self._last = now
        elif now[0] - self._last[0] >= self.MIN_TICKS_PER_CPU * cpus:
            self.cores = busy_cores(self._last, now, cpus)
            self._last = now
        return self.cores


def busy_cores(start: tuple[int, int, int], stop: tuple[int, int, int], cpus: int) -> float:
    """Cores kept busy by other processes between two ``(total, idle, ours)`` tick readings."""
    total, idle, ours = (b - a for a, b in zip(start, stop, strict=True))
    return max(total - idle - ours, 0) / max(total, 1) * cpus


_LOAD = _OtherLoad()
with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
    _LOAD.read()  # the first interval starts at import: a super-peer's first probe comes well after it


def _others_running() -> int:
    """Runnable threads on the machine outside this process (raises OSError/ValueError without /proc)."""
    with open("/proc/stat", "rb") as stat:
        running = next((int(line.split()[1]) for line in stat if line.startswith(b"procs_running")), None)
    if running is None:
        raise ValueError("/proc/stat has no procs_running")
    if running <= 1:
        return 0  # the calling thread alone (reading this process's threads costs 10-20 us each)
    ours = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat", "rb") as stat:
                line = stat.read()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        end = line.rindex(b")")  # the state follows the command name, which may hold spaces and parentheses
        ours += line[end + 2 : end + 3] == b"R"
    return running - ours


def _cpu_clock(name: str):
    """The CPU clock a call of engine ``name`` is read on: the process's for the whole-batch engine (its
    thread pool's workers work for it), the calling thread's for the serial engines.  The process's clock adds
    the other threads' time in steps of up to a scheduler tick: a 0.7 ms ASC call right after a thread-pool
    call read up to 6.5 ms of process CPU time (its thread's clock: 0.7 ms), and one such reading in a
    verification made the adaptive matcher choose the grouped filter at 1.8x ASC's cost under load."""
    return time.process_time if name == WHOLE else time.thread_time


def _pool_loaded(engine) -> bool:
    """Has this process run the bitmap engine's thread-pool kernel yet?  Its first call loads it (numba's
    cache, the worker threads): that batch is matched untimed, as its time would be the loading."""
    if getattr(engine, "strategy", "") != "bitmap":
        return True  # the numpy scan has no thread pool to load
    from matcher.filters._filter_kernels import dense_kernel

    return bool(dense_kernel.signatures)


SCAN_FIRST_TUPLES = 256
"""A super-peer's matcher below ``ADAPTIVE_MIN_BOXES`` boxes matches its first tuples by the broadcast scan
and builds its bitmap only after them: an operator installed for one short epoch of a plan sees a handful
of tuples, for which building the bitmap costs more than scanning them."""


def matcher_for(labelled: Sequence[tuple[str, Predicate]]) -> MultiMatcher | AdaptiveMultiMatcher:
    """The matcher a super-peer runs over the predicates read from one input stream.

    :class:`AdaptiveMultiMatcher` from ``ADAPTIVE_MIN_BOXES`` boxes (conjuncts) on, :class:`MultiMatcher`
    below.  The threshold was set when the grouped filter and ASC were numpy code (0.3-0.5 ms per call, so
    one probe cost more than the whole stream of most operators in the shipped scenarios: sky-survey has
    2-6,000 tuples per operator, in batches under 256 rows); it was kept, not re-tuned, for their numba
    kernels (docs/FILTERS.md has the per-tuple costs below 32 boxes).
    """
    boxes = sum(len(predicate.boxes) for _, predicate in labelled)
    if boxes >= ADAPTIVE_MIN_BOXES:
        return AdaptiveMultiMatcher(labelled)
    return MultiMatcher(labelled, scan_first=SCAN_FIRST_TUPLES)


def _slice(columns: Mapping[str, np.ndarray], start: int, stop: int) -> Mapping[str, np.ndarray]:
    """Rows ``start:stop`` of every column: the columns themselves when that is all of them."""
    if start == 0 and stop >= row_count(columns):
        return columns
    return {name: values[start:stop] for name, values in columns.items()}


def _labelled(table: ConjunctTable) -> tuple[tuple[str, Predicate], ...]:
    """The labelled predicates a conjunct table was compiled from."""
    boxes: list[list[Box]] = [[] for _ in table.labels]
    for r, owner in enumerate(table.owner):
        box = Box(
            (dim, interval(table.lo[r, k], table.hi[r, k], table.lo_closed[r, k], table.hi_closed[r, k]))
            for k, dim in enumerate(table.dims)
            if np.isfinite(table.lo[r, k]) or np.isfinite(table.hi[r, k])
        )
        boxes[int(owner)].append(box)
    return tuple((label, Predicate(b)) for label, b in zip(table.labels, boxes, strict=True))
