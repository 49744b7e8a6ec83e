"""Kuntschke & Kemper's section 6 reproduced in one command: every experiment, table, figure and claim.

``python run.py bench paper`` runs the matching experiments (Figures 9-15 with the R-tree and the R*-tree,
bounded and unbounded dimensions, Table 7, the count test, the split strategies' memory;
bench/paper_matching.py) and the evaluation experiments (Figures 16-18 and Table 8, SE, IE and IE+SC as
compiled per-item kernels on both trees; bench/paper_evaluation.py) with the paper's parameters, prints
every table, draws every figure into ``--out`` (default out/paper/) and ends with the paper's claims and
numbers beside ours, a verdict for each (bench/paper_claims.py).  docs/PAPER.md explains the
disagreements.  ``--quick`` runs every experiment on small inputs (a minute or two); ``--only`` one half.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.paper_claims import COUNT_PAPER, TABLE7_PAPER, TABLE8_PAPER


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="out/paper", help="directory for the figures and results.json")
    parser.add_argument("--only", choices=["matching", "evaluation"], default=None, help="run one half only")
    parser.add_argument("--quick", action="store_true", help="small inputs: 12x4 pairs, 100,000 items")
    parser.add_argument("--pairs-query", type=int, default=60, help="query predicates (default 60)")
    parser.add_argument("--pairs-stream", type=int, default=20, help="stream predicates (default 20)")
    parser.add_argument("--items", type=int, default=1_000_000, help="items per evaluation case (default 1000000)")
    parser.add_argument("--budget", type=float, default=0.4, help="CPU seconds per evaluator and case (default 0.4)")
    parser.add_argument("--repeat", type=int, default=1, help="timed rounds, best kept (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-plots", action="store_true", help="skip the figures")
    parser.add_argument("--record", nargs="?", const="", default=None, help="also write bench/results/paper.json")


def main(args: argparse.Namespace) -> int:
    from bench import paper_claims, paper_evaluation, paper_matching
    from bench.record import RESULTS, load_average, machine_facts, write_record
    from topologies.errors import InputError

    for flag in ("pairs_query", "pairs_stream", "items", "repeat"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')}: must be at least 1, got {getattr(args, flag)}")
    if args.quick:
        args.pairs_query, args.pairs_stream, args.items = 12, 4, 100_000
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} exists and is not a directory")
    load_before = load_average()
    started = time.perf_counter()

    def progress(text: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {text}", file=sys.stderr, flush=True)

    results: dict = {}
    verdicts: list = []
    if args.only != "evaluation":
        large = (10, 50, 100) if args.quick else paper_matching.LARGE_POINTS
        results["matching"] = paper_matching.run(
            args.pairs_query, args.pairs_stream, args.seed, args.repeat, large, progress
        )
        verdicts += paper_claims.matching_verdicts(results["matching"])
    if args.only != "matching":
        results["evaluation"] = paper_evaluation.run(args.items, args.seed, args.budget, args.repeat, progress)
        verdicts += paper_claims.evaluation_verdicts(results["evaluation"])
        results["table8_cost_factor"] = paper_claims.table8_cost_factor(results["evaluation"]["table8"])
    results["verdicts"] = [asdict(v) for v in verdicts]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    figures = [] if args.no_plots else _draw(out, results)
    if args.record is not None:
        path = Path(args.record) if args.record else RESULTS / "paper.json"
        parameters = {k: getattr(args, k) for k in ("pairs_query", "pairs_stream", "items", "budget", "repeat", "seed")}
        write_record(path, "paper", parameters, results, machine_facts(load_before))
    if args.json:
        print(json.dumps(results))
        return 0
    _print(results, args)
    print(f"\nfigures and results.json in {out}/: " + (", ".join(p.name for p in figures) or "no figures"))
    return 0


# --- printing ---------------------------------------------------------------------------------------------


def _matching_table(title: str, rows: list[dict], names: tuple[str, ...]) -> None:
    print(f"\n{title}")
    print(f"{'':>12}" + "".join(f"{row['point']:>10}" for row in rows))
    for name in names:
        print(f"{name:>12}" + "".join(f"{row['algorithms'][name]['ms_per_pair']:>10.3f}" for row in rows))
    print(f"{'matches':>12}" + "".join(f"{row['algorithms'][names[-1]]['matches']:>10}" for row in rows))
    print(f"{'truth':>12}" + "".join(f"{'-' if row['truth'] is None else row['truth']:>10}" for row in rows))
    for key, label in (("build_ms_rtree", "R build ms"), ("build_ms_rstar", "R* build ms")):
        print(f"{label:>12}" + "".join(f"{row['index'][key]:>10.2f}" for row in rows))
    print(f"{'overlap %':>12}" + "".join(f"{100 * row['index']['overlap_share']:>10.1f}" for row in rows))


def _print_matching(m: dict) -> None:
    from bench.paper_matching import LARGE_ALGORITHMS, SWEEP_ALGORITHMS, UNBOUNDED_ALGORITHMS

    s = m["setting"]
    print(
        f"matching (section 6.2): {s['pairs_query']} x {s['pairs_stream']} pairs, defaults {s['dims']} dims, "
        f"{s['query_size']} query and {s['stream_size']} stream boxes, 21 values; CPU ms per pair; +I = R-tree, "
        "+I* = R*-tree, index build included (once per stream predicate); 'overlap %' = share of the stream "
        "boxes the index hands a query box"
    )
    figures = {"dims": "Figures 9 and 12", "query_size": "Figures 10 and 13", "stream_size": "Figures 11 and 14"}
    for parameter, rows in m["sweeps"].items():
        _matching_table(f"{figures[parameter]}: varying {parameter}", rows, SWEEP_ALGORITHMS)
    for parameter, rows in m["unbounded"].items():
        _matching_table(f"unbounded dimensions, varying {parameter}", rows, UNBOUNDED_ALGORITHMS)
    _matching_table("Figure 15: large stream predicates", m["large"], LARGE_ALGORITHMS)
    print("\npeak memory per pair while matching (KiB, max / mean over the pairs measured)")
    print(f"{'stream boxes':>12}" + "".join(f"{s:>16}" for s in ("EM-BFS", "EM-DFS", "EM-MIX")))
    for row in m["memory"]:
        cells = "".join(
            f"{row[k]['max_kib']:>9.1f} /{row[k]['mean_kib']:>5.1f}" for k in ("EM-BFS", "EM-DFS", "EM-MIX")
        )
        print(f"{row['point']:>12}{cells}")
    t7 = m["table7"]
    print(
        f"\nTable 7: selectivity (%) of p_A..p_D, ours (exact volume) beside the paper's; stream alone "
        f"{100 * t7['stream_selectivity']:.2f}"
    )
    for name, paper in (("HSR", "HSR"), ("HSR+QC", "HSR+QC"), ("HCR", "HCR"), ("EM-DFS+QC", "EM")):
        ours = " ".join(f"{100 * v:6.2f}" for v in t7["selectivity"][name])
        print(f"{paper:>8}  ours {ours}   paper {' '.join(f'{v:6.2f}' for v in TABLE7_PAPER[paper])}")
    count = m["count"]
    print(
        f"\ncount test: {count['pairs']} pairs, truth {count['truth']} (paper: EM {COUNT_PAPER['EM']}, heuristics "
        f"{COUNT_PAPER['heuristics']}, HSR 0 of {COUNT_PAPER['pairs']})"
    )
    print("  " + ", ".join(f"{name} {found}" for name, found in count["matches"].items()))


def _evaluation_table(title: str, key: str, cases: list[dict]) -> None:
    from bench.paper_evaluation import METHODS

    print(f"\n{title}: items per CPU ms (tests per item)")
    print(f"{key:>12}" + "".join(f"{m:>18}" for m in METHODS) + f"{'selectivity':>13}")
    for c in cases:
        cells = "".join(
            f"{c['methods'][m]['items_per_s'] / 1e3:>10.0f} ({c['methods'][m]['tests_per_item']:>5.1f})"
            for m in METHODS
        )
        print(f"{c[key]:>12}{cells}{100 * c['measured_selectivity']:>12.1f}%")


def _print_evaluation(e: dict) -> None:
    d = e["defaults"]
    print(
        f"\nevaluation (section 6.3): {e['items']:,} uniform items per case, defaults {d['dims']} dims, "
        f"{d['boxes_n']} boxes, selectivity {d['selectivity']:.0%}, overlap {d['overlap']:.0%}; IE/IE+SC on the "
        "R*-tree unless marked (R-tree)"
    )
    for (key, cases), title in zip(e["sweeps"].items(), ("Figure 16", "Figure 17", "Figure 18"), strict=True):
        _evaluation_table(title, key, cases)
    for overlap, cases in e["overlap_claim"].items():
        _evaluation_table(f"selectivity at {float(overlap):.0%} overlap", "selectivity", cases)
    print("\nTable 8: throughput relative to SE = 100, ours (paper); tests per item SE / IE / IE+SC")
    print(f"{'sel.':>6}{'overlap':>8}{'IE':>14}{'IE+SC':>14}{'tests':>22}")
    for c in e["table8"]:
        i = [0.0, 0.15, 0.25, 0.3, 0.5].index(c["overlap"])
        cells = ""
        for name in ("IE", "IE+SC"):
            rel = 100 * c["methods"][name]["items_per_s"] / c["methods"]["SE"]["items_per_s"]
            cells += f"{rel:>7.0f} ({TABLE8_PAPER[name][c['selectivity']][i]:>4})"
        tests = "/".join(f"{c['methods'][n]['tests_per_item']:.1f}" for n in ("SE", "IE", "IE+SC"))
        print(f"{c['selectivity']:>6.0%}{c['overlap']:>8.0%}{cells}{tests:>22}")


def _print(results: dict, args: argparse.Namespace) -> None:
    if "matching" in results:
        _print_matching(results["matching"])
    if "evaluation" in results:
        _print_evaluation(results["evaluation"])
    if "table8_cost_factor" in results:
        factor = results["table8_cost_factor"]
        print(
            "\nTable 8 by counted work: one tree rectangle test costs, relative to one SE box test, "
            + "; ".join(
                f"{n}: {f['ours']:.2f} here, {f['paper']:.2f} implied by the paper's table" for n, f in factor.items()
            )
        )
    print("\nthe paper's claims beside ours")
    for v in results["verdicts"]:
        print(f"- [{v['verdict']}] {v['experiment']}: {v['claim']}\n    paper: {v['paper']}   ours: {v['ours']}")
    tally: dict[str, int] = {}
    for v in results["verdicts"]:
        tally[v["verdict"]] = tally.get(v["verdict"], 0) + 1
    print("verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.items())))


# --- figures ----------------------------------------------------------------------------------------------


def _draw(out: Path, results: dict) -> list[Path]:
    from bench import paper_plots as plots

    drawn: list[Path] = []

    def path(name: str) -> Path:
        drawn.append(out / name)
        return out / name

    if "matching" in results:
        m = results["matching"]
        rtree = ("HSR+QC", "HCR+QC", "EM-BFS+QC", "EM-BFS+I")
        rstar = ("HCR+QC", *(f"EM-{s}+{k}" for s in ("BFS", "DFS", "MIX") for k in ("QC", "I*")))
        numbers = {"dims": (9, 12), "query_size": (10, 13), "stream_size": (11, 14)}
        for parameter, rows in m["sweeps"].items():
            a, b = numbers[parameter]
            plots.matching_figure(
                path(f"fig{a:02d}.png"), f"Figure {a}: R-tree, varying {parameter}", parameter, rows, rtree
            )
            plots.matching_figure(
                path(f"fig{b:02d}.png"), f"Figure {b}: R*-tree, varying {parameter}", parameter, rows, rstar
            )
        for parameter, rows in m["unbounded"].items():
            a = numbers[parameter][0]
            names = ("HSR+QC", "HCR+QC", "EM-BFS+QC", "EM-BFS+I", "EM-DFS+QC", "EM-DFS+I")
            plots.matching_figure(
                path(f"fig{a:02d}-unbounded.png"), f"Figure {a} repeated, unbounded dimensions", parameter, rows, names
            )
        plots.matching_figure(
            path("fig15.png"),
            "Figure 15: large stream predicates",
            "stream_size",
            m["large"],
            ("HCR+QC", *(f"EM-{s}+{k}" for s in ("BFS", "DFS", "MIX") for k in ("QC", "I"))),
        )
        plots.memory_figure(path("em-memory.png"), m["memory"])
    if "evaluation" in results:
        e = results["evaluation"]
        from bench.paper_evaluation import METHODS

        labels = {
            "dims": ("Figure 16", "dimensions"),
            "boxes_n": ("Figure 17", "boxes"),
            "selectivity": ("Figure 18", "selectivity"),
        }
        for key, cases in e["sweeps"].items():
            number, label = labels[key]
            plots.evaluation_figure(
                path(f"fig{number[-2:]}.png"), f"{number}: varying {label}", key, label, cases, METHODS
            )
        plots.overlap_figure(path("fig18-overlap.png"), e["overlap_claim"], e["sweeps"]["selectivity"])
    return drawn
