"""Interval pub/sub matching on workload files, with the MultiMatcher (one label per subscription).

A workload file is plain text, whitespace separated.  Line 1 is ``subs pubs atts valDom``; then ``subs``
lines, one subscription each, ``k att_1 lo_1 hi_1 ... att_k lo_k hi_k`` (closed integer intervals on
distinct attributes in ``[0, atts)``); then ``pubs`` lines, one event each, ``k att_1 v_1 ... att_k v_k``.
A subscription matches an event iff every attribute it constrains is present in the event with
``lo <= v <= hi``.  This is the format the common C++ content-based pub/sub matching benchmarks can dump
(Rein, Tama, H-Tree, OpIndex workloads).

Events are matched in one batch (CSR output); an attribute an event lacks is NaN, which no constraint
accepts and an unconstrained dimension ignores, exactly the workload's rule.  The results are checked
against a brute-force scan on a sample of events, which is also the baseline of the speed ratio.
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


def matcher_of(workload: Workload):
    from matcher import Box, Interval, Predicate
    from matcher.filters.multi import MultiMatcher

    return MultiMatcher(
        [
            (f"s{j}", Predicate([Box({f"a{a}": Interval.closed(lo, hi) for a, lo, hi in sub})]))
            for j, sub in enumerate(workload.subs)
        ]
    )


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


def main(args: argparse.Namespace) -> int:
    if args.workload:
        workload = read_workload(args.workload)
    else:
        workload = generate(args.subs, args.atts, args.cons, args.width, args.dom, args.pubs, args.seed)
        if args.write:
            write_workload(args.write, workload)
    started = time.perf_counter()
    matcher = matcher_of(workload)
    build_s = time.perf_counter() - started
    columns = event_columns(workload)
    warm = {name: column[:1] for name, column in columns.items()}
    matcher.match_csr(warm)  # numba import and kernel load, reported apart from matching
    warm_s = time.perf_counter() - started - build_s
    started = time.perf_counter()
    indptr, indices = matcher.match_csr(columns)
    match_s = time.perf_counter() - started
    n_events = len(workload.events)
    sample = range(0, n_events, max(1, n_events // max(1, args.verify)))[: args.verify]
    started = time.perf_counter()
    verified = all(
        indices[indptr[i] : indptr[i + 1]].tolist() == brute_force(workload, workload.events[i]) for i in sample
    )
    brute_ms = 1e3 * (time.perf_counter() - started) / max(1, len(sample))
    result = {
        "subs": len(workload.subs),
        "events": n_events,
        "mean_match_ms": 1e3 * match_s / max(1, n_events),
        "mean_matches": len(indices) / max(1, n_events),
        "verified": verified,
        "verified_events": len(sample),
        "brute_force_ms": brute_ms,
        "build_s": build_s,
        "warmup_s": warm_s,
        "strategy": matcher.strategy,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"parameters: atts={workload.atts} dom={workload.dom} " + (args.workload or "generated"))
        for key, value in result.items():
            print(f"{key:<16}{value:.4f}" if isinstance(value, float) else f"{key:<16}{value}")
        print(f"speed-up over brute force per event: {brute_ms / max(1e-12, result['mean_match_ms']):.0f}x")
    return 0 if verified else 1
