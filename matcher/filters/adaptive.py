"""Cost-based choice between the shared-filter engines of one input stream: the choice's state machine.

A super-peer keeps one matcher per incoming stream.  Which engine is cheapest depends on the workload and
on the machine's load: the region-bitmap matcher (:class:`MultiMatcher`) drops a tuple after its fixed
attribute order, the CACQ grouped filter (Madden et al.) and Lee & Lee's attribute selection constructs
(ASC) after the attribute order they learn, and the region-bitmap kernel alone has a thread pool, which
beats the serial kernels by wall clock on an idle machine and costs several times as much per tuple on a
loaded one.  :class:`AdaptiveMultiMatcher` measures each engine on the live stream and runs the cheapest:
Babu's adaptive processing loop (profile, re-optimise, execute) applied to the choice of engine.

Candidates (:mod:`matcher.filters.candidates`): the serial engines ``multi`` (the bitmap kernel without its
pool), ``grouped`` and ``asc``, each matching a whole batch in one call (up to ``chunk`` rows), and
``multi-batch``, the same compiled matcher as ``multi`` with its thread pool.  Probe and verification calls
write into rows of the batch's output matrix (``out=``), so slicing costs no copy.  Batches below ``sample``
rows go straight to the current choice (``multi`` before any probe).  The settings are an
:class:`AdaptiveSettings`.

**Probes.**  Every engine first makes one untimed call on ``WARM_ROWS`` rows (a process's first call of a
numba kernel loads it; an engine's first call touches its fresh tables).  A probe then runs rounds: the
whole-batch engine on one whole batch (at a batch start, only where it differs from ``multi``, and only
while :func:`~matcher.filters.machine_load.pool_crowded` says other processes leave its workers cores),
each sliced engine on two disjoint slices (``sample // 4`` and ``sample`` rows, interleaved with the
others'), fitted to ``seconds = per_call + n * per_tuple`` and read at the live call size
(:mod:`matcher.filters.cost_fit`).  Probe rows are real output (every engine returns exactly the same
matrix), so a probe costs only the difference between engines.  After a round, sliced engines more than
``eliminate`` times the best drop out, and the whole-batch engine stays only while it is the cheapest (its
rounds cost whole batches); at most ``repeats`` rounds.  During the first probe the live rows go to the
interim engine: the whole-batch engine once its batch was timed (a live-size measure beats a short-slice
fit), else the cheapest fit so far; its calls of at least half the live size are timed too.

Each call is timed by ``min(wall, CPU)``: wall time is what the thread pool buys, and a serial call
preempted by other processes is charged only the CPU time it used, read on the calling thread's clock
(:func:`~matcher.filters.candidates.cpu_clock`).  A ``clock`` given to the matcher replaces both readings.
Sliced engines keep the minimum per slice size, the whole-batch engine the median of its batches, as its
spread is the load itself.

**Verification before a decision.**  The fit on short slices is a lower bound in practice (an engine's
working set outgrows the caches on longer calls), so unverified fits are scaled up by ``short_slices`` and a
sliced winner is timed on a call of (up to ``verify_rows`` rows of) the live size before it is adopted, side
by side in the same batch with the current choice and the sliced engines whose fit comes within ``close``
of it.  If that leaves it within ``close`` of the whole-batch engine, both are timed again on the same batch
(engines timed on different batches are timed on different data, e.g. on two phases of a drifting stream).
The whole-batch engine wins only on the median of ``whole_samples`` batches or on such a paired batch:
under load a single batch may catch both cores free.  The engine switches only when the winner is at least
``margin`` cheaper than the current choice (hysteresis).

**Re-probes** start after ``period`` tuples (doubling, up to ``max_backoff`` times, while re-probes confirm
the choice), when the stream's statistics (:mod:`matcher.filters.drift`) move by ``drift`` away from every
state measured while the choice held (a stream alternating between two distributions is probed once in
each), or when the choice's live batches cost ``slower`` times its measured cost on data of unchanged
statistics (the machine's load changed).  Clear losers (more than ``eliminate`` times the choice at their
last probe) are screened on one ``sample // 4`` slice (one batch for the whole-batch engine) and sit out
``1, 3, 7, ...`` re-probes unless the drop ratio moved by ``2 * drift``; a loser whose screen comes within
``eliminate`` of the best rejoins for a full round.  Every re-probe waits until the probes' cost so far,
plus the last probe's, is within ``budget`` of the time spent matching.

How well the choice does against the best engine: docs/FILTERS.md and ``python run.py bench filters``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from matcher.filters import cost_fit, machine_load
from matcher.filters.adaptive_settings import AdaptiveSettings
from matcher.filters.candidates import WARM_ROWS, WHOLE, Engines, call, cpu_clock, pool_loaded, pool_width
from matcher.filters.drift import COUNT_EVERY, State, StatisticsWindow, moved
from matcher.filters.grouped import ConjunctTable, row_count
from matcher.filters.multi import PARALLEL_MIN_TUPLES
from matcher.predicate import Predicate

PAIRED = -1  # the rows of a verification task: a live-size call (see AdaptiveMultiMatcher._verification)
MAX_STATES = 16  # confirmed states remembered: bounded, as the evaluations/tuple axis is unbounded

Task = tuple[str, int]
"""A probe call still to run: ``(engine, rows)``, rows 0 for a whole batch, ``PAIRED`` for a live-size call."""


class AdaptiveMultiMatcher:
    """The MultiMatcher interface over the engine the fitted cost model predicts cheapest.

    ``choice`` is the engine in use, ``history`` the ``(tuples seen, engine)`` choices, ``cost`` the last
    predicted seconds per tuple of each probed engine at the live batch size, ``probes`` the probes started,
    ``probed_tuples`` the rows matched by a probe on an engine other than the final choice of that probe
    (the probing overhead), ``probing`` whether a probe is under way.

    ``clock``, a callable returning seconds, replaces both the wall and the CPU clock the calls are timed
    on (by default ``time.perf_counter`` and :func:`~matcher.filters.candidates.cpu_clock`); ``pool_crowded``
    says whether the machine leaves the thread pool its cores (by default read from /proc).  Raises
    ValueError for bad settings (see :class:`AdaptiveSettings`).
    """

    def __init__(
        self,
        labelled: Sequence[tuple[str, Predicate]],
        settings: AdaptiveSettings | None = None,
        *,
        clock: Callable[[], float] | None = None,
        pool_crowded: Callable[[], bool] = machine_load.pool_crowded,
    ):
        self._labelled = tuple(labelled)
        self.labels = tuple(label for label, _ in self._labelled)
        self.settings = AdaptiveSettings() if settings is None else settings
        self.engines = Engines(self._labelled, self.settings.engines)
        self._wall = time.perf_counter if clock is None else clock
        self._cpu_clock = cpu_clock if clock is None else lambda name: clock
        self._pool_crowded = pool_crowded
        self.cost: dict[str, float] = {}
        self.choice = self.settings.engines[0]
        self.history: list[tuple[int, str]] = []
        self.tuples_seen = self.probed_tuples = self.probes = 0
        self._interim: str | None = None  # during the first probe: the cheapest engine of its rounds so far
        self._probe_rows: dict[str, int] = {}  # rows each engine matched in the current probe
        self._warm = False  # every engine has made its untimed first call
        self._rounds_left = 0
        self._verifying = False  # the probe's rounds are done: the winner is being timed on a live-size call
        self._tasks: list[Task] = []  # probe calls still to run
        self._timings: dict[str, dict[int, list[float]]] = {}
        self._paired: dict[str, float] = {}  # seconds per tuple of the current probe's verification calls
        self._pair: str | None = None  # the engine timed on the same batch as the whole-batch engine
        self._pair_rows = self.settings.sample  # rows of each sliced verification call (see _verification)
        self._batch = self.settings.sample  # rows per live sliced engine call, for the cost prediction
        self._width = self.settings.sample  # rows of the latest batch: a whole-batch probe needs more than chunk
        self._next_probe = 0
        self._backoff = 1
        self._reference: State | None = None  # the statistics after the last probe
        self._confirmed: list[State] = []  # the references measured while the choice held
        self._window = StatisticsWindow(self.settings.statistics_window)
        self._fits: dict[str, cost_fit.Fit] = {}  # per engine: its last fit
        self._screened: list[str] = []  # the clear losers timed on one slice in the current probe
        self._losers: dict[str, _Loser] = {}  # engines that lost by more than ``eliminate`` at their last probe
        self._last_drop = 0.0  # the drop ratio of the latest statistics window
        self._busy = 0.0  # seconds spent in match()
        self._live = [0.0, 0]  # seconds and rows of the statistics window's live batches on the choice
        self._baseline: float | None = None  # the choice's live cost per tuple, as measured (see _adopt)
        self._calls = 0  # batches watched
        self._probe_seconds = self._last_probe = 0.0  # probing overhead: all probes, the latest

    @property
    def probing(self) -> bool:
        """Is a probe under way (calls of its rounds or of its verification still to run)?"""
        return bool(self._tasks)

    # -- serialisation ----------------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain numpy arrays: the predicates, the settings and the choice (learned costs are not carried)."""
        arrays = ConjunctTable.of(self._labelled).to_arrays()
        arrays.update(self.settings.to_arrays())
        arrays["adaptive_choice"] = np.array([self.choice], dtype=object)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AdaptiveMultiMatcher:
        """Rebuild from :meth:`to_arrays`, keeping the choice: the copy probes afresh from it."""
        self = cls(ConjunctTable.from_arrays(arrays).labelled(), AdaptiveSettings.from_arrays(arrays))
        self.choice = str(arrays["adaptive_choice"][0])
        return self

    def __reduce__(self):
        return (AdaptiveMultiMatcher.from_arrays, (self.to_arrays(),))

    # -- matching ---------------------------------------------------------------------------------------
    def match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """``(n_tuples, n_labels)`` bool: the labels each tuple satisfies, on whichever engine runs it."""
        # every COUNT_EVERY-th batch on the choice alone is timed as the probes time (for _watch): the CPU
        # clock is a system call, and on a loaded machine every system call is a chance to be preempted
        sampled = self._calls % COUNT_EVERY == 0 and bool(self.history) and not self._tasks
        began, probes = self._wall(), self.probes
        clock = self._cpu_clock(self.choice)
        began_cpu = clock() if sampled else 0.0
        out = self._match(columns)
        wall = self._wall() - began
        self._busy += wall
        if sampled and probes == self.probes and not self._tasks and len(out) >= self.settings.sample:
            self._live[0] += min(wall, clock() - began_cpu)
            self._live[1] += len(out)
        return out

    def _match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = row_count(columns)
        if n < self.settings.sample:
            # a small batch goes straight to the current choice: a probe slice cut to a few rows would time
            # mostly the engines' per-call cost, and the statistics wait for batches that can be probed
            self.tuples_seen += n
            return self.engines[self.choice].match(columns)
        self._batch = min(n, self.settings.chunk)
        self._width = n
        if not self._warm:
            self._warm_up(columns)
        if not self._tasks and self.tuples_seen >= self._next_probe and self._affordable():
            self._start_probe()
        live = self._interim or self.choice
        if not self._tasks and (live == WHOLE or n <= self.settings.chunk):
            # one engine call covers the batch: return its matrix (no preallocated one to fill)
            out = self._call(live, columns)
        else:
            out = np.zeros((n, len(self.labels)), dtype=bool)
            start = self._run_tasks(columns, out)
            self._run_live(columns, out, start)
        self.tuples_seen += n
        self._watch(out)
        return out

    def _warm_up(self, columns: Mapping[str, np.ndarray]) -> None:
        """One untimed call per engine before any timing: a process's first call of a numba kernel reads it
        from numba's cache, and an engine's first call touches its freshly built tables (without this, the
        short probe slice of ASC cost as much as its long one and its fitted cost per tuple was 0)."""
        self._warm = True
        for engine in {id(e): e for e in self.engines.values()}.values():
            getattr(engine, "prepare", lambda: None)()  # a lazily built table is built before any timing
            engine.match(_slice(columns, 0, WARM_ROWS))

    def _run_tasks(self, columns: Mapping[str, np.ndarray], out: np.ndarray) -> int:
        """Run the probe's calls that fit in this batch, from its head; returns the first row left for the live
        engine.  Probe slices are never split across batches (the first always fits: slices are at most
        ``sample`` rows); a whole batch is timed only from a batch's start."""
        n, start = len(out), 0
        while self._tasks:
            name, rows = self._tasks[0]
            if rows == 0:
                stop = self._whole_task(name, columns, out, start)
            elif rows == PAIRED:
                stop = self._paired_task(name, columns, out, start)
            elif n - start >= rows:
                self._tasks.pop(0)
                self._timed(name, _slice(columns, start, start + rows), out[start : start + rows])
                stop = start + rows
            else:
                stop = None
            if stop is None:
                break
            start = stop
            if not self._tasks and self._round_done():
                self._decide()
        return start

    def _whole_task(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray, start: int) -> int | None:
        """A whole batch on the whole-batch engine: the first row after it, or None to wait for a batch start."""
        n = len(out)
        if start > 0:
            return None
        if not pool_width(n, self.settings.chunk):
            self._tasks.pop(0)  # this batch would time the sliced engine again: not timed this round
            return start
        if n >= PARALLEL_MIN_TUPLES and not pool_loaded(self.engines[name]):
            # the first pool call of the process loads the pool: matched untimed, the task stays queued (and
            # waits for the next batch's start)
            self.engines[name].match(columns, out=out)
            self._probe_rows[name] = self._probe_rows.get(name, 0) + n
            return n
        self._tasks.pop(0)
        self._timed(name, columns, out)
        return n

    def _paired_task(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray, start: int) -> int | None:
        """A verification call (see :meth:`_verification`): live-size calls of the sliced engines side by side
        in a batch, then the whole-batch engine on the same batch.  The first row after it, or None to wait
        for the next batch."""
        n = len(out)
        if name == WHOLE:
            self._tasks.pop(0)
            if not pool_width(n, self.settings.chunk):
                return start
            # over the sliced engines' rows too: every engine sets the same entries
            self._timed(name, columns, out, paired=True)
            return n
        if start > 0 and n - start < self._pair_rows:
            return None
        self._tasks.pop(0)
        stop = start + min(n, self._pair_rows)
        self._timed(name, _slice(columns, start, stop), out[start:stop], paired=True)
        return stop

    def _run_live(self, columns: Mapping[str, np.ndarray], out: np.ndarray, start: int) -> None:
        """Rows ``start:`` of the batch on the live engine: the choice, or the interim during the first probe."""
        n = len(out)
        live = self._interim or self.choice
        engine = self.engines[live]
        if live == WHOLE and 0 < start < n and n - start < PARALLEL_MIN_TUPLES <= n:
            # probe slices took the head of the batch: the rest alone would run the serial kernel, so it
            # runs on the thread pool all the same (as the whole batch would have)
            engine.match(_slice(columns, start, n), parallel=True, out=out[start:])
            start = n
        width = n if live == WHOLE else self.settings.chunk
        for begin in range(start, n, width):
            stop = min(n, begin + width)
            part = _slice(columns, begin, stop)
            if self._interim is not None and stop - begin >= (n if live == WHOLE else self._batch // 2):
                # during the first probe the live calls on the interim engine are timed too: calls of (about) the
                # live size, which the short probe slices cannot predict (see _verification), at no extra cost
                self._timed(live, part, out[begin:stop])
            else:
                self._call(live, part, out[begin:stop])

    def _timed(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray, paired: bool = False) -> None:
        """Match ``columns`` into ``out`` (rows of the batch's matrix) on engine ``name``, timed for the probe."""
        n = len(out)
        clock = self._cpu_clock(name)
        began, began_cpu = self._wall(), clock()
        self._call(name, columns, out)
        # the call's cost: its wall time, but never more than the CPU time spent in it (see the module
        # docstring: a serial call preempted by the machine's load is charged its CPU time)
        elapsed = min(self._wall() - began, clock() - began_cpu)
        self._timings[name].setdefault(n, []).append(elapsed)
        if paired:
            self._paired[name] = elapsed / n
        self._probe_rows[name] = self._probe_rows.get(name, 0) + n

    def _call(self, name: str, columns: Mapping[str, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        return call(name, self.engines[name], columns, out)

    # -- probing ---------------------------------------------------------------------------------------
    def _start_probe(self) -> None:
        """Queue the first round of a new probe: every contender, plus one screening slice per clear loser.

        The whole-batch engine is timed only from a batch wider than ``chunk`` (narrower, it is the sliced
        engine), and only while the machine has a core for each of its pool's threads (``pool_crowded``):
        on a crowded machine its probe would time the scheduler, and if it is the current choice, its cost
        measured on a quieter machine no longer holds.  With nothing else to time, the probe waits another
        ``period``.
        """
        whole = WHOLE in self.engines and pool_width(self._width, self.settings.chunk)
        if whole and len(self.engines) > 1 and self._pool_crowded():
            whole = False
            if self.choice == WHOLE:
                self.cost.pop(WHOLE, None)  # the choice is re-made among the serial engines (see _adopt)
        timeable = [name for name in self.engines if name != WHOLE or whole]
        if self.history and self.choice not in timeable:
            # the engines lost against a choice that cannot run now: each gets a full round
            self._losers = {}
        if not timeable:
            self._next_probe = self.tuples_seen + self.settings.period
            return
        self.probes += 1
        self._timings = {}
        self._paired = {}
        self._pair = None
        self._probe_rows = {}
        self._rounds_left = self.settings.repeats
        self._screened = []
        if not self.cost:
            self._queue(timeable)
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
        self._queue(contenders)
        # a clear loser costs one slice, read against its last fit (see cost_fit.predict); the whole-batch engine
        # one batch, its only measure
        screens = [(name, 0 if name == WHOLE else self._quarter()) for name in screened]
        self._tasks = sorted(screens + self._tasks, key=lambda task: task[1] != 0)  # whole batches first
        self._timings.update({name: {} for name in screened})
        self._screened = screened

    def _quarter(self) -> int:
        """Rows of the short probe slice."""
        return max(WARM_ROWS, self.settings.sample // 4)

    def _queue(self, names: list[str]) -> None:
        """Queue a round: the whole-batch engine's batch first, then each sliced engine's two slices."""
        for name in names:
            self._timings.setdefault(name, {})
        # rotate the engine order each round so that no engine always runs right after another
        shift = (self.settings.repeats - self._rounds_left) % len(names)
        names = names[shift:] + names[:shift]
        whole = [(name, 0) for name in names if name == WHOLE]  # first: it needs the start of a batch
        sizes = (self._quarter(), self.settings.sample)
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
        factor = max(self.settings.eliminate, 1.0)
        readmitted = [name for name in self._screened if predicted.get(name, np.inf) <= factor * best]
        # the whole-batch engine costs a whole batch per round: it stays only while it is the cheapest (under
        # load its thread pool costs several times as much, and the rounds would be paid at that price)
        contenders = [
            name
            for name in predicted
            if name not in self._screened and predicted[name] <= (1.0 if name == WHOLE else factor) * best
        ]
        if not self.history:
            # the interim runs live rows: an engine measured on live-size calls (the whole-batch engine's batch)
            # beats a fit from short slices, which under-predicts
            candidates = [WHOLE] if WHOLE in predicted else contenders
            self._interim = min(candidates, key=lambda e: (predicted[e], e))
        if readmitted:
            self._screened = [name for name in self._screened if name not in readmitted]
            self._rounds_left = max(self._rounds_left, 1)
        elif self._rounds_left == 0 or len(contenders) == 1:
            return True
        self._queue(contenders + readmitted)
        return False

    def _predict(self) -> dict[str, float]:
        """Seconds per tuple of each engine timed in this probe, at the live batch size (see cost_fit.predict)."""
        predicted, fits = cost_fit.predict(self._timings, self._fits, self._batch, WHOLE, self.settings.short_slices)
        self._fits.update(fits)
        return predicted

    def _decide(self) -> None:
        """After the rounds: queue the verification calls the decision still needs, or adopt the winner."""
        self._tasks = []
        predicted = self._predict()
        predicted.update(self._paired)
        fitted = [name for name in predicted if name not in self._screened]
        best = min(fitted, key=lambda e: (predicted[e], e))
        self._tasks = self._verification(predicted, fitted, best)
        self._verifying = bool(self._tasks)
        if not self._tasks:
            self._adopt(predicted, best)

    def _verification(self, predicted: dict[str, float], fitted: list[str], best: str) -> list[Task]:
        """The calls that must be timed before ``best`` may be adopted (none: adopt it now).

        A sliced winner is verified on one call of the live size: the fit on short slices is a lower bound in
        practice.  The sliced engines whose fit comes within ``close`` of it, and the current choice, are timed
        beside it in the same batch: under load, fits from short slices may rank two serial engines the other
        way round from their live calls.  When that leaves the winner within ``close`` of the whole-batch
        engine, both are timed again on the same batch: engines timed on different batches are timed on
        different data.  A whole-batch winner needs ``whole_samples`` batches (see :meth:`_whole_unsettled`).
        """
        s = self.settings
        if best != WHOLE and len(fitted) > 1:
            incumbent = self.choice if self.history else None
            close = min(s.close, max(s.eliminate, 1.0))  # never one that the rounds eliminated
            sliced = [
                name
                for name in fitted
                if name != WHOLE and (name in (best, incumbent) or predicted[name] <= close * predicted[best])
            ]
            pending = [name for name in sliced if name not in self._paired]
            if pending:
                # side by side: a live-size call each if the batch holds them all, else a share of it each down to
                # half the live size (two engines per batch); calls the size of the probe slices would tell
                # nothing new, so batches that small take one live-size call each
                rows = min(self._batch, max(self._width // len(pending), self._batch // 2), s.verify_rows)
                self._pair_rows = rows if rows >= 2 * s.sample else self._batch
                return [(name, PAIRED) for name in sorted(pending, key=lambda e: (predicted[e], e))]
            if WHOLE in predicted and self._pair != best and predicted[WHOLE] <= s.close * predicted[best]:
                self._pair = best
                self._pair_rows = min(self._batch, s.verify_rows)
                return [(best, PAIRED), (WHOLE, PAIRED)]
        elif best == WHOLE and len(fitted) > 1 and self._whole_unsettled():
            return [(WHOLE, 0)]
        return []

    def _adopt(self, predicted: dict[str, float], best: str) -> None:
        """End the probe: switch to ``best`` if it beats the choice by ``margin``, update the back-offs, and
        schedule the next probe."""
        s = self.settings
        self._interim = None
        # engines eliminated after an early round keep their (higher) prediction from that round
        self.cost.update(predicted)
        current = self.cost.get(self.choice, np.inf) if self.history else np.inf
        if not self.history or (best != self.choice and predicted[best] < (1 - s.margin) * current):
            self.choice = best
            self.history.append((self.tuples_seen, best))
            self._backoff = 1
            self._confirmed = []
            for state in self._losers.values():
                state.skips = 0  # they lost against the previous choice: screen them against the new one
        else:
            self._backoff = min(s.max_backoff, self._backoff * 2)
        for name, cost in predicted.items():
            if name != self.choice and cost > s.eliminate * self.cost[self.choice]:
                previous = self._losers.get(name)
                backoff = 1 if previous is None else min(s.max_backoff, previous.backoff * 2)
                self._losers[name] = _Loser(backoff)
            else:
                self._losers.pop(name, None)
        # the live cost the choice is held to (see _watch): measured on calls of the live size, or else (a fit
        # on short slices) taken from its first statistics window
        measured = self.choice == WHOLE or self.choice in self._paired
        self._baseline = predicted[self.choice] if measured and self.choice in predicted else None
        self.probed_tuples += sum(rows for name, rows in self._probe_rows.items() if name != self.choice)
        self._last_probe = cost_fit.probe_overhead(self._timings, self.choice, self.cost[self.choice])
        self._probe_seconds += self._last_probe
        self._next_probe = self.tuples_seen + s.period * self._backoff
        self._reference = None
        self._window.reset()
        self._live = [0.0, 0]

    def _whole_unsettled(self) -> bool:
        """Must the whole-batch engine be timed on more batches before it may win?  It wins on the median of
        at least ``whole_samples`` batches, or on a batch it shared with the sliced runner-up: under load one
        batch may catch both cores free."""
        samples = sum(len(times) for times in self._timings[WHOLE].values())
        return (
            WHOLE not in self._paired
            and pool_width(self._width, self.settings.chunk)
            and samples < self.settings.whole_samples
        )

    def _affordable(self) -> bool:
        """May a re-probe start?  Only while the probes' cost stays within ``budget`` of the time spent matching,
        counting the next one at the cost of the last (the first probe always runs).  A stream whose statistics
        keep moving (drift phases, or an ASC choice re-learning its own order) would otherwise re-probe at
        every move, and a probe's losing engines cost up to a few batches."""
        if not self.history:
            return True
        return self._probe_seconds + self._last_probe <= self.settings.budget * self._busy

    def _drop_moved_since(self, loser: _Loser) -> bool:
        """Did the drop ratio move by ``2 * drift`` since the loser's last measurement (then screen it)?"""
        return (
            loser.drop is not None
            and self._reference is not None
            and (abs(self._last_drop - loser.drop) >= 2 * self.settings.drift)
        )

    # -- drift ------------------------------------------------------------------------------------------
    def _watch(self, out: np.ndarray) -> None:
        """Accumulate the exact statistics of the chosen engine; start a re-probe when they drifted."""
        if self._tasks:
            return
        evaluations = getattr(self.engines[self.choice], "evaluations", 0)
        self._calls += 1
        now = self._window.add(out, evaluations, count=self._calls % COUNT_EVERY == 0)
        if now is None:
            return
        self._last_drop = now[0]
        seconds, rows = self._live
        self._live = [0.0, 0]
        live = seconds / rows if rows else None
        drift = self.settings.drift
        if self._reference is None:
            self._reference = now
            if self._baseline is None:
                self._baseline = live  # the choice's cost was a fit on short slices: its live cost instead
            for loser in self._losers.values():
                loser.drop = now[0] if loser.drop is None else loser.drop
            self._confirmed = [*self._confirmed, now][-MAX_STATES:]
            return
        if all(moved(now, state, drift) for state in self._confirmed):
            self._next_probe = self.tuples_seen
        slower = live and self._baseline and live > self.settings.slower * self._baseline
        if slower and not moved(now, self._reference, drift):
            # the choice runs slower than it was measured on data of the same statistics: the machine's load
            # changed (the thread pool's cost rises steeply with the load, the serial kernels' does not)
            self._next_probe = self.tuples_seen


class _Loser:
    """Back-off state of an engine that lost by more than ``eliminate``: it sits out ``skips`` re-probes
    (``backoff - 1`` after each confirmed loss, ``backoff`` doubling up to ``max_backoff``) unless the drop
    ratio moved by ``2 * drift`` from ``drop``, measured in the first statistics window after its loss."""

    def __init__(self, backoff: int):
        self.backoff, self.skips, self.drop = backoff, backoff - 1, None


def _slice(columns: Mapping[str, np.ndarray], start: int, stop: int) -> Mapping[str, np.ndarray]:
    """Rows ``start:stop`` of every column: the columns themselves when that is all of them."""
    if start == 0 and stop >= row_count(columns):
        return columns
    return {name: values[start:stop] for name, values in columns.items()}
