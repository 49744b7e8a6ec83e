"""The tuple workload: exact counts, emission times, and values independent of how ranges are split."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Choice, Normal, Uniform
from topologies.model import AttributeSpec, Scenario, StreamSpec
from topologies.replay import read_replay
from topologies.workload import BLOCK, columns, emission_times, tuple_count

ATTRIBUTES = (
    AttributeSpec("u", "float", Uniform(-5.0, 5.0)),
    AttributeSpec("i", "int", Uniform(0.5, 4.0, integer=True)),
    AttributeSpec("g", "int", Normal(10.0, 3.0, integer=True)),
    AttributeSpec("c", "float", Choice((1.0, 2.5, 7.0), (1.0, 1.0, 2.0))),
)


def scenario_with(*streams: StreamSpec, seed: int = 5) -> Scenario:
    return Scenario("w", seed, 10.0, 16, ("SP0",), (), (), streams, ())


def stream(stream_id="s", rate=1000.0, replay=None, attributes=ATTRIBUTES) -> StreamSpec:
    return StreamSpec(stream_id, "P0", rate, attributes, replay)


def brute_force_count(rate: float, duration: float) -> int:
    i = 0
    while i / rate < duration:
        i += 1
    return i


@pytest.mark.parametrize(
    ("rate", "duration", "count"),
    [(10.0, 0.3, 3), (3.0, 1.0, 3), (100.0, 60.0, 6000), (0.7, 10.0, 7), (1000.0, 1e-9, 1), (7.0, 1 / 7, 1)],
)
def test_tuple_count_examples(rate, duration, count):
    assert tuple_count(stream(rate=rate), duration) == count == brute_force_count(rate, duration)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=0.01, max_value=500, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1e-6, max_value=20, allow_nan=False, allow_infinity=False),
)
def test_tuple_count_matches_the_float_division(rate, duration):
    n = tuple_count(stream(rate=rate), duration)
    assert n == brute_force_count(rate, duration)
    times = emission_times(stream(rate=rate), 0, n + 1)
    assert (times[:n] < duration).all() and times[n] >= duration


def test_emission_times_are_the_float64_divisions():
    s = stream(rate=3.0)
    times = emission_times(s, 5, 12)
    assert times.dtype == np.float64
    assert times.tolist() == [i / 3.0 for i in range(5, 12)]


def test_columns_follow_the_documented_block_seeding():
    scenario = scenario_with(stream())
    values = columns(scenario, "s", BLOCK - 3, BLOCK + 2)
    for k, attribute in enumerate(ATTRIBUTES):
        rngs = [np.random.default_rng([5, zlib.crc32(b"s"), k, b]) for b in (0, 1)]
        blocks = [attribute.distribution.sample(rng, BLOCK) for rng in rngs]
        assert values[attribute.name].tolist() == [*blocks[0][-3:].tolist(), *blocks[1][:2].tolist()]
    assert list(values) == ["u", "i", "g", "c"]
    assert all(v.dtype == np.float64 and len(v) == 5 for v in values.values())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2 * BLOCK + 500), max_size=6))
def test_any_split_of_a_range_gives_the_same_values(cuts):
    scenario = scenario_with(stream())
    n = 2 * BLOCK + 500
    whole = columns(scenario, "s", 0, n)
    bounds = [0, *sorted(cuts), n]
    pieces = [columns(scenario, "s", a, b) for a, b in itertools.pairwise(bounds)]
    for name, column in whole.items():
        assert np.array_equal(np.concatenate([p[name] for p in pieces]), column)


def test_values_respect_their_distributions():
    values = columns(scenario_with(stream()), "s", 0, 20000)
    assert ((values["u"] >= -5) & (values["u"] <= 5)).all()
    assert set(np.unique(values["i"]).tolist()) == {1.0, 2.0, 3.0, 4.0}
    assert np.array_equal(values["g"], np.round(values["g"]))
    assert set(np.unique(values["c"]).tolist()) == {1.0, 2.5, 7.0}
    assert abs(np.mean(values["c"] == 7.0) - 0.5) < 0.02


def test_streams_seeds_and_attributes_draw_different_values():
    same = (AttributeSpec("a", "float", Uniform(0.0, 1.0)), AttributeSpec("b", "float", Uniform(0.0, 1.0)))
    one = scenario_with(stream("s", attributes=same), stream("t", attributes=same))
    s, t = columns(one, "s", 0, 100), columns(one, "t", 0, 100)
    assert not np.array_equal(s["a"], t["a"]) and not np.array_equal(s["a"], s["b"])
    other_seed = scenario_with(stream("s", attributes=same), seed=6)
    assert not np.array_equal(columns(other_seed, "s", 0, 100)["a"], s["a"])


def test_returned_columns_are_fresh_arrays():
    scenario = scenario_with(stream())
    first = columns(scenario, "s", 10, 20)
    first["u"][:] = 0.0
    assert not np.array_equal(columns(scenario, "s", 10, 20)["u"], first["u"])


def test_replay_rows_and_count_cap(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i * 0.5}\n" for i in range(25)))
    table = read_replay(str(path))
    attributes = tuple(AttributeSpec(name, "float", None) for name in table.names)
    replayed = stream("r", rate=2.0, replay=str(path), attributes=attributes)
    scenario = scenario_with(replayed)
    assert tuple_count(replayed, 10.0) == 20  # 2/s for 10 s, fewer than the 25 rows
    assert tuple_count(replayed, 100.0) == 25  # the file ends first
    values = columns(scenario, "r", 3, 7)
    assert values["a"].tolist() == [3.0, 4.0, 5.0, 6.0] and values["b"].tolist() == [1.5, 2.0, 2.5, 3.0]
    with pytest.raises(ValueError, match="beyond the 25 rows"):
        columns(scenario, "r", 20, 26)


def test_bad_ranges_and_unknown_streams():
    scenario = scenario_with(stream())
    with pytest.raises(ValueError, match="bad tuple range"):
        columns(scenario, "s", 5, 4)
    with pytest.raises(KeyError):
        columns(scenario, "nope", 0, 1)
    assert all(len(v) == 0 for v in columns(scenario, "s", 7, 7).values())
