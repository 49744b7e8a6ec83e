"""Cost-based choice: every engine returns the same sets; probing, hysteresis and drift re-probes."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate
from matcher.filters.adaptive import (
    ADAPTIVE_MIN_BOXES,
    STATISTICS_WINDOW,
    WARM_ROWS,
    AdaptiveMultiMatcher,
    _Loser,
    _OtherLoad,
    _others_running,
    busy_cores,
    matcher_for,
    pool_crowded,
)
from matcher.filters.asc import ASCMatcher
from matcher.filters.grouped import GroupedFilter
from matcher.filters.multi import MultiMatcher
from tests.matcher.filters.test_grouped import DIMS, reference, workloads


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    """The machine's load as the probes read it (pool_crowded) is fixed: idle, unless a test says otherwise."""
    monkeypatch.setattr("matcher.filters.adaptive.pool_crowded", lambda: False)


@settings(max_examples=40, deadline=None)
@given(workloads, st.integers(0, 2**31 - 1))
def test_all_engines_agree_on_drifting_data(labelled, seed):
    rng = np.random.default_rng(seed)
    engines = [
        MultiMatcher(labelled),
        GroupedFilter(labelled),
        ASCMatcher(labelled, ordering="hybrid", period=40, sample=30),
        ASCMatcher(labelled, ordering="macro", period=40, sample=30, threshold=0.2),
        AdaptiveMultiMatcher(labelled, sample=32, repeats=2, period=50),
    ]
    for phase in range(4):
        # the distribution drifts: low values, then high, then wide, then boundary values only
        lo, hi = [(-1, 3), (3, 8), (-1, 8), (0, 1)][phase]
        columns = {d: rng.integers(lo, hi, int(rng.integers(1, 60))).astype(float) for d in DIMS}
        n = min(len(v) for v in columns.values())
        columns = {d: v[:n] for d, v in columns.items()}
        if phase == 3:
            columns["a"][::3] = np.nan  # missing readings: NaN fails every constraint on its attribute
        expected = reference(labelled, columns)
        for engine in engines:
            assert np.array_equal(engine.match(columns), expected), type(engine).__name__


def threshold_workload(n_labels=5):
    return [(f"q{i}", Predicate([Box({"a": Interval.above(float(i))})])) for i in range(n_labels)]


def test_probe_slices_are_part_of_the_output_and_never_split_across_batches():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=2, period=10**6, eliminate=10**9)
    columns = {"a": np.arange(1_000, dtype=float) % 7}
    expected = reference_a(labelled, columns)
    # 2 rounds x 3 engines x (16 + 64) rows over batches of 100: a slice that does not fit in the rest of
    # a batch waits for the next one, e.g. batch 1 = 3 x 16 probed + 52 live rows; the rounds end in batch 6,
    # then the winner is verified on a live-size call (100 rows) at the head of each following batch until
    # the cheapest engine is a verified one
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 100]}) for s in range(0, 1_000, 100)])
    assert np.array_equal(out, expected)
    verified = [name for name, by_size in engine._timings.items() if 100 in by_size]
    assert engine.probes == 1 and len(engine.history) == 1
    assert engine.history[0][0] == 600 + 100 * len(verified)
    assert all(sorted(by_size) == [16, 64] + [100] * (name in verified) for name, by_size in engine._timings.items())
    assert set(engine.cost) == {"multi", "grouped", "asc"}
    assert engine.choice in verified and engine.choice == min(engine.cost, key=lambda e: (engine.cost[e], e))
    # probed rows of the two engines not chosen: 2 rounds x 80 rows each, and their verification calls
    assert engine.probed_tuples == 2 * 2 * 80 + 100 * (len(verified) - 1)


