"""Interval pub/sub matching on workload files, against the C++ matchers Rein and Tama on the same files.

A workload file is plain text, whitespace separated.  Line 1 is ``subs pubs atts valDom``; then ``subs``
lines, one subscription each, ``k att_1 lo_1 hi_1 ... att_k lo_k hi_k`` (closed integer intervals on
distinct attributes in ``[0, atts)``); then ``pubs`` lines, one event each, ``k att_1 v_1 ... att_k v_k``.
A subscription matches an event iff every attribute it constrains is present in the event with
``lo <= v <= hi``.  This is the format the common C++ content-based pub/sub matching benchmarks can dump
(Rein, Tama, H-Tree, OpIndex workloads).

The matcher is :class:`~matcher.filters.dynamic.DynamicMatcher` (``--engine dynamic``, one label per
subscription), built from the workload's arrays; ``--engine multi`` measures the region-bitmap
``MultiMatcher``, which has no insert or delete and is rebuilt instead.  Events are matched in one batch
(CSR output); an attribute an event lacks is NaN, which no constraint accepts and an unconstrained dimension
ignores, exactly the workload's rule.  Beside the match time: the build time, the time to add and to remove
one subscription (``--churn`` of each, one at a time, then the answer checked against a matcher built from
scratch), and the memory building and matching took: the growth of the resident set from the process with
the workload read and the kernels loaded to its peak (``/proc/self/status``; the interpreter, numpy and
numba themselves take about 140 MB before any of it).  The results are checked against a brute-force scan
on a sample of events.

Rivals: ``--rival rein=PATH`` (and ``tama=PATH``) runs a built C++ matcher of the xizeroplus/matching-algorithm
collection through our driver bench/rivals/pubsub_driver.cpp on the same workload file and prints its
figures, its matches compared event by event, and the same-run ratios; without it the comparison is
skipped with a message.  To build them (outside this repository; -O3 because the collection's CMake files
set no optimisation level)::

    SRC=path/to/matching-algorithm        # a checkout of the collection
    g++ -O3 -march=native -std=c++17 -DRIVAL_REIN -I$SRC/Rein -o rein bench/rivals/pubsub_driver.cpp \
        $SRC/Rein/rein.cpp $SRC/Rein/generator.cpp $SRC/Rein/util.cpp $SRC/Rein/printer.cpp
    g++ -O3 -march=native -std=c++17 -DRIVAL_TAMA -I$SRC/Tama -o tama bench/rivals/pubsub_driver.cpp \
        $SRC/Tama/tama.cpp $SRC/Tama/generator.cpp $SRC/Tama/util.cpp $SRC/Tama/printer.cpp

Both sides run ``--repeat`` times and the best times are kept; memory is the first run's (ours) and the
smallest of its fresh processes (a rival's).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Workload:
    """``subs[j]``: ``(att, lo, hi)`` closed constraints; ``events[i]``: ``(att, value)`` pairs."""

    atts: int
    dom: int
    subs: list[list[tuple[int, int, int]]]
    events: list[list[tuple[int, int]]]


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--workload", default=None, help="a workload file (format: bench/pubsub.py)")
    source.add_argument("--generate", action="store_true", help="generate the workload (the default)")
    parser.add_argument("--write", default=None, help="also write the generated workload to this file")
    parser.add_argument("--subs", type=int, default=20000)
    parser.add_argument("--atts", type=int, default=20)
    parser.add_argument("--cons", type=int, default=10)
    parser.add_argument("--width", type=float, default=0.5)
    parser.add_argument("--dom", type=int, default=1000000)
    parser.add_argument("--pubs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verify", type=int, default=100, help="events checked by brute force")
    parser.add_argument("--engine", choices=["dynamic", "multi"], default="dynamic", help="our matcher")
    parser.add_argument("--churn", type=int, default=1000, help="subscriptions added and removed one by one")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, best kept (default 3)")
    parser.add_argument(
        "--rival",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a built rival driver (rein=PATH, tama=PATH; repeatable; build: bench/pubsub.py)",
    )


def generate(subs: int, atts: int, cons: int, width: float, dom: int, pubs: int, seed: int) -> Workload:
    """Each subscription constrains ``cons`` distinct attributes with ``[lo, lo + dom*width]``; events are full."""
    rng = np.random.default_rng(seed)
    span = int(dom * width)
    subscriptions = []
    for _ in range(subs):
        chosen = np.sort(rng.choice(atts, cons, replace=False))
        lows = rng.integers(0, max(1, dom - span), cons)
        subscriptions.append([(int(a), int(lo), int(lo) + span) for a, lo in zip(chosen, lows, strict=True)])
    values = rng.integers(0, dom, (pubs, atts))
    events = [[(a, int(v)) for a, v in enumerate(row)] for row in values]
    return Workload(atts, dom, subscriptions, events)


def write_workload(path: str | Path, workload: Workload) -> None:
    lines = [f"{len(workload.subs)} {len(workload.events)} {workload.atts} {workload.dom}"]
    lines += [" ".join(map(str, [len(s), *(x for c in s for x in c)])) for s in workload.subs]
    lines += [" ".join(map(str, [len(e), *(x for p in e for x in p)])) for e in workload.events]
    Path(path).write_text("\n".join(lines) + "\n")


def read_workload(path: str | Path) -> Workload:
    """Parse a workload file; raises InputError naming the file, line and problem."""
    from topologies.errors import InputError

    try:
        lines = Path(path).read_text().split("\n")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from err

    def numbers(no: int, width: int | None = None) -> list[int]:
        if no >= len(lines) or not lines[no].strip():
            raise InputError(f"{path}:{no + 1}: missing line")
        try:
            row = [int(tok) for tok in lines[no].split()]
        except ValueError as err:
            raise InputError(f"{path}:{no + 1}: expected integers: {lines[no].strip()[:60]!r}") from err
        if width is not None and (not row or len(row) != 1 + width * row[0]):
            raise InputError(f"{path}:{no + 1}: count {row[:1]} does not match {len(row) - 1} values")
        return row

    head = numbers(0)
    if len(head) != 4 or min(head) < 0:
        raise InputError(f"{path}:1: expected 'subs pubs atts valDom', got {lines[0].strip()!r}")
    n_subs, n_pubs, atts, dom = head
    subs, events = [], []
    for no in range(1, 1 + n_subs):
        row = numbers(no, 3)
        constraints = [tuple(row[1 + 3 * c : 4 + 3 * c]) for c in range(row[0])]
        if len({a for a, _, _ in constraints}) != len(constraints) or any(not 0 <= a < atts for a, _, _ in constraints):
            raise InputError(f"{path}:{no + 1}: attributes must be distinct and in [0, {atts})")
        subs.append(constraints)
    for no in range(1 + n_subs, 1 + n_subs + n_pubs):
        row = numbers(no, 2)
        pairs = [tuple(row[1 + 2 * c : 3 + 2 * c]) for c in range(row[0])]
        if any(not 0 <= a < atts for a, _ in pairs):
            raise InputError(f"{path}:{no + 1}: attributes must be in [0, {atts})")
        events.append(pairs)
    return Workload(atts, dom, subs, events)


def constraint_table(workload: Workload):
    """``(labels, BoxTable)``: one closed box per subscription over the attributes ``a0 .. a{atts-1}``, built
    from the constraints' arrays directly."""
    from matcher._eval_boxes import BoxTable

    dims = tuple(sorted(f"a{a}" for a in range(workload.atts)))
    column = np.zeros(max(1, workload.atts), dtype=np.int64)
    column[[int(d[1:]) for d in dims]] = np.arange(len(dims))
    n = len(workload.subs)
    lo, hi = np.full((n, len(dims)), -np.inf), np.full((n, len(dims)), np.inf)
    closed = np.zeros((n, len(dims)), dtype=bool)
    flat = np.array([(j, a, low, high) for j, sub in enumerate(workload.subs) for a, low, high in sub], dtype=np.int64)
    if len(flat):
        rows, cols = flat[:, 0], column[flat[:, 1]]
        lo[rows, cols], hi[rows, cols], closed[rows, cols] = flat[:, 2], flat[:, 3], True
    table = BoxTable(dims, n, np.arange(n, dtype=np.int64), lo, hi, closed, closed.copy())
    return [f"s{j}" for j in range(n)], table


