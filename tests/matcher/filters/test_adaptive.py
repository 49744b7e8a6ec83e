"""The adaptive engine choice, driven by scripted engine costs on a fake clock.

Every engine here is a real engine (so every output is checked against the reference) whose calls cost
scripted seconds on a timeline that the adaptive matcher reads as its clock: which engine gets chosen when,
what a probe calls and how the re-probes back off follow from the script alone, whatever the machine's load.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate
from matcher.filters.adaptive import AdaptiveMultiMatcher
from matcher.filters.adaptive_settings import AdaptiveSettings
from matcher.filters.asc import ASCMatcher
from matcher.filters.candidates import WARM_ROWS
from matcher.filters.grouped import GroupedFilter
from matcher.filters.multi import MultiMatcher
from tests.matcher.filters.test_grouped import DIMS, reference, workloads

US, NS = 1e-6, 1e-9
WINDOW = 8 * 4_096  # the statistics window of these tests: 8 batches of 4,096 rows


class Timeline:
    """Seconds that pass only while a scripted engine runs: the adaptive matcher's clock."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A real engine whose calls cost ``per_call + rows * per_tuple`` seconds on the timeline.

    ``calls`` records the rows (and the ``parallel`` option) of every call; change ``per_tuple`` and
    ``per_call`` to script a change of the machine's load or of the data."""

    def __init__(self, engine, timeline: Timeline, per_tuple: float, per_call: float = 10 * US):
        self.engine, self.timeline = engine, timeline
        self.per_tuple, self.per_call = per_tuple, per_call
        self.labels = engine.labels
        self.calls: list[tuple[int, bool | None]] = []

    def prepare(self):
        getattr(self.engine, "prepare", lambda: None)()

    @property
    def evaluations(self):
        return getattr(self.engine, "evaluations", 0)

    def match(self, columns, **options):
        out = self.engine.match(columns, **options)
        self.timeline.now += self.per_call + len(out) * self.per_tuple
        self.calls.append((len(out), options.get("parallel")))
        return out

    @property
    def sizes(self) -> list[int]:
        return [rows for rows, _ in self.calls]

    def scale(self, factor: float) -> None:
        self.per_tuple *= factor
        self.per_call *= factor


def threshold_workload(n_labels=5):
    return [(f"q{i}", Predicate([Box({"a": Interval.above(float(i))})])) for i in range(n_labels)]


THRESHOLDS = threshold_workload()


def reference_a(labelled, columns):
    """Predicate.evaluate per tuple, remembered per distinct batch (the tests repeat a few batches many times)."""
    key = (tuple(labelled), columns["a"].tobytes())
    if key not in _REFERENCES:
        rows = [[p.evaluate({"a": float(v)}) for _, p in labelled] for v in columns["a"]]
        _REFERENCES[key] = np.array(rows, dtype=bool).reshape(len(columns["a"]), len(labelled))
    return _REFERENCES[key]


_REFERENCES: dict = {}


def scripted(per_tuple: dict[str, float], crowded=lambda: False, **options):
    """An adaptive matcher over ``THRESHOLDS`` and the engines of ``per_tuple`` (the first the initial choice),
    each scripted at its cost per tuple and 10 us per call, on an idle machine unless ``crowded`` says
    otherwise."""
    options = {"statistics_window": WINDOW, **options}
    timeline = Timeline()
    settings = AdaptiveSettings(engines=tuple(per_tuple), **options)
    engine = AdaptiveMultiMatcher(THRESHOLDS, settings, clock=timeline, pool_crowded=crowded)
    for name, cost in per_tuple.items():
        engine.engines[name] = Scripted(engine.engines[name], timeline, cost)
    return engine


def feed(engine, batches) -> list[dict[str, list[int]]]:
    """Match ``batches`` checking every output; per probe that ended, the rows of each engine's calls from the
    batch that started it to the batch that ended it (the live rows of those batches included)."""
    probes, marks = [], None
    for columns in batches:
        before = {name: len(engine.engines[name].calls) for name in engine.engines}
        started = engine.probes
        assert np.array_equal(engine.match(columns), reference_a(THRESHOLDS, columns))
        if engine.probes != started:
            marks = before
        if marks is not None and not engine.probing:
            probes.append({name: engine.engines[name].sizes[marks[name] :] for name in engine.engines})
            marks = None
    return probes


def batches_of(rows: int, count: int, value: float | None = None):
    if value is not None:
        return [{"a": np.full(rows, value)} for _ in range(count)]
    return [{"a": (np.arange(i * rows, (i + 1) * rows, dtype=float) % 7) - 1} for i in range(count)]


