"""Link buffers: the tuples waiting for the wire at a link direction with a finite buffer, and the state of
all link queues between two windows.

A direction with a buffer of ``B`` bytes admits a tuple arriving at ``a`` when its bytes and those of the
tuples admitted before it that have not started on the wire by ``a`` fit ``B`` (tail drop otherwise).  The
waiting tuples of each such direction are kept in a *ring*: their start times and bytes, in start order,
``ring_count`` of them from ``ring_head``.  :func:`admit` and :func:`enqueue` are the compiled steps the
window solve (network/queues.py) takes per tuple; :class:`QueueState` is what a run carries from window to
window, and what the Spark engine carries from chunk to chunk (docs/SPARK.md).  A failure needs no more
state: it empties a queue by what the solve leaves in it (the wire free from the failure, the lost tuples
out of the buffer by then), so the state after it says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from network.queues import Pending

NEVER = np.iinfo(np.int64).max  # a tick that never comes (a failure never recovered, a link never used)


@dataclass(frozen=True)
class QueueState:
    """Where the link queues stand between two windows: when each link direction is next free (``busy``),
    and per direction with a buffer (``ring_of[k] >= 0``: its ring) the tuples admitted but not yet on the
    wire, as start times and bytes in start order (``ring_count`` of them from ``ring_head``,
    ``ring_waiting`` bytes)."""

    busy: np.ndarray  # ticks (network/linkrule.py), as are the ring's start times; bytes are integers
    ring_of: np.ndarray
    ring_start: np.ndarray
    ring_bytes: np.ndarray
    ring_head: np.ndarray
    ring_count: np.ndarray
    ring_waiting: np.ndarray
    pending: Pending | None = None  # the copies held back at the last window's horizon (network/queues.py)

    def waiting(self, ring: int) -> tuple[np.ndarray, np.ndarray]:
        """Ring ``ring``'s waiting tuples (start times, bytes), oldest first."""
        at = (self.ring_head[ring] + np.arange(self.ring_count[ring])) % self.ring_start.shape[1]
        return self.ring_start[ring, at], self.ring_bytes[ring, at]

    def same_at(self, other: QueueState) -> np.ndarray:
        """Per link direction, whether both states are the same there: next free at the same time, and
        the same tuples waiting in its buffer."""
        same = self.busy == other.busy
        for k, ring in enumerate(self.ring_of.tolist()):
            if ring >= 0 and same[k]:
                (a, x), (b, y) = self.waiting(ring), other.waiting(ring)
                same[k] = self.ring_waiting[ring] == other.ring_waiting[ring] and (
                    np.array_equal(a, b) and np.array_equal(x, y)
                )
        return same

    def agrees(self, truth: QueueState, first_arrival: np.ndarray) -> bool:
        """Whether a run started from this state, whose earliest arrival at each link (in the first window
        using it) was ``first_arrival``, is the run from ``truth``: link by link, both states are the
        same, or both are free by that arrival.  A link free by then has also put every tuple of its
        buffer on the wire by then (each one started before the link's last departure), so its first
        arrival finds an empty buffer and an idle link under both states (docs/SPARK.md).  The copies held
        back at the horizon must be the very same too."""
        free = (self.busy <= first_arrival) & (truth.busy <= first_arrival)
        held = self.pending is truth.pending or (self.pending is not None and self.pending.same(truth.pending))
        return held and bool(np.all(free | self.same_at(truth)))

    def widened(self, width: int) -> QueueState:
        """The same state with rings of ``width`` places (at least each one's waiting tuples), each ring's
        oldest tuple first."""
        waiting = [self.waiting(ring) for ring in range(len(self.ring_count))]
        return self._of_rings(self.busy, waiting, self.pending, width)

    def _of_rings(
        self, busy: np.ndarray, waiting: list[tuple[np.ndarray, np.ndarray]], pending: Pending | None, width: int = 1
    ) -> QueueState:
        width = max([len(starts) for starts, _ in waiting] + [width])
        ring_start = np.zeros((len(waiting), width), np.int64)
        ring_bytes = np.zeros((len(waiting), width), np.int64)
        for ring, (starts, sizes) in enumerate(waiting):
            ring_start[ring, : len(starts)], ring_bytes[ring, : len(sizes)] = starts, sizes
        return QueueState(
            np.array(busy, dtype=np.int64),
            self.ring_of.copy(),
            ring_start,
            ring_bytes,
            np.zeros(len(waiting), np.int64),
            np.array([len(starts) for starts, _ in waiting], np.int64),
            np.array([sizes.sum() for _, sizes in waiting], np.int64),
            pending,
        )

    def then(self, end: QueueState, first_arrival: np.ndarray) -> QueueState:
        """The state after a run that started from this one (or one it :meth:`agrees` with) and ended in
        ``end``: ``end``'s, except at the links the run never used (``first_arrival`` :data:`NEVER`),
        which keep this state's."""
        unused = first_arrival == NEVER
        waiting = [
            (self if unused[k] else end).waiting(ring) for k, ring in enumerate(self.ring_of.tolist()) if ring >= 0
        ]
        return self._of_rings(np.where(unused, self.busy, end.busy), waiting, end.pending)


@njit(cache=True, inline="always")
def admit(a, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting, buffer):
    """Tail drop at a link direction with a buffer (ring ``ring``): whether a tuple of ``w`` bytes arriving at
    ``a`` finds room, counting the bytes of the tuples admitted before it that have not started their
    transmission by then (``ring_start`` ascending from ``ring_head``)."""
    cap = ring_start.shape[1]
    while ring_count[ring] > 0 and ring_start[ring, ring_head[ring]] <= a:
        ring_waiting[ring] -= ring_bytes[ring, ring_head[ring]]
        ring_head[ring] = (ring_head[ring] + 1) % cap
        ring_count[ring] -= 1
    return ring_waiting[ring] + w <= buffer


@njit(cache=True, inline="always")
def enqueue(start, w, ring, ring_start, ring_bytes, ring_head, ring_count, ring_waiting):
    """An admitted tuple joins the ring of its link: it waits for the wire until ``start`` (kept in start
    order; a later round's tuple, served in a gap, may start before tuples queued earlier).  Returns False,
    changing nothing, when the ring is full (the caller widens the rings and solves the window again)."""
    cap = ring_start.shape[1]
    if ring_count[ring] == cap:
        return False
    at = (ring_head[ring] + ring_count[ring]) % cap
    ring_start[ring, at], ring_bytes[ring, at] = start, w
    ring_count[ring] += 1
    ring_waiting[ring] += w
    k = ring_count[ring] - 1
    while k > 0:  # insertion sort from the back: nothing moves for a FIFO's tuples
        here, before = (ring_head[ring] + k) % cap, (ring_head[ring] + k - 1) % cap
        if ring_start[ring, before] <= ring_start[ring, here]:
            break
        ring_start[ring, before], ring_start[ring, here] = ring_start[ring, here], ring_start[ring, before]
        ring_bytes[ring, before], ring_bytes[ring, here] = ring_bytes[ring, here], ring_bytes[ring, before]
        k -= 1
    return True
