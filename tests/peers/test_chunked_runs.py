"""A run cut into chunks of time and stitched by the chain of queue states (peers/spark.py) equals the
whole run, number for number, without Spark: each chunk is simulated here by the executors' own function
(:func:`peers.spark_tasks.simulate_chunk`), the latency ranks are read off the chunks' latencies.

The backlog scenarios are the ones where stitching is not free: a link still busy when the next chunk's
first tuples arrive.  There the first guess (every link free) is wrong, the chain must run chunks again,
and the naive stitch of first guesses must differ from the whole run (else the test would prove nothing).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from network.buffers import QueueState
from network.exactness import Counts
from network.latency import ranks_needed
from network.linkrule import TICKS, to_seconds, to_ticks
from network.meter import StrategyRun
from network.routing import Network
from peers.local import Simulation, run_local
from peers.spark import OVERALL, _cut, _holds, _Totals, _warm_up_windows, chain, cut_windows
from peers.spark_tasks import Bins, Chunk, ChunkJob, ChunkSummary, simulate_chunk
from reports.report import strategy_entry
from sharing import make_plan
from topologies.expected import expected_results
from topologies.loader import load_scenario
from topologies.model import NetworkEvent

FIGURE1 = "topologies/figure1.yaml"


def _variant(tmp_path_factory, name: str, replace: dict[str, str]) -> str:
    with open(FIGURE1, encoding="utf-8") as file:
        text = file.read()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path_factory.mktemp(name) / f"{name}.yaml"
    path.write_text(text.replace("name: figure1", f"name: {name}"), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> dict[str, str]:
    """figure1 as shipped (no queueing to speak of); figure1 with SP4 -> SP5 slower than one copy of the
    stream (a backlog that grows for the whole run); the same with a 2 KB buffer there (a full buffer
    dropping tuples for the whole run); and large.yaml, whose data-shipping plan queues
    several streams of different rates at shared links (backlogs that come and go)."""
    return {
        "figure1": FIGURE1,
        "overloaded": _variant(
            tmp_path_factory, "overloaded", {"    - [SP4, SP5]\n": "    - [SP4, SP5, {bandwidth: 20Kbit}]\n"}
        ),
        "large": "topologies/large.yaml",
        "buffered": _variant(
            tmp_path_factory, "buffered", {"    - [SP4, SP5]\n": "    - [SP4, SP5, {bandwidth: 20Kbit, buffer: 2KB}]\n"}
        ),
    }


@cache
def _setup(path: str, strategy: str):
    scenario = load_scenario(path)
    return scenario, make_plan(scenario, strategy, Network.of(scenario))


def _chunked(
    scenario, plan, chunks: int, *, naive: bool = False, warm: int | None = None, rejected_at=None, slots: int = 3
):
    """The run stitched from ``chunks`` chunks, ``slots`` runs at a time, each guess warmed up over ``warm``
    windows (default: the engine's): (StrategyRun, the chosen runs).  ``rejected_at`` replaces the plan's
    rejections at re-plans."""
    simulation = Simulation(scenario, plan)
    if rejected_at is not None:
        simulation.rejected_at = rejected_at
    windows = simulation.windows()
    job = ChunkJob(simulation, tuple(windows))
    cuts = _cut(simulation, windows, chunks)
    latencies: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def simulate(chunk: Chunk) -> ChunkSummary:
        summary, owners, values = simulate_chunk(job, chunk)
        latencies[(chunk.number, chunk.attempt)] = (owners, values)
        return summary

    def start(chunk: Chunk) -> Future:
        future = Future()
        future.set_result(simulate(chunk))
        return future

    free = simulation.queues.free()
    if naive:
        runs = [simulate(Chunk(k, 0, a, b, free, a, k > 0)) for k, (a, b) in enumerate(cuts)]
    else:
        warm = _warm_up_windows(windows) if warm is None else warm
        runs = chain(start, windows, cuts, free, warm, slots=slots)
    return _stitched(simulation, plan.strategy, runs, latencies), runs


def _stitched(simulation, strategy: str, runs: list[ChunkSummary], latencies) -> StrategyRun:
    """The StrategyRun the chosen ``runs`` add up to (``latencies[(chunk, attempt)]``: each run's owners and
    latencies), the latency ranks read off the chunks' latencies."""
    totals = _Totals(simulation)
    for run in runs:
        totals.add(run)
    owners = np.concatenate([latencies[(r.number, r.attempt)][0] for r in runs])
    values = np.concatenate([latencies[(r.number, r.attempt)][1] for r in runs])
    ranked = {}
    for key, ranks in totals.targets().items():
        mine = np.sort(values if key == OVERALL else values[owners == key])
        ranked.update({(key, r): float(mine[r]) for r in ranks})
    return simulation.with_plan(totals.run(strategy, ranked))


def _assert_same(scenario, whole, stitched, *, failures: bool = False) -> None:
    """The stitched run is the whole one.  ``failures``: but for the missing and extra copies, checked by
    the caller (this report entry of the whole run does not know lost and unreachable tuples yet)."""
    mine, theirs = strategy_entry(scenario, stitched), strategy_entry(scenario, whole)
    if failures:
        for sub, truth in zip(mine["subscriptions"], theirs["subscriptions"], strict=True):
            sub["missing"], sub["extra"] = truth["missing"], truth["extra"]
        mine["exact"] = theirs["exact"]
    assert mine == theirs
    assert stitched.access_link_bytes == whole.access_link_bytes
    assert stitched.delivered_attrs == whole.delivered_attrs
    assert stitched.timeline.keys() == whole.timeline.keys()
    for direction, series in whole.timeline.items():
        np.testing.assert_array_equal(stitched.timeline[direction], series, err_msg=str(direction))
    assert stitched.link_dropped == whole.link_dropped
    assert stitched.access_link_tuples == whole.access_link_tuples
    for name in ("offered", "landed"):
        mine, theirs = getattr(stitched, name), getattr(whole, name)
        assert mine.keys() == theirs.keys()
        for key, series in theirs.items():
            np.testing.assert_array_equal(mine[key], series, err_msg=f"{name} {key}")


@pytest.mark.parametrize("name", ["figure1", "overloaded", "buffered"])
@pytest.mark.parametrize("strategy", ["data-shipping", "sharing-em"])
@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_a_run_stitched_from_chunks_is_the_whole_run(scenarios, name, strategy, chunks):
    scenario, plan = _setup(scenarios[name], strategy)
    whole = run_local(scenario, plan)
    assert sum(len(v) for v in whole.delivered.values()) > 0
    stitched, runs = _chunked(scenario, plan, chunks)
    assert [r.number for r in runs] == list(range(len(runs)))
    _assert_same(scenario, whole, stitched)
    if (name, strategy) == ("buffered", "data-shipping"):
        assert sum(stitched.summary[s].dropped for s in stitched.summary) > 0  # the buffer did drop
    if name == "overloaded" and strategy == "data-shipping" and chunks > 1:
        # the backlog grows through the run (no buffer bounds it, unlike "buffered"'s 0.8 s of 2 KB at
        # 20 kbit/s, where a guess may hold): every chunk but the first needs the true state
        assert not any(r.guessed for r in runs[1:])


@pytest.mark.parametrize("failures", [False, True])
@pytest.mark.parametrize("chunks", [3, 7])
def test_records_shipped_across_chunks_are_those_of_the_whole_run(chunks, failures):
    # query-shipping's records (docs/ACCOUNTING.md, "Records") leave when their windows close, often chunks
    # after their inputs: held back from chunk to chunk, dropped on a slow link and at the busy source
    from tests.test_record_flows import _congested, figure1_aggregates

    scenario = _congested(figure1_aggregates())
    if failures:
        scenario = replace(scenario, events=FAILURES)
    plan = make_plan(scenario, "query-shipping", Network.of(scenario))
    whole = run_local(scenario, plan)
    stitched, _ = _chunked(scenario, plan, chunks)
    _assert_same(scenario, whole, stitched, failures=failures)
    for field in ("record_delivered", "record_latencies", "record_dropped", "record_lost"):
        mine, theirs = getattr(stitched, field), getattr(whole, field)
        assert mine.keys() == theirs.keys(), field
        for sub in theirs:
            np.testing.assert_array_equal(mine[sub], theirs[sub], err_msg=f"{field} {sub}")
    assert len(whole.record_dropped["Q1"]) > 0
    if failures:
        assert sum(len(lost) for lost in whole.record_lost.values()) > 0


# on the routes of figure1's static plans: SP4-SP5 carries every stream, SP1 is Q1's and Q3's way, SP5-SP6
# Q2's, and fails for good
FAILURES = (
    NetworkEvent(12.0, "fail", "link", ("SP4", "SP5")),
    NetworkEvent(19.5, "recover", "link", ("SP5", "SP4")),
    NetworkEvent(33.0, "fail", "super_peer", ("SP1",)),
    NetworkEvent(41.0, "recover", "super_peer", ("SP1",)),
    NetworkEvent(38.0, "fail", "link", ("SP5", "SP6")),
)


@pytest.mark.parametrize("name", ["figure1", "overloaded", "buffered"])
@pytest.mark.parametrize("strategy", ["data-shipping", "sharing-em"])
@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_failures_lose_the_same_tuples_in_chunks_as_in_the_whole_run(scenarios, name, strategy, chunks):
    # the plan made without the failures keeps its routes through them: every expected tuple is delivered,
    # dropped or lost, exactly once; a failure empties a backlogged queue, which the chunks must carry
    static, plan = _setup(scenarios[name], strategy)
    scenario = replace(static, events=FAILURES)
    whole = run_local(scenario, plan)
    stitched, _ = _chunked(scenario, plan, chunks)
    expected = expected_results(static)
    for sub in scenario.subscriptions:
        parts = [whole.delivered[sub.id], whole.dropped[sub.id], whole.lost[sub.id]]
        wanted = expected.indices[sub.id]
        assert np.sort(np.concatenate(parts)).tolist() == wanted.tolist(), sub.id
        found = stitched.summary[sub.id]
        assert (found.delivered, found.dropped, found.lost) == tuple(len(p) for p in parts)
        # while SP1 is down, Q1 (at SP1) and Q3 (at SP3, behind SP1) are cut off from the source: those
        # tuples are unreachable, and as the static plan kept its routes, accounted for twice (extra)
        emitted = wanted / static.stream(sub.stream).rate
        cut = int(((emitted >= 33) & (emitted < 41)).sum()) if sub.id in ("Q1", "Q3") else 0
        assert (found.missing, found.extra, found.unreachable) == (0, cut, cut)
    assert sum(whole.link_lost.values()) > 0 and stitched.link_lost == whole.link_lost
    if name != "buffered":  # (there SP4-SP5's buffer drops every copy for Q2)
        assert whole.link_lost[("SP5", "SP6")] > 0  # never recovered
    assert stitched.summary["Q1"].unreachable > 0
    _assert_same(scenario, whole, stitched, failures=True)


def test_stitching_first_guesses_under_a_backlog_would_be_wrong(scenarios):
    scenario, plan = _setup(scenarios["overloaded"], "data-shipping")
    whole = run_local(scenario, plan)
    naive, _ = _chunked(scenario, plan, 3, naive=True)
    assert strategy_entry(scenario, naive)["latency_s"] != strategy_entry(scenario, whole)["latency_s"]


def test_a_warm_up_before_each_guess_spares_the_reruns_of_backlogs_that_drain(scenarios):
    # large.yaml's data-shipping plan queues several streams at shared links: backlogs that come and go
    scenario, plan = _setup(scenarios["large"], "data-shipping")
    whole = run_local(scenario, plan)
    cold, cold_runs = _chunked(scenario, plan, 8, warm=0)
    warm, warm_runs = _chunked(scenario, plan, 8)
    assert any(r.attempt >= 1 for r in cold_runs)  # from all links free, some chunks start inside a backlog
    assert all(r.attempt == 0 for r in warm_runs)  # warmed up, every first guess holds
    assert sum(r.guessed for r in warm_runs) >= 4  # and guesses were tried: the backlogs drain
    _assert_same(scenario, whole, cold)
    _assert_same(scenario, whole, warm)


def _state(busy, waiting=()):
    """Two link directions, the second with a buffer whose ring holds ``waiting`` (start, bytes) pairs."""
    ring_start, ring_bytes = np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64)
    for i, (start, size) in enumerate(waiting):
        ring_start[0, i], ring_bytes[0, i] = to_ticks(start), size
    count = np.array([len(waiting)])
    return QueueState(
        to_ticks(busy),
        np.array([-1, 0]),
        ring_start,
        ring_bytes,
        np.zeros(1, np.int64),
        count,
        np.array([sum(size for _, size in waiting)], np.int64),
    )


