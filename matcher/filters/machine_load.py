"""Is the machine too busy for the region-bitmap engine's thread pool?  Read from Linux's /proc.

The thread pool pays off only while its workers find idle cores: when other processes keep them busy, a
worker waits for a core, and a short pool call can take over a hundred times its time on the idle machine,
a whole batch several times a serial engine's.  A probe cannot afford to find this out by timing whole
batches on the pool, so the adaptive matcher asks :func:`pool_crowded` first and leaves the pool out.

Importing this module takes the first reading of /proc/stat: the first interval of :class:`OtherLoad`
starts then, and a super-peer's first probe comes well after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

Ticks = tuple[int, int, int]
"""``(total, idle, ours)`` CPU time in clock ticks: the machine's, its idle part, this process's."""


def pool_crowded() -> bool:
    """Do other processes keep busy the cores the thread pool's workers would need?

    Read on Linux (False where /proc cannot be read): the cores other processes kept busy since the
    previous reading at least 100 ms earlier (:class:`OtherLoad`), or before the process has such an
    interval, the count of runnable threads outside this process (:func:`others_running`); see
    :func:`crowded`.
    """
    try:
        from numba import get_num_threads

        spare = (os.cpu_count() or 1) - get_num_threads()
        return crowded(spare, LOAD.read(), others_running)
    except (OSError, ValueError, IndexError, ImportError, AttributeError):  # AttributeError: no os.sysconf
        return False


def crowded(spare: int, others: float | None, running: Callable[[], int]) -> bool:
    """The decision of :func:`pool_crowded`, given the cores the pool leaves ``spare``.

    With ``others``, the cores other processes kept busy over the latest interval: crowded above half a core
    more than ``spare``.  Without, crowded when three readings of ``running`` (runnable threads of other
    processes) in a row leave no core for a worker: a single reading catches a daemon's burst now and then
    on an idle machine.  Readings stop at the first that leaves a core.
    """
    if others is not None:
        return others > spare + 0.5
    return all(running() > spare for _ in range(3))


class OtherLoad:
    """The cores other processes kept busy over an interval: /proc/stat's CPU time (steal included) less the
    idle time and this process's own (all its threads, the pool's workers among them: ``os.times``)."""

    MIN_TICKS_PER_CPU = 10  # an interval of at least 100 ms at the usual 100 ticks per second

    def __init__(self):
        self._last: Ticks | None = None  # at the interval's start
        self.cores: float | None = None  # over the latest interval long enough

    def read(self) -> float | None:
        """Take a reading; the cores over the latest interval long enough, None before the first."""
        return self.update(read_ticks(), os.cpu_count() or 1)

    def update(self, now: Ticks, cpus: int) -> float | None:
        """:meth:`read` with the reading ``now`` of a machine of ``cpus`` CPUs."""
        if self._last is None:
            self._last = now
        elif now[0] - self._last[0] >= self.MIN_TICKS_PER_CPU * cpus:
            self.cores = busy_cores(self._last, now, cpus)
            self._last = now
        return self.cores


def read_ticks() -> Ticks:
    """The machine's CPU time, its idle part and this process's, in clock ticks (raises OSError without /proc)."""
    with open("/proc/stat", "rb") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    times = os.times()  # this process's CPU time, all threads, counted in the same clock ticks
    ours = round((times.user + times.system) * os.sysconf("SC_CLK_TCK"))
    return sum(ticks), ticks[3] + ticks[4], ours


def busy_cores(start: Ticks, stop: Ticks, cpus: int) -> float:
    """Cores kept busy by other processes between two ``(total, idle, ours)`` tick readings."""
    total, idle, ours = (b - a for a, b in zip(start, stop, strict=True))
    return max(total - idle - ours, 0) / max(total, 1) * cpus


def others_running() -> int:
    """Runnable threads on the machine outside this process (raises OSError/ValueError without /proc)."""
    with open("/proc/stat", "rb") as stat:
        running = next((int(line.split()[1]) for line in stat if line.startswith(b"procs_running")), None)
    if running is None:
        raise ValueError("/proc/stat has no procs_running")
    if running <= 1:
        return 0  # the calling thread alone (reading this process's threads costs more than /proc/stat)
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


LOAD = OtherLoad()
"""The process's reading of the machine's load, shared by every adaptive matcher in it."""
with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
    LOAD.read()  # the first interval starts at import: a super-peer's first probe comes well after it