def predicate_of(sub: list[tuple[int, int, int]]):
    from matcher import Box, Interval, Predicate

    return Predicate([Box({f"a{a}": Interval.closed(lo, hi) for a, lo, hi in sub})])


def build(engine: str, labels: list[str], table):
    """Our matcher over the table's boxes."""
    if engine == "dynamic":
        from matcher.filters.dynamic import DynamicMatcher

        return DynamicMatcher.from_table(labels, table)
    from matcher.filters.multi import MultiMatcher

    matcher = MultiMatcher.__new__(MultiMatcher)
    matcher._setup(tuple(labels), table)
    return matcher


def event_columns(workload: Workload) -> dict[str, np.ndarray]:
    """One column per attribute; NaN where an event lacks the attribute."""
    values = np.full((workload.atts, len(workload.events)), np.nan)
    for i, event in enumerate(workload.events):
        for a, v in event:
            values[a, i] = v
    return {f"a{a}": values[a] for a in range(workload.atts)}


def brute_force(workload: Workload, event: list[tuple[int, int]]) -> list[int]:
    """Indices of the subscriptions the event matches, by the workload rule (plain loops)."""
    present = dict(event)
    return [
        j for j, sub in enumerate(workload.subs) if all(a in present and lo <= present[a] <= hi for a, lo, hi in sub)
    ]