def test_batches_below_sample_rows_go_to_the_current_choice_unprobed():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1)
    columns = {"a": np.arange(630, dtype=float) % 7}
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 63]}) for s in range(0, 630, 63)])
    assert np.array_equal(out, reference_a(labelled, columns))
    assert engine.probes == 0 and engine.choice == "multi" and engine.tuples_seen == 630
    engine.match({"a": columns["a"][:64]})
    assert engine.probes == 1


def test_a_super_peer_gets_the_adaptive_matcher_from_the_box_threshold():
    few = [(f"q{i}", Predicate([Box({"a": Interval.above(float(i))})])) for i in range(ADAPTIVE_MIN_BOXES - 1)]
    many = [*few, ("last", Predicate([Box({"a": Interval.below(0.0)})]))]
    assert type(matcher_for(few)) is MultiMatcher
    engine = matcher_for(many)
    assert type(engine) is AdaptiveMultiMatcher and engine.labels == tuple(label for label, _ in many)
    columns = {"a": np.arange(3_000, dtype=float) % 40 - 1}
    engine.match(columns)
    copy = pickle.loads(pickle.dumps(engine))  # through to_arrays/from_arrays, as Spark ships operators
    assert copy.choice == engine.choice and np.array_equal(copy.match(columns), reference_a(many, columns))


def reference_a(labelled, columns):
    return np.stack([np.array([p.evaluate({"a": float(v)}) for v in columns["a"]]) for _, p in labelled], axis=1)


def test_slow_engines_are_dropped_after_the_first_round():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=3, period=10**6, eliminate=1e-9)
    for _ in range(5):
        engine.match({"a": np.arange(2_000, dtype=float) % 7})
    # with a factor of 1 only the best survives the first round: one round of two slices per engine, then
    # verification calls (a 2,000-row batch each, or 1,000 rows each side by side) from the next batch on
    slices = [
        sum(len(v) for size, v in engine._timings[e].items() if size in (16, 64)) for e in ("multi", "grouped", "asc")
    ]
    assert slices == [2, 2, 2]
    verified = [name for name, by_size in engine._timings.items() if {1_000, 2_000} & set(by_size)]
    assert engine.history and engine.choice in verified and set(engine._paired) == set(verified)
    assert "multi-batch" not in engine._timings  # 2,000-row batches are not wider than chunk: nothing to time
    # probed rows: every timed call of the engines not chosen (their slices, the interim's calls on the rest of
    # the first batch, their verification calls)
    others = sum(
        size * len(t) for e, by_size in engine._timings.items() if e != engine.choice for size, t in by_size.items()
    )
    assert engine.probed_tuples == others >= 2 * (16 + 64)


def test_drift_of_the_drop_ratio_triggers_a_reprobe_and_the_period_backs_off():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1, period=40_000, drift=0.3, margin=1.0, budget=1.0)
    batch = 4_096
    matching = {"a": np.full(batch, 10.0)}  # every tuple satisfies every label: nothing dropped
    dropped = {"a": np.full(batch, -1.0)}  # no label satisfied: everything dropped
    while engine.probes < 2:
        engine.match(matching)
    decided = engine.history[0][0]  # the first probe's decision, after its verification calls
    started = engine.tuples_seen - batch  # the scheduled re-probe began with this batch, one period later
    assert decided + 40_000 <= started < decided + 40_000 + batch
    while engine._tasks:
        engine.match(matching)
    assert engine._backoff == 2  # the scheduled re-probe confirmed the choice: the period doubled
    for _ in range(STATISTICS_WINDOW // batch):
        engine.match(matching)  # one statistics window: the reference drop ratio 0
    assert engine._reference is not None and engine._reference[0] == 0.0
    scheduled, drifted = engine._next_probe, engine.tuples_seen
    while engine.probes == 2:
        engine.match(dropped)
        assert engine.tuples_seen < scheduled
    # the drop ratio moved from 0 to 1 >= drift: re-probed after at most two statistics windows (the first
    # may have begun before the drift), long before the doubled period ends
    assert engine.tuples_seen - drifted <= 2 * STATISTICS_WINDOW + batch


def test_choice_is_recorded_and_rebuilt_from_arrays():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1)
    columns = {"a": np.arange(300, dtype=float) % 7}
    while not engine.history:
        engine.match(columns)  # one round of slices, then verification calls
    assert engine.history[0][0] >= 300
    copy = AdaptiveMultiMatcher.from_arrays(engine.to_arrays())
    assert copy.choice == engine.choice and copy.labels == engine.labels and copy.sample == 64
    assert np.array_equal(copy.match(columns), engine.match(columns))


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="engines"):
        AdaptiveMultiMatcher([], engines=("rtree",))
    with pytest.raises(ValueError, match="sample 8"):
        AdaptiveMultiMatcher([], sample=8)
    with pytest.raises(ValueError, match=r"budget -0\.1"):
        AdaptiveMultiMatcher([], budget=-0.1)


