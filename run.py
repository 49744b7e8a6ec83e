"""The command line: parse arguments, call one function, print or write its result.

Exit codes (SPEC section 4): 0 success, 2 bad input (one line on stderr, no traceback), 1 internal error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bench import BENCHMARKS


def _cmd_validate(args: argparse.Namespace) -> int:
    from topologies.loader import load_scenario, summary

    print(summary(load_scenario(args.scenario)))
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    import json

    from topologies.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from sharing import make_plan
    from topologies.loader import load_scenario

    scenario = load_scenario(args.scenario)
    plan = make_plan(scenario, args.strategy)
    print(plan.dumps() if args.json else plan.to_text())
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from reports.runner import run_scenario

    return run_scenario(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    return importlib.import_module(f"bench.{args.benchmark}").main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run.py", description="Stream-sharing P2P network emulator")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="simulate every strategy on a scenario and write the report")
    p.add_argument("scenario")
    p.add_argument("--engine", choices=["local", "spark"], default="local")
    p.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--strategy", action="append", default=None, help="strategy name (repeatable; default all)")
    p.add_argument("--out", default=None, help="output directory (default out/<scenario name>/)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("validate", help="check a scenario file")
    p.add_argument("scenario")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("schema", help="print the JSON Schema of scenario files (for editors)")
    p.set_defaults(func=_cmd_schema)

    p = sub.add_parser("plan", help="print the stream-sharing plan of a scenario")
    p.add_argument("scenario")
    p.add_argument("--strategy", default="sharing-em")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("bench", help="benchmarks")
    bench_sub = p.add_subparsers(dest="benchmark", required=True)
    for name, description in BENCHMARKS.items():
        bp = bench_sub.add_parser(name, help=description)
        bp.add_argument("--json", action="store_true", help="print one JSON object")
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"bench.{name}":
                raise
            continue
        module.configure(bp)
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from matcher import QueryError
    from topologies.errors import InputError

    try:
        return args.func(args)
    except (InputError, QueryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
