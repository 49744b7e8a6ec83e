"""The engines the adaptive matcher chooses between: their names, how each is built, called and timed.

* ``multi``: the region-bitmap matcher (:class:`MultiMatcher`) on its serial kernel, a whole batch per call;
* ``multi-batch`` (``WHOLE``): the same compiled matcher called on whole batches, on numba's thread pool from
  ``PARALLEL_MIN_TUPLES`` rows;
* ``grouped``: the CACQ grouped filter (Madden et al.);
* ``asc``: Lee & Lee's attribute selection constructs with their macro order (``ASC_SETTINGS``).

Every engine returns exactly the same matrix; they differ only in what they cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence

import numpy as np

from matcher.filters.asc import ASCMatcher
from matcher.filters.grouped import GroupedFilter
from matcher.filters.multi import PARALLEL_MIN_TUPLES, MultiMatcher
from matcher.predicate import Predicate

WHOLE = "multi-batch"  # the region-bitmap engine called on whole batches (its thread pool from 8,192 rows)
ENGINES = ("multi", WHOLE, "grouped", "asc")
WARM_ROWS = 8  # rows of an engine's untimed first call, which loads its compiled kernels before any timing

ASC_SETTINGS = {"ordering": "macro", "period": 80_000, "threshold": 0.1}
"""The ASC candidate: the macro-sequence, re-learned when the drop ratio or the ASCs per tuple moved by 10 %
over a period of 80,000 tuples.  The papers' setting (every 10,000 tuples, mu = 0) spends more on
re-learning (the subset DP over its monitor sample) than on evaluating, and the probes time the kernel
alone, so they would not see it."""

SCAN_FIRST_TUPLES = 256
"""A region-bitmap candidate matches its first tuples by the broadcast scan and builds its bitmap only after
them: a matcher that lives for a handful of tuples never pays for a bitmap that costs more than scanning
them."""


def make_engine(name: str, labelled: Sequence[tuple[str, Predicate]], built: Mapping[str, object]):
    """A new engine ``name`` over ``labelled``; the two widths of the region-bitmap engine share what
    ``built`` already holds of either."""
    if name in ("multi", WHOLE):
        # one compiled matcher serves both widths: they differ only in how the batch is cut
        return built.get("multi", built.get(WHOLE)) or MultiMatcher(labelled, scan_first=SCAN_FIRST_TUPLES)
    if name == "grouped":
        return GroupedFilter(labelled)
    return ASCMatcher(labelled, **ASC_SETTINGS)


class Engines(MutableMapping):
    """The candidate engines by name, each built on first use: until a batch is large enough to probe, an
    operator only ever calls its first choice, and building the others' tables is most of its set-up (an
    operator over a few hundred boxes, rebuilt whenever a subscription below it comes or goes).

    Setting a name replaces its engine (a wrapper that records or scripts the calls, in tests)."""

    def __init__(self, labelled: Sequence[tuple[str, Predicate]], names: Sequence[str]):
        self._labelled = labelled
        self._names = list(names)
        self._built: dict[str, object] = {}  # what each name holds (made, or set by the caller)
        self._made: dict[str, object] = {}  # what make_engine built, so the two widths share one compiled matcher

    def __getitem__(self, name: str):
        engine = self._built.get(name)
        if engine is None:
            if name not in self._names:
                raise KeyError(name)
            engine = self._built[name] = self._made[name] = make_engine(name, self._labelled, self._made)
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


def call(name: str, engine, columns: Mapping[str, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Match on engine ``name``: ``multi`` always on the serial kernel, the whole-batch engine on its pool
    from ``PARALLEL_MIN_TUPLES`` rows.  A serial engine matches a whole batch in one call: cut into 4,096-row
    calls, ASC cost 8 % more than on whole 8,192-row batches (its per-call work, the slices' views and the
    batch's matrix)."""
    if name == "multi":
        return engine.match(columns, parallel=False, out=out)
    return engine.match(columns, out=out)


def pool_width(n: int, chunk: int) -> bool:
    """Does the whole-batch engine differ from the serial ``multi`` on a batch of ``n`` rows?"""
    return n > chunk or n >= PARALLEL_MIN_TUPLES


def pool_loaded(engine) -> bool:
    """Has this process run the region-bitmap engine's thread-pool kernel yet?  Its first call loads it
    (numba's cache, the worker threads): that batch is matched untimed, as its time would be the loading."""
    if getattr(engine, "strategy", "") != "bitmap":
        return True  # the numpy scan has no thread pool to load
    from matcher.filters._filter_kernels import dense_kernel

    return bool(dense_kernel.signatures)


def cpu_clock(name: str) -> Callable[[], float]:
    """The CPU clock a call of engine ``name`` is read on: the process's for the whole-batch engine (its
    thread pool's workers work for it), the calling thread's for the serial engines.  The process's clock
    adds the other threads' time in steps of up to a scheduler tick, so a short serial call right after a
    thread-pool call could read several times its own CPU time on it, enough to make the adaptive matcher
    choose a slower engine."""
    return time.process_time if name == WHOLE else time.thread_time