class CallSizes:
    """A real engine that records the number of rows of each call."""

    def __init__(self, engine):
        self.engine, self.labels, self.sizes, self.parallel = engine, engine.labels, [], []

    def __getattr__(self, name):  # the engine's other attributes (its kernel strategy: see _pool_loaded)
        return getattr(self.engine, name)

    def match(self, columns, **options):
        if len(columns["a"]) != WARM_ROWS:  # a new engine type's first call in the process loads its kernel
            self.sizes.append(len(columns["a"]))
            self.parallel.append(options.get("parallel"))
        return self.engine.match(columns, **options)


def test_live_calls_are_sliced_to_chunk_rows_and_predicted_at_that_size():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled, engines=("multi", "grouped", "asc"), sample=64, repeats=1, period=10**6, chunk=100
    )
    columns = {"a": np.arange(1_000, dtype=float) % 7}
    probe = {"a": columns["a"][:300]}
    while not engine.history:
        engine.match(probe)  # the probe: 3 engines x (16 + 64) rows = 240, then verification calls
    recorders = {name: CallSizes(e) for name, e in engine.engines.items()}
    engine.engines = dict(recorders)
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 350]}) for s in (300, 650)])
    assert np.array_equal(out, reference_a(labelled, {"a": columns["a"][300:1_000]}))
    assert recorders[engine.choice].sizes == [100, 100, 100, 50, 100, 100, 100, 50]
    assert all(not r.sizes for name, r in recorders.items() if name != engine.choice)
    assert engine._batch == 100


def test_chunk_below_sample_is_rejected():
    with pytest.raises(ValueError, match="chunk 32"):
        AdaptiveMultiMatcher([], sample=64, chunk=32)


