"""What the adaptive matcher watches between probes: the statistics of the stream under its current choice.

A state is ``(drop ratio, evaluations per tuple)``: the fraction of tuples no label wants (what the early
drop of ASC and the grouped filter feeds on) and the chosen engine's own count of evaluations per tuple
(ASCs or grouped filters; 0 for engines that do not count them).  Both are exact counts, not times.
"""

from __future__ import annotations

import numpy as np

State = tuple[float, float]

DROP_COUNTED = 256  # the drop ratio is counted on this many evenly spaced output rows of a batch ...
COUNT_EVERY = 4  # ... of every 4th batch: ``any`` over the rows of a fresh output matrix is not free


class StatisticsWindow:
    """The state of the stream over windows of at least ``size`` tuples."""

    def __init__(self, size: int):
        self.size = size
        self.reset()

    def reset(self) -> None:
        """Start a new window."""
        self.tuples = self.counted = self.dropped = 0
        self._evaluations_before = 0

    def add(self, out: np.ndarray, evaluations: int, count: bool) -> State | None:
        """Add a batch's output matrix; ``evaluations`` is the engine's running total after it.  Its drop ratio
        is counted when ``count`` is true, and always in a window's first batch.  Returns the window's state
        when the window is full (and starts the next one), else None."""
        if self.tuples == 0:
            self._evaluations_before = evaluations
        self.tuples += len(out)
        if count or self.counted == 0:
            counted = out[:: max(1, len(out) // DROP_COUNTED)]
            self.counted += len(counted)
            self.dropped += len(counted) - int(np.count_nonzero(counted.any(axis=1)))
        if self.tuples < self.size:
            return None
        state = (self.dropped / self.counted, (evaluations - self._evaluations_before) / self.tuples)
        self.reset()
        return state


def moved(now: State, state: State, drift: float) -> bool:
    """Did the stream move from ``state`` to ``now``: the drop ratio by ``drift`` or more, or the evaluations
    per tuple by that fraction of their value?"""
    drop_moved = abs(now[0] - state[0]) >= drift
    return drop_moved or (state[1] > 0 and abs(now[1] / state[1] - 1) >= drift)