def _run(start: QueueState, first_arrival: list[float]) -> ChunkSummary:
    """A chunk's run that started from ``start``, with only what :func:`_holds` reads filled in."""
    empty = np.zeros(0)
    links = [empty] * 7
    streams = [empty, empty, 0.0]  # per-stream bytes and tuples, the last arrival
    head = [0, 0, True, start, start, to_ticks(first_arrival)]
    return ChunkSummary(*head, *links, {}, {}, {}, Counts.zeros(0), [], (empty, 1, 0), *streams)


def test_a_run_holds_where_both_states_were_free_before_its_first_arrival():
    assert _holds(_run(_state([0.0, 0.0]), [1.0, np.inf]), _state([1.0, 5.0]))
    assert not _holds(_run(_state([0.0, 0.0]), [1.0, np.inf]), _state([1.5, 0.0]))
    assert _holds(_run(_state([2.0, 0.0]), [1.0, 3.0]), _state([2.0, 3.0]))  # the very same start
    assert not _holds(_run(_state([2.0, 0.0]), [1.0, 3.0]), _state([1.0, 0.0]))  # started later than the truth


def test_a_run_holds_over_a_buffer_only_when_its_waiting_tuples_agree_or_are_gone_by_its_first_arrival():
    busy = _state([0.0, 4.0], [(2.0, 24.0), (3.0, 24.0)])
    assert _holds(_run(busy, [1.0, 2.0]), busy)  # the same state, tuples waiting and all
    assert not _holds(_run(busy, [1.0, 2.0]), _state([0.0, 4.0], [(2.0, 24.0), (3.0, 32.0)]))  # other bytes
    assert not _holds(_run(busy, [1.0, 2.0]), _state([0.0, 4.0], [(3.0, 24.0)]))  # fewer tuples waiting
    # both idle and drained before the first arrival at the buffered link: the rings no longer matter
    assert _holds(_run(busy, [1.0, 4.5]), _state([0.0, 4.5], [(3.5, 24.0)]))
    assert not _holds(_run(busy, [1.0, 4.5]), _state([0.0, 5.0], [(4.0, 24.0)]))