def test_a_stream_alternating_between_known_states_is_not_reprobed():
    engine = AdaptiveMultiMatcher(
        threshold_workload(), engines=("multi",), sample=64, repeats=1, period=10**7, drift=0.3, budget=1.0
    )
    batch = 4_096
    window = STATISTICS_WINDOW // batch
    matching = {"a": np.full(batch, 10.0)}  # drop ratio 0
    dropped = {"a": np.full(batch, -1.0)}  # drop ratio 1
    half = {"a": np.repeat([10.0, -1.0], batch // 2)}  # drop ratio 0.5, also on the evenly spaced counted rows
    for phase in (matching, dropped):
        for _ in range(window):  # one statistics window per phase
            engine.match(phase)
    engine.match(dropped)
    assert engine.probes == 2  # the drop ratio moved 0 -> 1: re-probed, the choice held
    for _ in range(window - 1):
        engine.match(dropped)  # the probe's batch opened this window: the windows stay aligned with the phases
    for phase in (matching, dropped, matching):
        for _ in range(window):
            engine.match(phase)
    assert engine.probes == 2  # both states were measured while the choice held
    for _ in range(window + 1):
        engine.match(half)
    assert engine.probes == 3  # 0.5 is 0.5 away from both known states


STABLE = ("multi", "grouped")  # engines whose evaluations per tuple stay put on constant data


class Repeated:
    """A real engine that matches every call ``times`` times: a loser by far, whatever the machine's noise."""

    def __init__(self, engine, times):
        self.engine, self.labels, self.times = engine, engine.labels, times

    def __getattr__(self, name):  # the engine's other attributes (its kernel strategy: see _pool_loaded)
        return getattr(self.engine, name)

    def match(self, columns, **options):
        for _ in range(self.times - 1):
            self.engine.match(columns, **options)
        return self.engine.match(columns, **options)


def with_clear_loser(**settings):
    """Multi and a grouped filter slowed 40x (``grouped`` is the clear loser); margin 1: no switch."""
    settings = {"budget": 1.0, **settings}
    engine = AdaptiveMultiMatcher(threshold_workload(), engines=STABLE, sample=64, repeats=1, margin=1.0, **settings)
    engine.engines["grouped"] = Repeated(engine.engines["grouped"], 40)
    return engine


def probed_engines_per_probe(engine, batches, count=None):
    """Feed ``batches`` (until ``count`` probes have ended); after each probe ends, the engines it timed and the
    slice sizes per engine."""
    seen, probes = [], engine.probes
    for columns in batches:
        engine.match(columns)
        if engine.probes != probes and not engine._tasks:
            probes = engine.probes
            seen.append({name: sorted(by_size) for name, by_size in engine._timings.items()})
            if len(seen) == count:
                break
    return seen


def test_clear_losers_are_screened_on_one_slice_with_exponential_back_off():
    engine = with_clear_loser(period=1_000)
    matching = {"a": np.full(500, 10.0)}  # no drift: every re-probe is a scheduled one
    probes = probed_engines_per_probe(engine, [matching] * 260)
    losers = ["grouped"]
    # the first fit: both sizes each, the interim engine's call on the rest of the first batch (500 - 2 x 80
    # rows), then the winner verified on a live-size call (the next 500-row batch)
    assert engine.history == [(500, "multi")]
    assert probes[0] == {"multi": [16, 64, 340, 500], "grouped": [16, 64]}
    screened = [i for i, probe in enumerate(probes) if set(losers) <= set(probe)]
    # screened at the first re-probe, then after sitting out 1, 3, 7 re-probes (back-off 2, 4, 8)
    assert screened[:5] == [0, 1, 3, 7, 15]
    for i, probe in enumerate(probes[1:], start=1):
        assert probe[engine.choice] == [16, 64]
        assert all(probe.get(name) == ([16] if i in screened else None) for name in losers)


def test_a_large_move_of_the_drop_ratio_screens_backed_off_losers():
    engine = with_clear_loser(period=4_096, drift=0.3, max_backoff=64)
    matching = {"a": np.full(4_096, 10.0)}  # drop ratio 0
    dropped = {"a": np.full(4_096, -1.0)}  # drop ratio 1
    # six probes, however many batches the first one's verification takes (a noisy fit may time the loser too)
    probes = probed_engines_per_probe(engine, [matching] * 200, count=6)
    losers = {"grouped"}
    # screened at re-probes 1 and 3, then back-off 4: re-probes 4 and 5 leave them out
    assert [set(p) >= losers for p in probes] == [True, True, False, True, False, False]
    assert engine._losers["grouped"].skips == 1
    # a statistics window on the same data gives the reference (the next scheduled re-probe is 32 periods away)
    probes = engine.probes
    while engine._reference is None:
        engine.match(matching)
    assert engine.probes == probes
    more = probed_engines_per_probe(engine, [dropped] * (STATISTICS_WINDOW // 4_096 + 3))
    assert len(more) == 1 and set(more[0]) >= losers  # the drift re-probe screens them at once


def test_a_loser_passing_its_screen_gets_a_full_round():
    engine = AdaptiveMultiMatcher(
        threshold_workload(),
        engines=STABLE,
        sample=64,
        repeats=1,
        period=1_000,
        eliminate=1e-9,
        margin=1.0,
        budget=1.0,
    )
    matching = {"a": np.full(500, 10.0)}
    while not engine.history:
        engine.match(matching)  # the first probe: its round, then verification calls; every other engine loses
    assert engine.probes == 1
    losers = sorted(set(engine.engines) - {engine.choice})
    assert sorted(engine._losers) == losers
    engine.eliminate = 1e9  # now every screen passes
    probes = probed_engines_per_probe(engine, [matching] * 4)
    # the screening slice (16 rows), then a full round of both sizes: the decision rests on a fit, and on the
    # verification calls of the winner: one of the live size (500 rows), or half a batch each beside the other
    live = {500, 250}
    assert len(probes) == 1 and live & set(probes[0][engine.choice])
    assert all(set(sizes) - live == {16, 64} for sizes in probes[0].values())
    assert all(len(engine._timings[name][16]) == 2 for name in losers)
    assert not engine._losers


def test_whole_batches_are_a_timed_candidate_and_run_whole_when_chosen():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled, engines=("multi", "multi-batch"), sample=64, repeats=2, period=10**6, chunk=100, margin=0.0
    )
    assert engine.engines["multi"] is engine.engines["multi-batch"]  # one compiled matcher, two widths
    engine.engines["multi"] = Repeated(engine.engines["multi"], 40)  # the sliced width loses by far
    recorder = CallSizes(engine.engines["multi-batch"])
    engine.engines["multi-batch"] = recorder
    columns = {"a": np.arange(4_000, dtype=float) % 7}
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 400]}) for s in range(0, 4_000, 400)])
    assert np.array_equal(out, reference_a(labelled, columns))
    # batch 1: timed whole, then round 1's slices, after which the 40x slower sliced width is eliminated and
    # the choice made (400 rows: the serial kernel, so no untimed loading batch of the thread pool)
    assert engine.history[-1][1] == "multi-batch" and engine.choice == "multi-batch"
    assert sorted(engine._timings["multi-batch"]) == [400]
    assert sorted(engine._timings["multi"]) == [16, 64]
    assert recorder.sizes[0] == 400 and recorder.sizes[-3:] == [400, 400, 400]  # whole batches live
    assert engine.probed_tuples == 16 + 64  # the sliced engine's probe rows, eliminated after round 1