@settings(max_examples=40, deadline=None)
@given(workloads, st.integers(0, 2**31 - 1))
def test_all_engines_agree_on_drifting_data(labelled, seed):
    rng = np.random.default_rng(seed)
    engines = [
        MultiMatcher(labelled),
        GroupedFilter(labelled),
        ASCMatcher(labelled, ordering="hybrid", period=40, sample=30),
        ASCMatcher(labelled, ordering="macro", period=40, sample=30, threshold=0.2),
        AdaptiveMultiMatcher(
            labelled, AdaptiveSettings(sample=32, repeats=2, period=50), clock=Timeline(), pool_crowded=lambda: False
        ),
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


def test_a_probe_times_slices_whole_then_verifies_the_winner_at_the_live_size():
    engine = scripted({"multi": 40 * NS, "grouped": 60 * NS, "asc": 20 * NS}, sample=64, repeats=2, period=10**6)
    feed(engine, batches_of(100, 10))
    # two rounds of a 16- and a 64-row slice per engine, each slice whole in one batch of 100 rows (a slice that
    # does not fit in the rest of a batch waits for the next one); the fitted winner and the engine within
    # `close` of it are then timed on a live-size call each, one per batch: ASC wins and is adopted
    assert engine.engines["grouped"].sizes == [WARM_ROWS, 16, 64, 16, 64]
    # ASC's slices, the rows left in a batch once it leads the first round (the interim engine), its live-size
    # call, then the live batch after its adoption
    assert engine.engines["asc"].sizes == [WARM_ROWS, 16, 64, 16, 4, 20, 64, 36, 36, 100, 100]
    assert engine.history == [(800, "asc")] and engine.choice == "asc" and engine.probes == 1
    # the decision rests on the live-size calls: 10 us per call spread over 100 rows, plus the cost per tuple
    assert engine.cost["asc"] == pytest.approx(120 * NS) and engine.cost["multi"] == pytest.approx(140 * NS)
    # the rows probed on the engines not chosen: the grouped filter's slices, multi's slices and its verification
    assert engine.probed_tuples == 2 * 80 + (2 * 80 + 100)


def test_batches_below_sample_rows_go_to_the_current_choice_unprobed():
    engine = scripted({"multi": 40 * NS, "grouped": 60 * NS, "asc": 20 * NS}, sample=64, repeats=1)
    feed(engine, batches_of(63, 10))
    assert engine.probes == 0 and engine.choice == "multi" and engine.tuples_seen == 630
    assert engine.engines["multi"].sizes == [63] * 10 and not engine.engines["asc"].calls
    feed(engine, batches_of(64, 1))
    assert engine.probes == 1


def test_slow_engines_are_dropped_after_the_first_round():
    engine = scripted(
        {"multi": 200 * NS, "multi-batch": 1 * NS, "grouped": 300 * NS, "asc": 20 * NS},
        sample=64,
        repeats=3,
        period=10**6,
        eliminate=1e-9,
    )
    feed(engine, batches_of(2_000, 5))
    # with a factor of 1 only the best survives the first round: one round of two slices per engine, then the
    # winner's live-size call on the next batch
    assert engine.engines["multi"].sizes == [WARM_ROWS, 16, 64]
    assert engine.engines["grouped"].sizes == [WARM_ROWS, 16, 64]
    assert engine.engines["multi-batch"].sizes == [WARM_ROWS]  # 2,000-row batches: no whole batch to time
    assert engine.history == [(2_000, "asc")]
    assert engine.probed_tuples == 2 * (16 + 64)


def test_a_loser_by_far_is_not_verified_beside_the_winner():
    engine = scripted({"multi": 20 * NS, "grouped": 100 * NS}, sample=64, repeats=1, period=10**6)
    feed(engine, batches_of(500, 3))
    # grouped fits at 3x multi: multi alone gets a live-size call (the rest of the first batch as the interim,
    # then a whole batch)
    assert engine.engines["grouped"].sizes == [WARM_ROWS, 16, 64]
    assert engine.engines["multi"].sizes == [WARM_ROWS, 16, 64, 340, 500, 500]
    assert engine.history == [(500, "multi")]


def test_live_calls_are_cut_to_chunk_rows_and_predicted_at_that_size():
    engine = scripted({"multi": 40 * NS, "grouped": 60 * NS, "asc": 20 * NS}, sample=64, repeats=1, chunk=100)
    feed(engine, batches_of(300, 2))
    assert engine.choice == "asc"
    for name in engine.engines:
        del engine.engines[name].calls[:]
    feed(engine, batches_of(350, 2))
    assert engine.engines["asc"].sizes == [100, 100, 100, 50] * 2
    assert not engine.engines["multi"].calls and not engine.engines["grouped"].calls
    # the choice's cost is that of a live call: 10 us per 100 rows, plus its cost per tuple
    assert engine.cost["asc"] == pytest.approx(10 * US / 100 + 20 * NS)


def test_a_large_batch_is_one_call_of_a_serial_engine_up_to_chunk_rows():
    engine = scripted({"multi": 40 * NS, "asc": 20 * NS}, sample=64, repeats=1, period=10**7, chunk=1_000)
    feed(engine, batches_of(800, 3))
    asc = engine.engines["asc"]
    del asc.calls[:]
    feed(engine, batches_of(2_500, 1) + batches_of(900, 1))
    assert asc.sizes == [1_000, 1_000, 500, 900]


def test_drift_of_the_drop_ratio_triggers_a_reprobe_and_scheduled_reprobes_back_off():
    engine = scripted(
        {"multi": 20 * NS, "multi-batch": 30 * NS, "grouped": 80 * NS, "asc": 60 * NS},
        sample=64,
        repeats=1,
        period=40_000,
        drift=0.3,
        margin=1.0,
        budget=1.0,
    )
    batch = 4_096
    starts = []  # the tuples seen before each probe began

    def until_probe(columns, probes):
        while engine.probes < probes:
            seen, before = engine.tuples_seen, engine.probes
            engine.match(columns)
            if engine.probes > before:
                starts.append(seen)

    matching = {"a": np.full(batch, 10.0)}  # every tuple satisfies every label: nothing dropped
    dropped = {"a": np.full(batch, -1.0)}  # no label satisfied: everything dropped
    until_probe(matching, 3)
    decided = engine.history[0][0]  # the first probe's decision, after its live-size verification
    assert engine.history == [(batch, "multi")]
    # the second probe one period after the decision; it confirmed the choice, so the third waited two
    assert starts[1] == decided + 40_000 + (-(decided + 40_000) % batch)
    assert starts[2] - starts[1] == 80_000 + (-80_000 % batch)
    scheduled = starts[2] + 160_000  # the fourth, were the data unchanged: four periods later
    for _ in range(WINDOW // batch):
        engine.match(matching)  # a statistics window on the data the choice was confirmed on
    assert engine.probes == 3
    drifted = engine.tuples_seen
    until_probe(dropped, 4)
    # the drop ratio moved from 0 to 1 >= drift: re-probed after at most two statistics windows (the first may
    # have begun before the drift), long before the scheduled re-probe
    assert starts[3] - drifted <= 2 * WINDOW < scheduled - drifted


def test_a_stream_alternating_between_known_states_is_not_reprobed():
    engine = scripted({"multi": 20 * NS}, sample=64, repeats=1, period=10**7, drift=0.3, budget=1.0)
    batch = 4_096
    window = WINDOW // batch
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


def test_clear_losers_are_screened_on_one_slice_with_exponential_back_off():
    engine = scripted(
        {"multi": 20 * NS, "grouped": 800 * NS}, sample=64, repeats=1, period=1_000, margin=1.0, budget=1.0
    )
    probes = feed(engine, batches_of(500, 260, value=10.0))  # no drift: every re-probe is a scheduled one
    # the first probe: both slice sizes each, the interim engine's call on the rest of the first batch
    # (500 - 2 x 80 rows), then the winner's live-size call (the next 500-row batch)
    assert engine.history == [(500, "multi")]
    assert probes[0] == {"multi": [WARM_ROWS, 16, 64, 340, 500], "grouped": [WARM_ROWS, 16, 64]}
    screened = [i for i, probe in enumerate(probes) if probe["grouped"]]
    # screened at the first re-probe, then after sitting out 1, 3, 7, 7, ... re-probes (back-off 2, 4, 8, 8)
    assert screened == [0, 1, 3, 7, 15, *range(23, len(probes), 8)]
    for i, probe in enumerate(probes[1:], start=1):
        assert probe["multi"] == [16, 64, 420 - 16 * (i in screened)]  # the rest of the batch: live
        assert probe["grouped"] == ([16] if i in screened else [])
    # the choice's scheduled re-probes back off too: one period, then 2, 4 and 8 at most
    assert len(probes) == 19 and engine.probes == 19


def test_a_large_move_of_the_drop_ratio_screens_backed_off_losers():
    engine = scripted(
        {"multi": 20 * NS, "grouped": 800 * NS},
        sample=64,
        repeats=1,
        period=4_096,
        drift=0.3,
        max_backoff=64,
        margin=1.0,
        budget=1.0,
    )
    matching = {"a": np.full(4_096, 10.0)}  # drop ratio 0
    dropped = {"a": np.full(4_096, -1.0)}  # drop ratio 1
    probes = feed(engine, [matching] * 40)
    # screened at re-probes 1 and 3, then back-off 4: re-probes 4 and 5 leave it out
    assert [bool(p["grouped"]) for p in probes] == [True, True, False, True, False, False]
    probes = feed(engine, [matching] * 8)  # the next scheduled re-probe is 32 periods away
    assert not probes
    more = feed(engine, [dropped] * (2 * WINDOW // 4_096))
    assert len(more) == 1 and more[0]["grouped"] == [16]  # the drift re-probe screens the loser at once


def test_a_loser_that_passes_its_screen_gets_a_full_round_and_can_win():
    engine = scripted({"multi": 20 * NS, "grouped": 100 * NS}, sample=64, repeats=1, period=1_000, budget=1.0)
    assert feed(engine, batches_of(500, 3))
    assert engine.history == [(500, "multi")]
    engine.engines["grouped"].scale(0.1)  # the grouped filter gets 10x faster (its data changed, say)
    probes = feed(engine, batches_of(500, 2))
    # its screening slice predicts it within `eliminate` of multi: it rejoins for a full round of both sizes
    # (beside multi's), then both are timed side by side at half a batch each, and it wins
    assert probes == [{"multi": [16, 64, 16, 64, 244, 250], "grouped": [16, 16, 64, 250]}]
    assert engine.history == [(500, "multi"), (2_000, "grouped")]
    assert engine.cost["grouped"] == pytest.approx(1 * US / 250 + 10 * NS)
    assert engine.cost["multi"] == pytest.approx(10 * US / 250 + 20 * NS)


def test_whole_batches_are_a_timed_candidate_and_run_whole_when_chosen():
    engine = scripted(
        {"multi": 400 * NS, "multi-batch": 1 * NS}, sample=64, repeats=2, period=10**6, chunk=100, margin=0.0
    )
    feed(engine, batches_of(400, 10))
    # the whole-batch engine is timed on whole batches (the first at the first batch's start) and wins on
    # the median of three; the sliced width is eliminated after its first round
    assert engine.history == [(1_200, "multi-batch")]
    assert engine.engines["multi"].sizes == [WARM_ROWS, 16, 64]
    assert engine.engines["multi-batch"].sizes == [WARM_ROWS, 400, 320, 400, 400, *[400] * 6]
    assert engine.probed_tuples == 16 + 64
    assert engine.cost["multi-batch"] == pytest.approx(10 * US / 400 + 1 * NS)


def test_a_slow_whole_batch_engine_loses_and_is_screened_on_one_batch():
    engine = scripted(
        {"multi": 20 * NS, "multi-batch": 400 * NS}, sample=64, repeats=1, period=800, chunk=100, margin=1.0, budget=1.0
    )
    probes = feed(engine, batches_of(400, 40, value=10.0))
    assert engine.history == [(400, "multi")]
    # the sliced winner is verified on a live-size call (chunk = 100 rows), not beside the far slower whole batch;
    # the rest of the batch runs live in chunks
    assert probes[0] == {"multi": [WARM_ROWS, 16, 64, 100, 100, 100, 20], "multi-batch": [WARM_ROWS, 400]}
    # a re-probe times the loser on one whole batch at most, with the back-off of a sliced loser (and the
    # choice's scheduled re-probes back off too: 1, 2, 4 and 8 periods)
    assert [p["multi-batch"] for p in probes[1:]] == [[400], [], [400], []]


def test_a_whole_batch_choice_matches_the_rest_of_a_probed_batch_on_the_thread_pool():
    engine = scripted(
        {"multi": 400 * NS, "multi-batch": 1 * NS}, sample=64, repeats=1, period=16_384, margin=0.0, budget=1.0
    )
    feed(engine, batches_of(8_192, 8))
    assert engine.choice == "multi-batch" and engine.probes >= 2
    # a re-probe's sliced rows at the head of a batch (16 + 64 rows, or 16 to screen a clear loser): the rest
    # on the thread pool all the same (alone it would have run the serial kernel), every other batch whole
    calls = set(engine.engines["multi-batch"].calls[1:])
    rests = {(8_192 - 16 - 64, True), (8_192 - 16, True)}
    assert calls & rests and calls <= {(8_192, None)} | rests


def test_re_probes_wait_for_the_probing_budget():
    counts = {}
    for budget in (0.0, 0.2, 1.0):
        engine = scripted(
            {"multi": 20 * NS, "grouped": 800 * NS}, sample=64, repeats=1, period=1_000, margin=1.0, budget=budget
        )
        feed(engine, batches_of(500, 40))
        counts[budget] = engine.probes
    # budget 0: the first probe only, as every later one would cost more than no time at all; 1: a re-probe
    # after every period (doubling while the choice holds); 0.2: the second probe waits until the time spent
    # matching is five times what the first cost (and the second will), the later ones are on schedule
    assert counts == {0.0: 1, 0.2: 3, 1.0: 5}


def test_a_sliced_winner_close_to_the_whole_batch_engine_is_timed_beside_it_on_one_batch():
    engine = scripted(
        {"multi": 20 * NS, "multi-batch": 400 * NS},
        sample=64,
        repeats=1,
        period=10**6,
        chunk=100,
        margin=0.0,
        close=1e9,  # every verified sliced winner counts as close
    )
    probes = feed(engine, batches_of(400, 4))
    # the whole-batch engine timed twice (its round, then over the batch in which the winner made its second
    # live-size call), and the choice made on those paired live-size times
    assert probes[0] == {"multi": [WARM_ROWS, 16, 64, 100, 100], "multi-batch": [WARM_ROWS, 400, 400]}
    assert engine.history == [(400, "multi")]
    assert engine.cost == pytest.approx({"multi": 10 * US / 100 + 20 * NS, "multi-batch": 10 * US / 400 + 400 * NS})


def test_sliced_engines_close_to_the_winner_are_timed_beside_it_at_the_live_size():
    engine = scripted(
        {"multi": 20 * NS, "grouped": 30 * NS, "asc": 15 * NS},
        sample=64,
        repeats=1,
        period=10**6,
        chunk=100,
        margin=0.0,
        close=1e9,  # every sliced engine counts as close to the winner ...
        eliminate=1e9,  # ... and none is eliminated by the rounds
    )
    feed(engine, batches_of(400, 3))
    # each engine timed on a live-size call (chunk = 100 rows) side by side, the choice made on those
    assert all(100 in engine.engines[name].sizes for name in ("multi", "grouped", "asc"))
    assert engine.history == [(400, "asc")]
    live_size = {"multi": 100 * NS + 20 * NS, "grouped": 100 * NS + 30 * NS, "asc": 100 * NS + 15 * NS}
    assert engine.cost == pytest.approx(live_size)


def test_a_re_probe_times_the_current_choice_beside_the_fitted_winner_and_switches():
    engine = scripted(
        {"multi": 20 * NS, "grouped": 30 * NS},
        sample=64,
        repeats=1,
        period=1_000,
        budget=1.0,
        chunk=100,
        eliminate=1e9,  # no clear losers: both engines get full rounds in every re-probe
    )
    assert len(feed(engine, batches_of(400, 4))) == 2 and engine.choice == "multi"
    engine.engines["multi"].scale(8)  # the choice becomes 8x slower
    probes = feed(engine, batches_of(400, 6))
    assert len(probes) == 1
    # the switch was decided on the two engines' live-size calls, side by side
    assert engine.history[-1][1] == "grouped" and len(engine.history) == 2
    assert 100 in probes[-1]["multi"] and 100 in probes[-1]["grouped"]
    assert engine.cost == pytest.approx({"multi": 8 * (100 * NS + 20 * NS), "grouped": 100 * NS + 30 * NS})


def test_a_choice_slower_than_measured_on_the_same_data_is_probed_again():
    runs = {}
    for slower in (False, True):
        engine = scripted({"multi": 20 * NS, "grouped": 100 * NS}, sample=64, repeats=1, period=10**7, budget=1.0)
        batch = batches_of(4_096, 1)[0]
        window = WINDOW // 4_096
        for _ in range(2 + 2 * window):  # the probe and its verification, the reference window, a steady one
            engine.match(batch)
        assert engine.probes == 1
        if slower:
            engine.engines[engine.choice].scale(4)  # as if the machine got 4x slower for it
        for _ in range(window + 1):
            engine.match(batch)
        runs[slower] = engine.probes
    # same drop ratio, 4x the measured cost: probed again after one window
    assert runs == {False: 1, True: 2}


def test_on_a_crowded_machine_the_thread_pool_is_left_out_of_probes():
    crowded = [True]
    engine = scripted(
        {"multi": 20 * NS, "multi-batch": 1 * NS, "grouped": 30 * NS, "asc": 40 * NS},
        crowded=lambda: crowded[0],
        sample=64,
        repeats=1,
        period=2_000,
        budget=1.0,
        chunk=100,
    )
    probes = feed(engine, batches_of(400, 10))
    assert len(probes) >= 2 and engine.choice == "multi"
    assert engine.engines["multi-batch"].sizes == [WARM_ROWS] and "multi-batch" not in engine.cost
    crowded[0] = False  # the machine quietens: the next re-probe times the pool again, and it wins
    probes = feed(engine, batches_of(400, 20))
    assert probes[0]["multi-batch"][0] == 400 and engine.choice == "multi-batch"


def test_a_thread_pool_choice_is_re_made_among_the_serial_engines_when_the_machine_gets_crowded():
    crowded = [False]
    engine = scripted(
        {"multi": 200 * NS, "multi-batch": 1 * NS, "grouped": 300 * NS, "asc": 250 * NS},
        crowded=lambda: crowded[0],
        sample=64,
        repeats=1,
        period=2_000,
        budget=1.0,
        chunk=100,
    )
    probes = feed(engine, batches_of(400, 4))
    assert engine.history == [(1_200, "multi-batch")]
    assert all(probes[0][name] == [WARM_ROWS, 16, 64] for name in ("multi", "grouped", "asc"))  # clear losers
    crowded[0] = True
    probes = feed(engine, batches_of(400, 6))
    # the serial engines lost against a choice that cannot run now: each gets a full round, and the close
    # contenders a live-size call, instead of the clear losers' screening slice
    assert probes == [
        {"multi": [16, 64, 100, 100, 100, 100], "multi-batch": [60], "grouped": [16, 64], "asc": [16, 64, 100]},
    ]
    assert engine.history == [(1_200, "multi-batch"), (3_600, "multi")] and "multi-batch" not in engine.cost


def test_engines_that_lost_against_a_choice_are_screened_against_a_new_one():
    engine = scripted(
        {"multi": 20 * NS, "grouped": 800 * NS, "asc": 40 * NS},
        sample=64,
        repeats=1,
        period=1_000,
        budget=1.0,
        eliminate=2.0,  # ASC stays a contender, the grouped filter is a clear loser
    )
    probes = feed(engine, batches_of(500, 31))
    assert [bool(p["grouped"]) for p in probes] == [True, True, False, True]  # then it sits out three
    engine.engines["multi"].scale(10)  # multi falls behind ASC
    probes = feed(engine, batches_of(500, 10))
    # the next re-probe switches to ASC while the grouped filter sits out; it lost against multi, so it is
    # screened against ASC at the re-probe after the switch instead of sitting out two more
    assert engine.history == [(500, "multi"), (17_500, "asc")]
    assert [p["grouped"] for p in probes] == [[], [16]]


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


def test_the_choice_and_the_settings_survive_a_round_trip_the_learned_costs_do_not():
    engine = scripted({"multi": 40 * NS, "grouped": 60 * NS, "asc": 20 * NS}, sample=64, repeats=1)
    columns = batches_of(300, 1)[0]
    feed(engine, [columns] * 3)
    assert engine.choice == "asc" and engine.cost
    copy = AdaptiveMultiMatcher.from_arrays(engine.to_arrays())
    assert copy.settings == engine.settings and copy.labels == engine.labels
    assert copy.choice == "asc" and not copy.cost and copy.probes == 0 and not copy.history
    assert np.array_equal(copy.match({"a": columns["a"][:63]}), reference_a(THRESHOLDS, {"a": columns["a"][:63]}))
    assert copy.engines["asc"].tuples_seen == 63  # the copy runs on the choice it was given


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"engines": ("rtree",)}, "engines"),
        ({"engines": ()}, "engines"),
        ({"sample": 8}, "sample 8"),
        ({"period": 0}, "period 0"),
        ({"budget": -0.1}, r"budget -0\.1"),
        ({"sample": 64, "chunk": 32}, "chunk 32"),
        ({"close": 0.0, "verify_rows": -1}, r"close 0\.0, verify_rows -1"),
    ],
)
def test_bad_settings_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveSettings(**options)