def test_the_true_state_carries_over_the_links_a_chunk_never_used():
    before, end = _state([1.0, 7.0], [(6.0, 24.0)]), _state([3.0, 0.0])
    after = before.then(end, to_ticks([2.0, np.inf]))
    assert to_seconds(after.busy).tolist() == [3.0, 7.0]
    assert [a.tolist() for a in after.waiting(0)] == [[6 * TICKS], [24]]
    used = before.then(end, to_ticks([2.0, 0.5]))
    assert to_seconds(used.busy).tolist() == [3.0, 0.0] and used.ring_count.tolist() == [0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=60), st.integers(1, 12))
def test_chunks_are_consecutive_cover_every_window_and_hold_about_their_share(per_window, wanted):
    cuts = cut_windows(np.cumsum(per_window), wanted)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(per_window)
    assert all(a < b for a, b in cuts) and all(b == c for (_, b), (c, _) in pairwise(cuts))
    assert len(cuts) <= wanted
    share = sum(per_window) / wanted
    for a, b in cuts[:-1]:
        assert sum(per_window[a:b]) <= share + max(per_window)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 8), st.integers(0, 4))
def test_chunks_counting_their_warm_ups_are_the_best_split(per_window, wanted, warm):
    cuts = cut_windows(np.cumsum(per_window, dtype=np.int64), wanted, warm)
    n = len(per_window)
    assert [w for cut in cuts for w in range(*cut)] == list(range(n))  # consecutive, every window once
    assert len(cuts) == min(wanted, n)

    def cost(a, b):  # a chunk after the first also plays the warm windows before it
        return sum(per_window[max(0, a - warm) if a else 0 : b])

    # the plain reference: the least largest cost of any split into at most ``wanted`` chunks
    best = {(0, 0): 0}
    for m in range(1, wanted + 1):
        for j in range(1, n + 1):
            options = [max(best[(i, m - 1)], cost(i, j)) for i in range(j) if (i, m - 1) in best]
            if options:
                best[(j, m)] = min(options)
    least = min((best[(n, m)] for m in range(1, wanted + 1) if (n, m) in best), default=0)
    assert max((cost(a, b) for a, b in cuts), default=0) == least