def test_a_slow_whole_batch_engine_loses_and_is_screened_on_one_batch():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled,
        engines=("multi", "multi-batch"),
        sample=64,
        repeats=1,
        period=800,
        chunk=100,
        margin=1.0,
        budget=1.0,
    )
    engine.engines["multi-batch"] = Repeated(engine.engines["multi-batch"], 40)
    columns = {"a": np.full(400, 10.0)}
    probes = probed_engines_per_probe(engine, [columns] * 40)
    assert engine.choice == "multi" and "multi-batch" in engine._losers
    # the sliced winner is verified on a live-size call (chunk = 100 rows), not beside the 40x slower whole batch
    assert probes[0] == {"multi": [16, 64, 100], "multi-batch": [400]}
    # a re-probe times the loser on one whole batch at most, with the back-off of slice engines
    assert all(probe.get("multi-batch", [400]) == [400] for probe in probes)
    assert any("multi-batch" not in probe for probe in probes[1:])


def test_a_whole_batch_choice_matches_the_rest_of_a_probed_batch_on_the_thread_pool():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled, engines=("multi", "multi-batch"), sample=64, repeats=1, period=16_384, margin=0.0, budget=1.0
    )
    engine.engines["multi"] = Repeated(engine.engines["multi"], 40)
    recorder = CallSizes(engine.engines["multi-batch"])
    engine.engines["multi-batch"] = recorder
    columns = {"a": np.arange(8 * 8_192, dtype=float) % 7}
    batches = [{"a": columns["a"][s : s + 8_192]} for s in range(0, 8 * 8_192, 8_192)]
    out = np.concatenate([engine.match(batch) for batch in batches])
    assert np.array_equal(out, reference_a(labelled, columns))
    assert engine.choice == "multi-batch" and engine.probes >= 2
    # a re-probe's sliced rows at the head of a batch (16 + 64 rows, or 16 to screen a clear loser): the rest
    # on the thread pool all the same (alone it would have run the serial kernel), every other batch whole
    calls = set(zip(recorder.sizes, recorder.parallel, strict=True))
    rests = {(8_192 - 16 - 64, True), (8_192 - 16, True)}
    assert calls & rests and calls <= {(8_192, None)} | rests


