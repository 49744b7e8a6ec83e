"""The subscription CLI's windows (peers/live/client.py, ``Windows``): fed an aggregate's input in batches of
any size, it gives each record once, as its window closes, equal to the pane operator over the whole input;
and of a time window's input it keeps only what open windows hold."""

from __future__ import annotations

import numpy as np
import pytest

from matcher import parse_query
from peers.aggregation import aggregate
from peers.live.client import Windows

QUERIES = [
    "SELECT k, COUNT(*), SUM(x), MAX(x) FROM s GROUP BY k WINDOW 2 s SLIDE 0.5 s",
    "SELECT COUNT(*), AVG(x) FROM s WINDOW 1.5 s",
    "SELECT k, MEDIAN(x), VAR(x) FROM s GROUP BY k WINDOW 0.7 s SLIDE 0.3 s HAVING COUNT(*) > 2",
    "SELECT COUNT(*), AVG(x) FROM s WINDOW 7 TUPLES SLIDE 3 TUPLES",
]


@pytest.mark.parametrize("text", QUERIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_records_come_once_as_windows_close_and_equal_the_whole_inputs(text, seed):
    rng = np.random.default_rng(seed)
    query, n, at, end = parse_query(text), 3000, 3.3, 60.0
    times = np.sort(rng.uniform(0, end, n))
    x, k = rng.uniform(0, 10, n), rng.integers(0, 4, n).astype(float)
    windows, got, kept = Windows(query, at), {}, []
    i = 0
    while i < n:
        batch = range(i, min(n, i + int(rng.integers(1, 50))))
        for j in batch:
            if times[j] >= at:
                windows.add(float(times[j]), {"x": x[j], "k": k[j]})
        i = batch.stop
        for window, group, values in windows.closed():
            key = (window, tuple(group.values()))
            assert key not in got
            got[key] = tuple(values.values())
        kept.append(len(windows.times))
    for window, group, values in windows.closed(end):
        key = (window, tuple(group.values()))
        assert key not in got
        got[key] = tuple(values.values())
    active = times >= at
    want = aggregate(query, times[active], {"x": x[active], "k": k[active]}, at, end, end)
    assert len(want) > 20
    assert got.keys() == set(want)
    for key, values in want.items():
        assert np.array_equal(np.array(got[key]), np.array(values, dtype=float), equal_nan=True), key
    if query.window.tuples:
        assert max(kept) == int(active.sum())  # a count window's input is kept whole
    else:
        assert max(kept) < 200  # open windows of at most 2 s at 50 tuples/s