def test_ranks_cover_every_percentile():
    assert ranks_needed(0) == set()
    assert ranks_needed(1) == {0}
    assert ranks_needed(101) == {50, 51, 99, 100}  # p50 falls on rank 50 exactly: weight 0 for 51


def test_chunks_count_the_copies_missing_before_a_rejection_at_a_re_plan(scenarios):
    # figure1's plan with its epochs cut at [30, 32): what is emitted then reaches nobody; say the planner
    # rejected Q3 at 31 and Q1 at 25 (as at a failure): each is checked up to then, chunk by chunk
    scenario, plan = _setup(scenarios["figure1"], "data-shipping")
    epochs = []
    for epoch in plan.epochs:
        if epoch.start < 30 < epoch.end:
            epochs += [replace(epoch, end=30.0), replace(epoch, start=32.0)]
        else:
            epochs.append(epoch)
    plan = plan.with_epochs(tuple(epochs))
    rejected_at = {"Q3": 31.0, "Q1": 25.0}
    whole = run_local(scenario, plan)
    stitched, _ = _chunked(scenario, plan, 3, rejected_at=rejected_at)
    expected = expected_results(scenario)
    for sub in scenario.subscriptions:
        found = stitched.summary[sub.id].missing_before_rejection
        if sub.id not in rejected_at:
            assert found is None
            continue
        wanted = expected.indices[sub.id]
        before = wanted[wanted / scenario.stream(sub.stream).rate < rejected_at[sub.id]]
        assert found == len(set(before.tolist()) - set(whole.delivered[sub.id].tolist())), sub.id
    assert stitched.summary["Q3"].missing_before_rejection > 0
    assert stitched.summary["Q1"].missing_before_rejection == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 8), st.integers(0, 6), st.integers(0, 3)).map(
            lambda t: np.pad(np.arange(1, t[1] * 3 + 1).reshape(3, t[1]) % 4, ((0, 0), (t[0], t[2])))
        ),
        min_size=1,
        max_size=6,
    )
)
def test_trimmed_bins_add_up_to_the_dense_matrices(parts):
    """Per-bin matrices kept from their first to their last non-zero column add up, at every width, to the
    dense sum (narrower ones padded with zero bins): what a chunk's summary sends is all the driver needs."""
    width = max(p.shape[1] for p in parts)
    dense = sum(np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts)
    total = np.zeros((3, 0), np.int64)
    for part in parts:
        bins = Bins.of(part)
        assert bins.block.shape[1] <= part.shape[1]
        assert bins.block.shape[1] == 0 or (bins.block[:, 0].any() and bins.block[:, -1].any())
        total = bins.added_to(total)
    np.testing.assert_array_equal(total, dense)