def test_re_probes_wait_for_the_probing_budget():
    columns = {"a": np.arange(500, dtype=float) % 7}
    counts = {}
    for budget in (0.0, 1.0):
        engine = with_clear_loser(period=1_000, budget=budget)
        for _ in range(40):
            engine.match(columns)
        counts[budget] = engine.probes
        assert engine._probe_seconds > 0  # the clear loser's probe slices cost more than the choice's
    # budget 0: the first probe only, as every later one would cost more than no time at all; budget 1: a
    # re-probe after every period (doubling while the choice holds, up to max_backoff = 8 periods)
    assert counts[0.0] == 1 and counts[1.0] >= 4


def test_a_sliced_winner_close_to_the_whole_batch_engine_is_timed_beside_it_on_one_batch(monkeypatch):
    monkeypatch.setattr("matcher.filters.adaptive.CLOSE", 1e9)  # every verified sliced winner counts as close
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled, engines=("multi", "multi-batch"), sample=64, repeats=1, period=10**6, chunk=100, margin=0.0
    )
    # the sliced width wins: a 400-row call costs about as much as a 100-row one (per-call cost, 10 us, against
    # a few ns per tuple here), so the whole-batch engine needs a large handicap to lose whatever the noise
    engine.engines["multi-batch"] = Repeated(engine.engines["multi-batch"], 20)
    recorder = CallSizes(engine.engines["multi-batch"])
    engine.engines["multi-batch"] = recorder
    columns = {"a": np.arange(4_000, dtype=float) % 7}
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 400]}) for s in range(0, 4_000, 400)])
    assert np.array_equal(out, reference_a(labelled, columns))
    assert engine.history and engine._pair == "multi" and set(engine._paired) == {"multi", "multi-batch"}
    # the whole-batch engine timed twice (its round, then beside the winner's live-size call), and the
    # decision taken on the paired times
    assert engine._timings["multi-batch"][400] and len(engine._timings["multi-batch"][400]) == 2
    assert engine._timings["multi"][100]
    expected = min(engine._paired, key=lambda e: (engine._paired[e], e))
    assert engine.choice == expected


def test_sliced_engines_close_to_the_winner_are_timed_beside_it_at_the_live_size(monkeypatch):
    monkeypatch.setattr("matcher.filters.adaptive.CLOSE", 1e9)  # every sliced engine counts as close to the winner ...
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled,
        engines=("multi", "grouped", "asc"),
        sample=64,
        repeats=1,
        period=10**6,
        chunk=100,
        margin=0.0,
        eliminate=1e9,  # ... and none is eliminated by the rounds
    )
    columns = {"a": np.arange(4_000, dtype=float) % 7}
    out = np.concatenate([engine.match({"a": columns["a"][s : s + 400]}) for s in range(0, 4_000, 400)])
    assert np.array_equal(out, reference_a(labelled, columns))
    # each engine timed on a live-size call (chunk = 100 rows) in the verification, the choice made on those
    assert engine.history and set(engine._paired) == {"multi", "grouped", "asc"}
    assert all(engine._timings[name][100] for name in engine._paired)
    assert engine.choice == min(engine._paired, key=lambda e: (engine._paired[e], e))


