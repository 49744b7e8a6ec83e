"""The command line: parse arguments, call one function, print or write its result.

Every command is a typed library call (``load_scenario``, ``make_plan``, ``reports.runner.run_scenario``,
``reports.live.serve_scenario``, the subscription client's requests); this module maps the arguments to
its options and prints what it returns.  Exit codes: 0 success, 2 bad input (one line on stderr, no
traceback), 1 internal error (one line too: ``STREAMGLOBE_TRACEBACK=1`` shows the traceback of a bug).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
import time
from typing import NoReturn

from bench import BENCHMARKS
from sharing import STRATEGIES

MAX_ERROR_CHARS = 1000  # of the error line: argparse and file names echo arguments of any length
TRACEBACK_ENV = "STREAMGLOBE_TRACEBACK"  # set: an internal error shows its traceback instead of one line


def _one_line(text: str) -> str:
    """``text`` as one line of at most about MAX_ERROR_CHARS characters: control characters and line
    separators escaped (a file name or an argument may hold a newline), the middle of a longer text cut."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[: MAX_ERROR_CHARS // 2]} ... {text[-MAX_ERROR_CHARS // 2 :]}"
    return text


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line and exit 2, like every other bad input (not a usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {_one_line(f'{self.prog}: {message}')} (see {self.prog} --help)\n")


def _overrides(args: argparse.Namespace) -> list[tuple[str, object]]:
    """``--seed N`` and every ``--set KEY=VALUE``, in that order (topologies/overrides.py)."""
    from topologies.overrides import parse_assignment

    changes: list[tuple[str, object]] = [] if args.seed is None else [("seed", args.seed)]
    return changes + [parse_assignment(text) for text in args.set or ()]


def _load(args: argparse.Namespace):
    """The scenario file of ``args`` with its ``--seed`` and ``--set`` changes; its warnings on stderr."""
    from topologies.loader import load_scenario

    scenario = load_scenario(args.scenario, _overrides(args))
    _warn(scenario.warnings)
    return scenario


def _warn(warnings) -> None:
    for warning in warnings:
        print(f"warning: {_one_line(warning)}", file=sys.stderr)


def _cmd_validate(args: argparse.Namespace) -> int:
    from topologies.loader import summary

    scenario = _load(args)
    print(summary(scenario))
    for line in scenario.generated:
        print(f"  {line}")
    return 0


def _cmd_expand(args: argparse.Namespace) -> int:
    from topologies.expand import check_out_file, expand, write_file

    if args.out is not None:
        check_out_file(args.out, args.force)  # before the work: a file that cannot be written is refused now
    into = os.path.dirname(os.path.abspath(args.out)) if args.out else os.getcwd()
    scenario, text = expand(args.scenario, _overrides(args), into)
    _warn(scenario.warnings)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    write_file(args.out, text)
    made = f"{len(scenario.thin_peers)} thin-peers, {len(scenario.subscriptions)} subscriptions"
    made += f", {len(scenario.events)} network events" if scenario.events else ""
    print(f"wrote {args.out}: {made}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    import json

    from topologies.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from itertools import chain

    from network.routing import Network
    from reports.progress import Status
    from sharing import make_plan
    from sharing.epochs import boundaries
    from sharing.limits import PlannedLoad

    scenario = _load(args)
    network = Network.of(scenario)
    with Status("plan", len(boundaries(scenario)) - 1, "epoch", not args.quiet) as status:
        status.phase(f"planning {args.strategy}")
        plan = make_plan(
            scenario, args.strategy, network, progress=lambda done, total: status.update(done, args.strategy)
        )
        status.phase("writing the plan")
    lines = 0
    if args.json:
        plan.write_json(sys.stdout)
        sys.stdout.write("\n")
    else:
        for line in chain(plan.text_lines(), PlannedLoad(scenario, network, plan).lines()):
            sys.stdout.write(line + "\n")
            lines += 1
    flows = len({f for e in plan.epochs for f in e.flows})
    deliveries = len({d for e in plan.epochs for d in e.deliveries})
    printed = "as JSON" if args.json else f"{lines:,} lines"
    if not args.quiet:
        print(
            f"plan: {plan.strategy} on {scenario.name}: {len(plan.epochs):,} epochs, {len(plan.decisions):,} decisions,"
            f" {flows:,} distinct flows and {deliveries:,} distinct deliveries, {len(plan.rejected):,} rejected"
            f"{f', {len(plan.replans):,} re-plans' if plan.replans else ''};"
            f" printed {printed}",
            file=sys.stderr,
        )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from reports.runner import RunOptions, run_lines, run_scenario

    def terminated(signum, frame):  # unwinds like an exception: the half-written output directory goes
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    signal.signal(signal.SIGHUP, terminated)
    started = time.perf_counter()
    scenario = _load(args)
    options = RunOptions(
        strategies=tuple(args.strategy or ()),
        engine=args.engine,
        spark_master=args.spark_master,
        spark_conf=tuple(args.spark_conf or ()),
        out=args.out,
        plots=not args.no_plots,
        force=args.force,
        progress=not args.quiet,
        jobs=args.jobs,
        check_plans=args.check_plans,
    )
    result = run_scenario(scenario, options)
    print("\n".join(run_lines(scenario, options, result, time.perf_counter() - started)))
    if not result.exact:
        print("error: some strategy did not deliver exactly the centralized result (see report.json)", file=sys.stderr)
        return 1
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from reports.show import show

    what = "links" if args.links else "subscriptions" if args.subscriptions else "streams" if args.streams else "table"
    print(show(args.report, what, args.strategy, args.sort, args.ascending, args.top))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from reports.sweep import SweepOptions, SweepSpec, read_spec, vary_option

    spec = read_spec(args.scenario)
    vary = dict(spec.vary)
    vary.update(vary_option(text) for text in args.vary or ())
    spec = SweepSpec(
        spec.scenario,
        tuple(vary.items()),
        (*spec.fixed, *_overrides(args)),
        tuple(args.strategy or spec.strategies),
        args.x or spec.x_key,
    )
    options = SweepOptions(
        out=args.out,
        engine=args.engine,
        spark_master=args.spark_master,
        spark_conf=tuple(args.spark_conf or ()),
        jobs=args.jobs,
        plots=not args.no_plots,
        force=args.force,
        progress=not args.quiet,
    )
    from reports.sweep import run_sweep

    result = run_sweep(spec, options)
    print(
        f"{result.points} points ({result.ran} run, {result.reused} finished before) in {result.seconds:.1f} s;"
        f" wrote {os.path.join(result.out_dir, 'sweep.csv')} ({len(result.rows)} rows), sweep.md"
        + (f", {len(result.plots)} plots" if result.plots else "")
    )
    inexact = sorted({r["strategy"] for r in result.rows if r["metric"] == "exact" and r["value"] != 1})
    if inexact:
        print(f"error: not exact at some point: {', '.join(inexact)} (see sweep.csv)", file=sys.stderr)
        return 1
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from peers.live.connection import Broker
    from peers.live.serve import ServeOptions
    from reports.live import serve_scenario, served_lines
    from reports.runner import OutputDirectory
    from topologies.loader import load_scenario

    scenario = load_scenario(args.scenario)
    if args.broker is None and not args.start_broker:
        from topologies.errors import InputError

        raise InputError("serve: --broker mqtt://HOST:PORT is required (or --start-broker to start one)")
    url = args.broker or "mqtt://127.0.0.1:1883"
    broker = Broker.parse(url)
    out_dir = args.out or os.path.join("out", scenario.name, "live")
    OutputDirectory.check(out_dir)  # before serving: a report that cannot be written is refused now
    credentials, config = None, None
    if args.secure:
        from peers.live.access import secure_setup

        setup = secure_setup(scenario, args.secure_dir or os.path.join(out_dir + "-broker"), broker, args.prefix)
        credentials, config = setup.credentials, setup.config_path
        if not args.start_broker:
            print(setup.instructions)
    processes = len(scenario.super_peers) if args.processes == -1 else args.processes
    options = ServeOptions(
        broker, args.strategy, args.speed, args.forever, processes, args.prefix, credentials, args.batch_ms / 1000,
        json_results=args.json_results, inputs=tuple(args.input or ()),
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        if args.start_broker:
            from peers.live.broker import started_broker

            stack.enter_context(started_broker(broker, out_dir + "-broker", config))
            print(f"started mosquitto on {broker.host}:{broker.port} (stopped when the run ends)", flush=True)
        started = time.monotonic()
        print(f"serving {scenario.name} on {url} (strategy {args.strategy}, speed {args.speed:g})", flush=True)
        served = serve_scenario(scenario, options, out_dir, progress=not args.quiet)
    print("\n".join(served_lines(served, time.monotonic() - started)))
    if served.result.problem is not None:
        print(f"error: {_one_line(served.result.problem)} (report in {out_dir})", file=sys.stderr)
        return 1
    return 0 if served.exact else 1


def _cmd_live_client(args: argparse.Namespace) -> int:
    import json

    from peers.live import client
    from peers.live.connection import Broker
    from peers.live.topics import Topics

    broker = Broker.parse(args.broker)
    topics = Topics(args.prefix)
    as_json = getattr(args, "json", False)

    def info(text: str) -> None:
        print(text, file=sys.stderr if as_json else sys.stdout, flush=True)

    def out(text: str) -> None:
        print(text, flush=True)

    if args.command == "subscribe":
        asyncio.run(
            client.subscribe(
                broker, topics, args.peer, args.query, count=args.count, timeout=args.timeout, as_json=as_json,
                out=out, info=info, sub_id=args.id,
            )
        )  # fmt: skip
    elif args.command == "unsubscribe":
        info(client.unsubscribed_line(asyncio.run(client.unsubscribe(broker, topics, args.id))))
    elif args.command == "subscriptions":
        subscriptions = asyncio.run(client.subscriptions(broker, topics))
        for line in [json.dumps(subscriptions)] if as_json else client.subscription_lines(subscriptions):
            out(line)
    else:
        answer = asyncio.run(client.traffic(broker, topics))
        for line in [json.dumps(answer)] if as_json else client.traffic_lines(answer):
            out(line)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    return importlib.import_module(f"bench.{args.benchmark}").main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="run.py", description="Stream-sharing P2P network emulator")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="simulate every strategy on a scenario and write the report")
    p.add_argument("scenario")
    _add_overrides(p)
    # reports.runner.ENGINES, spelled out: importing it would load every engine's modules for any command
    p.add_argument("--engine", choices=["local", "spark"], default="local")
    p.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")
    p.add_argument(
        "--spark-conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting for --engine spark, e.g. spark.driver.memory=512m (repeatable)",
    )
    p.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGIES,
        metavar="STRATEGY",
        help="strategy, one of %(choices)s (repeatable; default all)",
    )
    p.add_argument("--out", default=None, help="output directory (default out/<scenario name>/)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--force",
        action="store_true",
        help="write the report's files into an --out directory that holds other files (they are left alone)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (a bar, or a line every few seconds)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="strategies simulated at a time, each in its own process (local engine; default: one per CPU)",
    )
    p.add_argument(
        "--check-plans",
        action="store_true",
        help="check every plan's soundness before simulating it (docs/PLANNER.md); an unsound plan is exit 1",
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("validate", help="check a scenario file; say what its workload generators made")
    p.add_argument("scenario")
    _add_overrides(p)
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("expand", help="write a scenario with its workload generators replaced by what they made")
    p.add_argument("scenario")
    _add_overrides(p)
    p.add_argument("--out", default=None, help="the file to write (default: standard output)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=_cmd_expand)

    p = sub.add_parser("schema", help="print the JSON Schema of scenario files (for editors)")
    p.set_defaults(func=_cmd_schema)

    p = sub.add_parser("plan", help="print the stream-sharing plan of a scenario")
    p.add_argument("scenario")
    _add_overrides(p)
    p.add_argument(
        "--strategy",
        default="sharing-em",
        choices=STRATEGIES,
        metavar="STRATEGY",
        help="one of %(choices)s (default %(default)s)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress and no summary on stderr")
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("show", help="a written report in the terminal: the table, or per link or subscription")
    p.add_argument("report", help="a report directory (or its report.json)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--links", action="store_true", help="every link direction, backbone and access")
    shown.add_argument("--subscriptions", action="store_true", help="every subscription")
    shown.add_argument("--streams", action="store_true", help="every stream's backbone bytes")
    p.add_argument("--strategy", default=None, help="one strategy's figures (default: a column per strategy)")
    p.add_argument("--sort", default=None, metavar="COLUMN", help="sort by this column, largest first")
    p.add_argument("--ascending", action="store_true", help="sort smallest first")
    p.add_argument("--top", type=int, default=None, metavar="N", help="only the first N rows")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("sweep", help="run a scenario over a grid of values and seeds; a tidy CSV and banded plots")
    p.add_argument("scenario", help="a scenario file, or a sweep file (docs/SWEEPS.md)")
    p.add_argument(
        "--vary",
        action="append",
        metavar="KEY=VALUES",
        help="values of a key, e.g. subscriptions=100,200,400 or seed=1..5 (repeatable; the grid of all)",
    )
    p.add_argument(
        "--x", default=None, metavar="KEY",
        help="the varied key on the plots' x axis (default: the first varied key other than seed); every other"
        " varied key but seed gives a panel per value",
    )  # fmt: skip
    _add_overrides(p)
    p.add_argument("--strategy", action="append", choices=STRATEGIES, metavar="STRATEGY", help="(repeatable)")
    p.add_argument("--engine", choices=["local", "spark"], default="local")
    p.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--spark-conf", action="append", metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument("--jobs", type=int, default=None, help="points at a time, each in its own process (default: CPUs)")
    p.add_argument("--out", default=None, help="output directory (default out/<scenario name>-sweep/)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--force", action="store_true", help="write into an --out directory holding other files")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_sweep)

    _add_live_parsers(sub)

    p = sub.add_parser("bench", help="benchmarks")
    bench_sub = p.add_subparsers(dest="benchmark", required=True)
    for name, description in BENCHMARKS.items():
        bp = bench_sub.add_parser(name, help=description)
        bp.add_argument("--json", action="store_true", help="print one JSON object")
        importlib.import_module(f"bench.{name}").configure(bp)
    p.set_defaults(func=_cmd_bench)
    return parser


def _add_overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=None, help="the scenario's seed instead of the file's")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change a value of the file before it is checked, e.g. subscriptions[0].generate.count=200 or"
        " subscriptions=200 (repeatable; docs/SCENARIOS.md)",
    )