def test_guesses_under_way_are_cancelled_once_the_true_state_shows_a_backlog(scenarios):
    # one run at a time (one thread), three under way: chunk 0 from the truth, 1 and 2 from guesses,
    # waiting.  Chunk 0 ends in SP4 -> SP5's backlog: the guesses are cancelled (the one already running
    # still ends, and fails), and every chunk after 0 is settled from the true state
    scenario, plan = _setup(scenarios["overloaded"], "data-shipping")
    whole = run_local(scenario, plan)
    simulation = Simulation(scenario, plan)
    windows = simulation.windows()
    job = ChunkJob(simulation, tuple(windows))
    futures: dict[tuple[int, int], Future] = {}
    cancelled = []
    # a guess waits until the driver cancels (or a minute passes: then the assertions below fail rather
    # than hang), so the driver sees chunk 0 end before any guess does, however busy the machine is
    released = threading.Event()

    def cancel(chunk: Chunk) -> None:
        cancelled.append((chunk.number, chunk.attempt))
        futures[(chunk.number, chunk.attempt)].cancel()
        released.set()

    def run(chunk: Chunk) -> ChunkSummary:
        if chunk.guessed:
            released.wait(60)
        return simulate_chunk(job, chunk)[0]

    with ThreadPoolExecutor(max_workers=1) as pool:

        def start(chunk: Chunk) -> Future:
            future = futures[(chunk.number, chunk.attempt)] = pool.submit(run, chunk)
            return future

        cuts = _cut(simulation, windows, 5)
        free = simulation.queues.free()
        runs = chain(start, windows, cuts, free, _warm_up_windows(windows), slots=3, cancel=cancel)
    assert cancelled and all(number > 0 for number, _ in cancelled)
    assert [r.number for r in runs] == list(range(len(cuts)))
    assert not any(r.guessed for r in runs)
    assert not {(r.number, r.attempt) for r in runs} & set(cancelled)
    # the chosen runs are the chunks of the whole run: their traffic adds up to it
    assert sum(r.link_bytes.sum() for r in runs) == sum(whole.link_bytes.values())
    assert sum(r.counts.delivered.sum() for r in runs) == sum(len(v) for v in whole.delivered.values())
    truth = free
    for run in runs:
        assert _holds(run, truth)
        truth = truth.then(run.end, run.first_arrival)