def test_a_re_probe_times_the_current_choice_beside_the_fitted_winner():
    labelled = threshold_workload()
    engine = AdaptiveMultiMatcher(
        labelled,
        engines=("multi", "grouped"),
        sample=64,
        repeats=1,
        period=1_000,
        budget=1.0,
        chunk=100,
        eliminate=1e9,  # no clear losers: both engines get full rounds in every re-probe
    )
    batches = [{"a": np.arange(400, dtype=float) % 7} for _ in range(100)]
    for columns in batches[:10]:
        engine.match(columns)
    first = engine.choice
    engine.engines[first] = Repeated(engine.engines[first], 8)  # the choice becomes a clear loser
    probes = engine.probes
    for columns in batches[10:]:
        assert np.array_equal(engine.match(columns), reference_a(labelled, columns))
        if engine.choice != first:
            break
    assert engine.probes > probes and engine.choice != first
    # the switch was decided on the two engines' live-size calls, side by side
    assert first in engine._paired and engine.choice in engine._paired
    assert engine._paired[first] > engine._paired[engine.choice]


@pytest.mark.parametrize(
    "make",
    [
        MultiMatcher,
        GroupedFilter,
        lambda labelled: ASCMatcher(labelled, ordering="hybrid", period=50, sample=40),
    ],
)
def test_engines_fill_the_rows_they_are_given(make):
    labelled = threshold_workload()
    columns = {"a": np.arange(120, dtype=float) % 7 - 1}
    matrix = np.zeros((130, len(labelled)), dtype=bool)
    engine = make(labelled)
    returned = engine.match(columns, out=matrix[5:125])
    assert np.array_equal(matrix[5:125], reference_a(labelled, columns)) and returned.base is matrix
    assert not matrix[:5].any() and not matrix[125:].any()


def test_a_choice_slower_than_measured_on_the_same_data_is_probed_again():
    engine = AdaptiveMultiMatcher(
        threshold_workload(), engines=STABLE, sample=64, repeats=1, period=10**7, margin=1.0, budget=1.0
    )
    batch = {"a": np.arange(4_096, dtype=float) % 7}
    window = STATISTICS_WINDOW // 4_096
    for _ in range(2 + 2 * window):  # the probe and its verification, the reference window, a steady one
        engine.match(batch)
    assert engine.probes == 1
    chosen = engine.choice
    engine.engines[chosen] = Repeated(engine.engines[chosen], 4)  # as if the machine got 4x slower for it
    for _ in range(window + 1):
        engine.match(batch)
    assert engine.probes == 2  # same drop ratio, 4x the measured cost: probed again after one window


def test_on_a_crowded_machine_the_thread_pool_is_left_out_of_probes(monkeypatch):
    labelled = threshold_workload()
    crowded = [True]
    monkeypatch.setattr("matcher.filters.adaptive.pool_crowded", lambda: crowded[0])
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1, period=2_000, budget=1.0, chunk=100)
    columns = {"a": np.arange(400, dtype=float) % 7}
    for _ in range(10):
        assert np.array_equal(engine.match(columns), reference_a(labelled, columns))
    assert engine.history and "multi-batch" not in engine._timings and engine.choice != "multi-batch"
    crowded[0] = False  # the machine quietens: the next re-probe times the pool again
    probes = engine.probes
    while engine.probes == probes:
        engine.match(columns)
    assert "multi-batch" in engine._timings


def test_a_thread_pool_choice_is_re_made_among_the_serial_engines_when_the_machine_gets_crowded(monkeypatch):
    labelled = threshold_workload()
    crowded = [False]
    monkeypatch.setattr("matcher.filters.adaptive.pool_crowded", lambda: crowded[0])
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1, period=2_000, budget=1.0, chunk=100)
    engine.choice, engine.history = "multi-batch", [(0, "multi-batch")]
    engine.cost = {"multi-batch": 1e-12, "multi": 1.0, "grouped": 1.0, "asc": 1.0}  # the pool won on a quiet machine
    engine._next_probe = 10**9
    columns = {"a": np.arange(400, dtype=float) % 7}
    engine.match(columns)  # the first call warms the engines up
    crowded[0] = True
    engine._next_probe = 0  # e.g. its live cost rose 1.5x (see _watch)
    for _ in range(10):
        assert np.array_equal(engine.match(columns), reference_a(labelled, columns))
    assert engine.choice != "multi-batch" and "multi-batch" not in engine.cost
    assert engine.history[-1][1] == engine.choice


