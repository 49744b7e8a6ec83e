"""Is the machine too busy for the thread pool: the decision on given readings, and the readings of /proc."""

import subprocess
import sys
import time

import pytest

from matcher.filters import machine_load
from matcher.filters.machine_load import OtherLoad, busy_cores, crowded, others_running, pool_crowded


@pytest.mark.parametrize(
    ("readings", "expected"), [([0], False), ([1, 0], False), ([1, 1, 1], True), ([2, 2, 2], True)]
)
def test_without_an_interval_the_pool_is_crowded_when_three_readings_leave_it_no_core(readings, expected):
    left = list(readings)
    assert crowded(0, None, lambda: left.pop(0)) is expected
    assert not left  # readings stop at the first that leaves a core


@pytest.mark.parametrize(("others", "expected"), [(0.0, False), (0.4, False), (0.6, True), (2.0, True)])
def test_the_pool_is_crowded_when_other_processes_kept_its_cores_busy(others, expected):
    def unread():
        raise AssertionError("runnable threads are not read once an interval is measured")

    assert crowded(0, others, unread) is expected
    assert crowded(1, others, unread) is (others > 1.5)  # a core the pool leaves spare absorbs one more


def test_busy_cores_leave_out_this_process_and_idle_time():
    # 2 CPUs over 1 s (200 ticks): 50 idle, 100 this process's (its pool on both cores half the time): others 50
    assert busy_cores((1_000, 400, 10), (1_200, 450, 110), 2) == pytest.approx(0.5)
    assert busy_cores((0, 0, 0), (200, 0, 200), 2) == 0.0  # all of it ours
    assert busy_cores((0, 0, 0), (200, 0, 0), 2) == pytest.approx(2.0)


def test_the_load_is_measured_over_intervals_of_at_least_ten_ticks_per_cpu():
    load = OtherLoad()
    assert load.update((1_000, 500, 0), 2) is None  # the first reading starts the first interval
    assert load.update((1_019, 500, 0), 2) is None  # 19 ticks: too short
    assert load.update((1_020, 510, 0), 2) == pytest.approx(1.0)  # 20 ticks, 10 idle: one core busy
    assert load.update((1_030, 530, 0), 2) == pytest.approx(1.0)  # too short again: the latest interval's
    assert load.update((1_040, 540, 20), 2) == 0.0  # the next interval started at the last one's end


def test_where_proc_cannot_be_read_the_pool_is_not_crowded(monkeypatch):
    def unreadable():
        raise OSError("no /proc")

    monkeypatch.setattr(machine_load, "read_ticks", unreadable)
    assert pool_crowded() is False


def test_runnable_threads_of_other_processes_are_counted():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        # the busy process is runnable at every reading; this process's own running thread is not counted
        assert min(others_running() for _ in range(5)) >= 1
    finally:
        busy.kill()
        busy.wait()


def test_the_cores_of_a_busy_process_are_measured_over_an_interval():
    load = OtherLoad()
    assert load.read() is None  # no interval yet
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.6)
        cores = load.read()
    finally:
        busy.kill()
        busy.wait()
    assert cores is not None and cores >= 0.5  # the busy process kept a core (this one slept)