def test_a_backlog_across_the_chunks_stops_the_guesses_after_the_first_that_fail(scenarios):
    # overloaded: SP4 -> SP5's backlog grows for the whole run.  The first slots start from all links free
    # (the truth for chunk 0, a guess for the others), and those guesses fail; from then on the true state
    # shows the backlog, so every later chunk is run once, from the true state, and no slot is wasted
    scenario, plan = _setup(scenarios["overloaded"], "data-shipping")
    _, runs = _chunked(scenario, plan, 7, slots=3)
    assert [r.attempt for r in runs] == [0, 1, 1, 0, 0, 0, 0]
    assert [r.guessed for r in runs] == [False] * 7


@pytest.mark.parametrize("name", ["overloaded", "large"])
def test_runs_finishing_in_any_order_stitch_to_the_whole_run(scenarios, name):
    # the runs of a chunk come back whenever their slot finishes (threads, each run after a random pause):
    # the chain settles them in chunk order all the same.  (One simulation plays one run at a time: a
    # Spark task has its own copy in its worker process, these threads share one, and take turns.)
    scenario, plan = _setup(scenarios[name], "data-shipping")
    whole = run_local(scenario, plan)
    simulation = Simulation(scenario, plan)
    windows = simulation.windows()
    job = ChunkJob(simulation, tuple(windows))
    pauses = iter(np.random.default_rng(5).uniform(0, 0.05, 1000).tolist())
    latencies = {}

    turn = threading.Lock()

    def simulate(chunk: Chunk, pause: float) -> ChunkSummary:
        time.sleep(pause)
        with turn:
            summary, owners, values = simulate_chunk(job, chunk)
        latencies[(chunk.number, chunk.attempt)] = (owners, values)
        return summary

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = chain(
            lambda chunk: pool.submit(simulate, chunk, next(pauses)),
            windows,
            _cut(simulation, windows, 6),
            simulation.queues.free(),
            _warm_up_windows(windows),
            slots=2,
        )
    assert [r.number for r in runs] == list(range(len(runs)))
    _assert_same(scenario, whole, _stitched(simulation, plan.strategy, runs, latencies))