def test_engines_that_lost_against_a_thread_pool_choice_get_a_full_round_when_it_cannot_run(monkeypatch):
    labelled = threshold_workload()
    monkeypatch.setattr("matcher.filters.adaptive.pool_crowded", lambda: True)
    engine = AdaptiveMultiMatcher(labelled, sample=64, repeats=1, period=2_000, budget=1.0, chunk=100)
    engine.choice, engine.history = "multi-batch", [(0, "multi-batch")]
    engine.cost = {"multi-batch": 1e-12, "multi": 1.0, "grouped": 1.0, "asc": 1.0}
    engine._losers = {name: _Loser(8) for name in ("multi", "grouped", "asc")}  # every serial engine lost by far
    columns = {"a": np.arange(400, dtype=float) % 7}
    for _ in range(10):
        assert np.array_equal(engine.match(columns), reference_a(labelled, columns))
    assert engine.choice != "multi-batch" and {16, 64} <= set(engine._timings[engine.choice])


@pytest.mark.parametrize(("readings", "crowded"), [([0], False), ([1, 0], False), ([1, 1, 1], True), ([2, 2, 2], True)])
def test_the_pool_is_crowded_when_every_reading_leaves_it_no_core(monkeypatch, readings, crowded):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("numba.get_num_threads", lambda: 2)  # 2 cores, 2 pool threads: no core to spare
    left = list(readings)
    monkeypatch.setattr("matcher.filters.adaptive._LOAD.read", lambda: None)  # no interval measured yet
    monkeypatch.setattr("matcher.filters.adaptive._others_running", lambda: left.pop(0))
    assert pool_crowded() is crowded
    assert not left  # readings stop at the first that leaves a core


def test_runnable_threads_of_other_processes_are_counted():
    import subprocess
    import sys
    import time

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        # the busy process is runnable at every reading; this process's own running thread is not counted
        assert min(_others_running() for _ in range(5)) >= 1
    finally:
        busy.kill()
        busy.wait()


@pytest.mark.parametrize(("others", "crowded"), [(0.0, False), (0.4, False), (0.6, True), (2.0, True)])
def test_the_pool_is_crowded_when_other_processes_kept_its_cores_busy(monkeypatch, others, crowded):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("numba.get_num_threads", lambda: 2)
    monkeypatch.setattr("matcher.filters.adaptive._LOAD.read", lambda: others)
    monkeypatch.setattr("matcher.filters.adaptive._others_running", lambda: 5)  # not read once an interval is measured
    assert pool_crowded() is crowded


def test_busy_cores_leave_out_this_process_and_idle_time():
    # 2 CPUs over 1 s (200 ticks): 50 idle, 100 this process's (its pool on both cores half the time): others 50
    assert busy_cores((1_000, 400, 10), (1_200, 450, 110), 2) == pytest.approx(0.5)
    assert busy_cores((0, 0, 0), (200, 0, 200), 2) == 0.0  # all of it ours
    assert busy_cores((0, 0, 0), (200, 0, 0), 2) == pytest.approx(2.0)


def test_the_cores_of_a_busy_process_are_measured_over_an_interval():
    import subprocess
    import sys
    import time

    load = _OtherLoad()
    assert load.read() is None  # no interval yet
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.6)
        cores = load.read()
    finally:
        busy.kill()
        busy.wait()
    assert cores is not None and cores >= 0.5  # the busy process kept a core (this one slept)