def _rss_kib(key: str) -> int | None:
    """``VmRSS``/``VmHWM`` of this process in KiB, None where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith(key + ":")), None)
    except OSError:
        return None


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current resident set
    except OSError:
        pass


def _measure_ours(args: argparse.Namespace, labels: list[str], table, columns: dict) -> dict:
    """Build and match once, with the memory it took."""
    warm = build(args.engine, labels[:2], _head(table, 2))
    warm.match_csr({name: column[:1] for name, column in columns.items()})  # the kernels, outside the timing
    loaded = _rss_kib("VmRSS")
    _reset_peak()
    started = time.process_time()
    matcher = build(args.engine, labels, table)
    if args.engine == "multi":
        matcher.prepare()
    build_s = time.process_time() - started
    started = time.process_time()
    indptr, indices = matcher.match_csr(columns)
    match_s = time.process_time() - started
    peak = _rss_kib("VmHWM")
    grown = None if loaded is None or peak is None else peak - loaded
    return {
        "matcher": matcher,
        "indptr": indptr,
        "indices": indices,
        "build_s": build_s,
        "match_s": match_s,
        "rss_loaded_kib": loaded,
        "peak_rss_kib": peak,
        "grown_kib": grown,
    }


def _head(table, n: int):
    from matcher._eval_boxes import BoxTable

    return BoxTable(
        table.dims, n, table.owner[:n], table.lo[:n], table.hi[:n], table.lo_closed[:n], table.hi_closed[:n]
    )


def _churn(args: argparse.Namespace, matcher, workload: Workload, labels: list[str], table) -> dict:
    """Add ``--churn`` new subscriptions one by one, remove as many old ones, time each, then compare the
    answer with a matcher built from scratch over the subscriptions left."""
    from matcher._eval_boxes import BoxTable

    count = min(args.churn, len(workload.subs))
    if args.engine != "dynamic" or count == 0:
        return {}
    fresh = generate(count, workload.atts, min(args.cons, workload.atts), args.width, workload.dom, 1, args.seed + 1)
    adds, removes = [], []
    for j, sub in enumerate(fresh.subs):
        predicate = predicate_of(sub)
        started = time.process_time()
        matcher.add(f"new{j}", predicate)
        adds.append(time.process_time() - started)
    gone = set(range(0, 2 * count, 2)) if 2 * count <= len(labels) else set(range(count))
    for j in sorted(gone):
        started = time.process_time()
        matcher.remove(labels[j])
        removes.append(time.process_time() - started)
    kept = [j for j in range(len(labels)) if j not in gone]
    _, new_table = constraint_table(Workload(workload.atts, workload.dom, fresh.subs, []))
    rebuilt_labels = [labels[j] for j in kept] + [f"new{j}" for j in range(count)]
    stacked = BoxTable(
        table.dims,
        len(rebuilt_labels),
        np.arange(len(rebuilt_labels), dtype=np.int64),
        *(
            np.vstack([getattr(table, key)[kept], getattr(new_table, key)])
            for key in ("lo", "hi", "lo_closed", "hi_closed")
        ),
    )
    rebuilt = build("dynamic", rebuilt_labels, stacked)
    columns = event_columns(workload)
    got_ptr, got = matcher.match_csr(columns)
    want_ptr, want = rebuilt.match_csr(columns)
    mine, theirs = matcher.labels, rebuilt.labels
    same = all(
        sorted(mine[x] for x in got[got_ptr[i] : got_ptr[i + 1]])
        == sorted(theirs[x] for x in want[want_ptr[i] : want_ptr[i + 1]])
        for i in range(len(got_ptr) - 1)
    )
    return {
        "churn": count,
        "insert_ms_mean": 1e3 * float(np.mean(adds)),
        "insert_ms_max": 1e3 * float(np.max(adds)),
        "delete_ms_mean": 1e3 * float(np.mean(removes)),
        "delete_ms_max": 1e3 * float(np.max(removes)),
        "after_churn_equals_rebuild": same,
    }


def _rivals(args: argparse.Namespace, path: Path, n_events: int) -> dict:
    """Each ``--rival NAME=PATH`` run ``--repeat`` times on the workload file: best times, least memory."""
    import subprocess

    from topologies.errors import InputError

    found = {}
    for spec in args.rival:
        name, _, binary = spec.partition("=")
        if not binary or not Path(binary).is_file():
            raise InputError(f"--rival: expected NAME=PATH to a built driver, got {spec!r}")
        runs = []
        for _ in range(args.repeat):
            done = subprocess.run([binary, str(path)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise InputError(f"--rival {name}: {binary} failed: {done.stderr.strip()[:200]}")
            runs.append(json.loads(done.stdout))
        best = dict(runs[0])
        for key in ("build_s", "insert_ms", "match_ms"):
            best[key] = min(run[key] for run in runs)
        best["grown_kib"] = min(run["peak_rss_kib"] - run["rss_loaded_kib"] for run in runs)
        best["peak_rss_kib"] = min(run["peak_rss_kib"] for run in runs)
        if len(best["matches"]) != n_events:
            raise InputError(f"--rival {name}: {len(best['matches'])} events matched, expected {n_events}")
        found[name] = best
    return found


def main(args: argparse.Namespace) -> int:
    import tempfile

    from topologies.errors import InputError

    if args.repeat < 1:
        raise InputError(f"--repeat: must be at least 1, got {args.repeat}")
    if args.workload:
        workload, path = read_workload(args.workload), Path(args.workload)
    else:
        workload = generate(args.subs, args.atts, args.cons, args.width, args.dom, args.pubs, args.seed)
        path = Path(args.write) if args.write else None
    with tempfile.TemporaryDirectory() as scratch:
        if path is None and args.rival:
            path = Path(scratch) / "workload.txt"
        if path is not None and not args.workload:
            write_workload(path, workload)
        labels, table = constraint_table(workload)
        columns = event_columns(workload)
        runs = [_measure_ours(args, labels, table, columns) for _ in range(args.repeat)]
        rivals = _rivals(args, path, len(workload.events)) if args.rival else {}
    ours = min(runs, key=lambda run: run["match_s"])
    indptr, indices, matcher = ours["indptr"], ours["indices"], ours["matcher"]
    n_events = len(workload.events)
    sample = range(0, n_events, max(1, n_events // max(1, args.verify)))[: args.verify]
    started = time.perf_counter()
    verified = all(
        indices[indptr[i] : indptr[i + 1]].tolist() == brute_force(workload, workload.events[i]) for i in sample
    )
    brute_ms = 1e3 * (time.perf_counter() - started) / max(1, len(sample))
    counts = np.diff(indptr)
    result = {
        "engine": args.engine,
        "subs": len(workload.subs),
        "events": n_events,
        "mean_match_ms": 1e3 * min(run["match_s"] for run in runs) / max(1, n_events),
        "mean_matches": len(indices) / max(1, n_events),
        "verified": verified,
        "verified_events": len(sample),
        "brute_force_ms": brute_ms,
        "build_s": min(run["build_s"] for run in runs),
        # memory of the first run: later runs could reuse what the interpreter kept from the earlier ones
        "grown_kib": runs[0]["grown_kib"],
        "peak_rss_kib": runs[0]["peak_rss_kib"],
        "table_kib": matcher.nbytes() / 1024 if args.engine == "dynamic" else None,
        **_churn(args, matcher, workload, labels, table),
        "rivals": {},
    }
    for name, rival in rivals.items():
        differing = int(np.count_nonzero(np.array(rival["matches"]) != counts))
        result["rivals"][name] = {
            **{k: rival[k] for k in ("build_s", "insert_ms", "match_ms", "grown_kib", "peak_rss_kib")},
            "events_with_other_counts": differing,
        }
    if args.json:
        print(json.dumps(result))
    else:
        _print(args, workload, result)
    return 0 if verified and result.get("after_churn_equals_rebuild", True) else 1


def _print(args: argparse.Namespace, workload: Workload, result: dict) -> None:
    print(
        f"parameters: subs={result['subs']} events={result['events']} atts={workload.atts} dom={workload.dom} "
        f"engine={args.engine} repeat={args.repeat} " + (args.workload or "generated")
    )
    for key, value in result.items():
        if key != "rivals":
            print(f"{key:<28}{value:.4f}" if isinstance(value, float) else f"{key:<28}{value}")
    print(f"speed-up over brute force per event: {result['brute_force_ms'] / max(1e-12, result['mean_match_ms']):.0f}x")
    if not args.rival:
        print("rivals: skipped (give --rival rein=PATH --rival tama=PATH; how to build them: bench/pubsub.py)")
        return
    print(f"\n{'':<22}{'ours':>12}" + "".join(f"{name:>12}" for name in result["rivals"]))
    rows = (
        ("match ms/event", "mean_match_ms", "match_ms"),
        ("build s", "build_s", "build_s"),
        ("insert ms/sub", "insert_ms_mean", "insert_ms"),
        ("delete ms/sub", "delete_ms_mean", None),
        ("memory grown MiB", "grown_kib", "grown_kib"),
        ("peak process MiB", "peak_rss_kib", "peak_rss_kib"),
    )
    for label, mine, theirs in rows:
        cells = [result.get(mine)] + [r.get(theirs) if theirs else None for r in result["rivals"].values()]
        scale = 1 / 1024 if "MiB" in label else 1
        print(f"{label:<22}" + "".join(f"{'n/a':>12}" if c is None else f"{c * scale:>12.4f}" for c in cells))
    for name, rival in result["rivals"].items():
        print(
            f"events whose match count differs from {name}'s: {rival['events_with_other_counts']} of {result['events']}"
        )
    if "rein" in result["rivals"]:
        _goals(result, result["rivals"]["rein"])


def _goals(result: dict, rein: dict) -> None:
    """The pub/sub goals against Rein, same-run ratios."""
    checks = [
        ("match <= 0.5x Rein's time", result["mean_match_ms"] / rein["match_ms"], 0.5),
        ("build <= 10x Rein's", result["build_s"] / rein["build_s"], 10.0),
        ("memory grown <= 4x Rein's", (result["grown_kib"] or 0) / max(1, rein["grown_kib"]), 4.0),
        # the whole process too: a Python process with numpy and numba loaded holds ~140 MB before any matching
        ("peak process <= 4x Rein's", (result["peak_rss_kib"] or 0) / max(1, rein["peak_rss_kib"]), 4.0),
    ]
    print("goals against Rein (same run):")
    for label, ratio, limit in checks:
        print(f"  {label:<30} {ratio:8.3f}x  {'met' if ratio <= limit else 'NOT met'}")
    for key in ("insert_ms_max", "delete_ms_max"):
        if key in result:
            label, value = key.replace("_ms_max", "") + " of one sub <= 1 ms (worst)", result[key]
            print(f"  {label:<30} {value:8.3f} ms {'met' if value <= 1 else 'NOT met'}")