def _add_live_parsers(sub) -> None:
    """Live mode over MQTT (docs/LIVE.md)."""
    p = sub.add_parser("serve", help="run a scenario live over an MQTT broker")
    p.add_argument("scenario")
    p.add_argument(
        "--broker", default=None, help="mqtt://HOST:PORT (with --start-broker: default mqtt://127.0.0.1:1883)"
    )
    p.add_argument(
        "--start-broker",
        action="store_true",
        help="start Mosquitto on the --broker port for the run, and stop it after",
    )
    p.add_argument(
        "--json-results", action="store_true",
        help="also publish every result as JSON lines on <prefix>/results/<peer>/<subscription> (for mosquitto_sub)",
    )  # fmt: skip
    p.add_argument(
        "--input", action="append", metavar="STREAM",
        help="take STREAM's tuples from MQTT clients publishing JSON on <prefix>/in/STREAM (repeatable)",
    )  # fmt: skip
    p.add_argument("--speed", type=float, default=1.0, help="emulated seconds per wall second")
    p.add_argument(
        "--strategy",
        default="sharing-em",
        choices=STRATEGIES,
        metavar="STRATEGY",
        help="one of %(choices)s (default %(default)s)",
    )
    p.add_argument("--forever", action="store_true", help="run until SIGINT/SIGTERM")
    p.add_argument(
        "--processes", nargs="?", type=int, const=-1, default=0, metavar="N",
        help="super-peers in N OS processes (alone: each in its own)",
    )  # fmt: skip
    p.add_argument("--batch-ms", type=float, default=50.0, help="wall ms between a source's tuple batches")
    p.add_argument("--out", default=None, help="output directory (default out/<scenario name>/live/)")
    p.add_argument("--secure", action="store_true", help="generate passwords and an ACL for the broker")
    p.add_argument("--secure-dir", default=None, help="where --secure keeps the broker files (reused if present)")
    p.add_argument("--prefix", default="streamglobe", help="topic prefix")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_serve)
    for name, text in [
        ("subscribe", "register a subscription with a running emulator and print its results"),
        ("unsubscribe", "remove a subscription from a running emulator"),
        ("subscriptions", "list a running emulator's subscriptions with their plans"),
        ("traffic", "a running emulator's per-link counters"),
    ]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--broker", required=True, help="mqtt://[USER:PASS@]HOST:PORT")
        p.add_argument("--prefix", default="streamglobe", help="topic prefix")
        if name in ("subscribe", "subscriptions", "traffic"):
            p.add_argument("--json", action="store_true")
        if name == "subscribe":
            p.add_argument("--peer", required=True, help="the thin-peer receiving the results")
            p.add_argument("query")
            p.add_argument("--id", default=None, help="subscription id (default: generated)")
            p.add_argument("--count", type=int, default=None, help="stop after N result tuples")
            p.add_argument("--timeout", type=float, default=None, help="stop after S seconds")
        if name == "unsubscribe":
            p.add_argument("id")
        p.set_defaults(func=_cmd_live_client)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from matcher import QueryError
    from topologies.errors import EmulatorError, InputError

    try:
        return args.func(args)
    except (InputError, QueryError) as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except EmulatorError as err:  # an engine failed, or a plan was found unsound
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`run.py plan ... | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as err:  # a bug of ours, not the user's mistake: one line, the traceback on request
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(
            f"error: internal error: {_one_line(f'{type(err).__name__}: {err}')} (a bug: set {TRACEBACK_ENV}=1 to see"
            " where, and please report it)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
