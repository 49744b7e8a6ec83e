"""The tuples of a scenario's streams, identical for every strategy and engine (docs/ARCHITECTURE.md).

Tuple ``i`` of a stream is emitted at ``i / rate`` (a float64 division; every comparison with ``at``,
``until`` or an epoch bound uses exactly these floats), or, for a replay with a time column, at its row's
timestamp less the first one (topologies/replay.py).  Values are generated in fixed blocks of
:data:`BLOCK` tuples: block ``b`` of attribute ``k`` (schema order) is drawn from
``np.random.default_rng([seed, crc32(stream id), k, b])``, so any engine can produce any range of tuples
alone and get the same values.  Replayed streams read rows of their CSV instead.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from matcher import Distribution
from topologies.model import Scenario, StreamSpec
from topologies.replay import read_replay

Values = Callable[[str, int, int], dict[str, np.ndarray]]
"""``values(stream, start, stop)``: the columns of tuples ``start..stop-1`` of a stream, as :func:`columns`
gives them (another function of this shape replaces the workload in tests)."""

BLOCK = 65536


def _timed(stream: StreamSpec) -> np.ndarray | None:
    """The emission times of every row of a replay with a time column (None: tuple i at i / rate)."""
    return None if stream.time is None else read_replay(stream.replay, stream.time, stream.time_start).times


def tuple_count(stream: StreamSpec, duration: float) -> int:
    """How many tuples the stream emits before ``duration``: the ``i >= 0`` with ``i / rate < duration``
    (float64, as :func:`emission_times` computes them), and no more than the replay file's rows; for a
    timed replay, the rows whose emission time is before ``duration``."""
    times = _timed(stream)
    if times is not None:
        return int(np.searchsorted(times, duration, side="left"))
    count = max(0, math.ceil(duration * stream.rate))
    # duration * rate is rounded; step to the exact boundary of the float division
    while count > 0 and (count - 1) / stream.rate >= duration:
        count -= 1
    while count / stream.rate < duration:
        count += 1
    if stream.replay is not None:
        count = min(count, read_replay(stream.replay).rows)
    return count


def emission_times(stream: StreamSpec, start: int, stop: int) -> np.ndarray:
    """Emission times (seconds, float64) of tuples ``start..stop-1``."""
    times = _timed(stream)
    if times is not None:
        return times[start:stop].copy()
    return np.arange(start, stop, dtype=np.float64) / stream.rate


def emission_times_of(stream: StreamSpec, indices: np.ndarray) -> np.ndarray:
    """Emission times (seconds, float64) of the tuples numbered ``indices`` (any order), the very floats
    :func:`emission_times` gives them."""
    times = _timed(stream)
    if times is not None:
        return times[np.asarray(indices, dtype=np.int64)]
    return np.asarray(indices, dtype=np.int64).astype(np.float64) / stream.rate


def run_emission_times(scenario: Scenario) -> dict[str, np.ndarray]:
    """Per stream (by id), the emission times of every tuple it emits over the run."""
    return {s.id: emission_times(s, 0, tuple_count(s, scenario.duration)) for s in scenario.streams}


@lru_cache(maxsize=64)
def _block(seed: int, stream_id: str, k: int, b: int, distribution: Distribution) -> np.ndarray:
    # cached because engines ask for many small ranges of the same block (one per batch or epoch)
    rng = np.random.default_rng([seed, zlib.crc32(stream_id.encode()), k, b])
    values = np.asarray(distribution.sample(rng, BLOCK), dtype=np.float64)
    values.flags.writeable = False
    return values


def columns(scenario: Scenario, stream_id: str, start: int, stop: int) -> dict[str, np.ndarray]:
    """Values of tuples ``start..stop-1`` of ``stream_id``: one new float64 array per attribute, in
    schema order.

    Raises ValueError for a range with ``start < 0`` or ``stop < start``, or one beyond a replay file's
    rows; KeyError for an unknown stream.
    """
    if start < 0 or stop < start:
        raise ValueError(f"bad tuple range [{start}, {stop}) of stream {stream_id!r}")
    stream = scenario.stream(stream_id)
    if stream.replay is not None:
        table = read_replay(stream.replay, stream.time, stream.time_start)
        if stop > table.rows:
            raise ValueError(f"tuple range [{start}, {stop}) beyond the {table.rows} rows of {stream.replay}")
        return {name: table.columns[name][start:stop].copy() for name in stream.attribute_names}
    result = {}
    for k, attribute in enumerate(stream.attributes):
        pieces = [
            _block(scenario.seed, stream_id, k, b, attribute.distribution)[
                max(start - b * BLOCK, 0) : min(stop - b * BLOCK, BLOCK)
            ]
            for b in range(start // BLOCK, -(-stop // BLOCK))
        ]
        result[attribute.name] = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.float64)
    return result


def columns_of(
    scenario: Scenario, stream_id: str, indices: np.ndarray, names: tuple[str, ...], values: Values | None = None
) -> dict[str, np.ndarray]:
    """Values of attributes ``names`` of the tuples numbered ``indices`` (ascending) of ``stream_id``, read
    as one range from the first to the last (``values``: as :data:`Values`, default :func:`columns`)."""
    indices = np.asarray(indices, np.int64)
    if not len(indices):
        return {name: np.zeros(0, np.float64) for name in names}
    first, stop = int(indices[0]), int(indices[-1]) + 1
    found = columns(scenario, stream_id, first, stop) if values is None else values(stream_id, first, stop)
    return {name: np.asarray(found[name], np.float64)[indices - first] for name in names}
