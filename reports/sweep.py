"""``python run.py sweep``: run a scenario at every point of a parameter grid, repeated over seeds, and
collect one tidy table (docs/SWEEPS.md).

A sweep varies values of the scenario file the way ``--set`` does (topologies/overrides.py): each point
is one assignment of every varied key, the points are the grid of all combinations, and ``seed`` is
varied like any key (repetitions with new draws).  Every point is validated before anything runs; then
the points run in worker processes, ``jobs`` at a time (each plans and simulates its strategies one after
the other on the local engine), or one after the other on Spark, each pipelined over its strategies.  A
finished point leaves ``points/<id>.json`` behind, and a sweep run again into the same directory skips
every point whose file matches (the same scenario text, changes and strategies): an interrupted sweep
resumes where it stopped.  At the end ``sweep.csv`` holds one row per point, strategy and metric, and
reports/sweep_plots.py draws each metric against the varied parameter with 95 % confidence bands.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field

import yaml

from reports.progress import Status
from reports.report import assemble_report, served_exactly
from reports.runner import choose_strategies, engine_for
from topologies.errors import EmulatorError, InputError
from topologies.loader import load_scenario
from topologies.model import Scenario
from topologies.overrides import parse_assignment, steps

METRICS = (
    "backbone_bytes",
    "backbone_tuples",
    "access_bytes",
    "saving_vs_data_shipping",
    "saving_vs_query_shipping",
    "saving_vs_multicast",
    "vs_ideal_bytes",
    "vs_ideal_tuple_hops",
    "latency_p50_s",
    "latency_p99_s",
    "latency_mean_s",
    "exact",
    "plan_s",
    "run_s",
)
"""What sweep.csv records per point and strategy (docs/SWEEPS.md); a metric a point cannot have (a saving
against a baseline that did not run) is left out of the table."""
SWEEP_FILES = frozenset({"sweep.json", "sweep.csv", "sweep.md", "points"})
_RANGE = re.compile(r"\s*(-?[0-9]+)\s*\.\.\s*(-?[0-9]+)\s*")
_VERSION = 1  # of the point files: a change of what they hold makes earlier ones stale


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep: the scenario file, the varied keys with their values (grid order: the first key
    varies slowest), changes made at every point, and the strategies (none: all)."""

    scenario: str
    vary: tuple[tuple[str, tuple[object, ...]], ...]
    fixed: tuple[tuple[str, object], ...] = ()
    strategies: tuple[str, ...] = ()
    x_key: str | None = None  # the key on the plots' x axis (None: the first varied key other than seed)

    def __post_init__(self) -> None:
        keys = [k for k, _ in self.vary]
        if self.x_key is not None and self.x_key not in keys:
            raise InputError(f"--x {self.x_key}: not a varied key (varied: {', '.join(keys) or 'none'})")

    def points(self) -> list[dict[str, object]]:
        """Every point of the grid, as key -> value in the order of :attr:`vary`."""
        keys = [k for k, _ in self.vary]
        return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(v for _, v in self.vary))]

    @property
    def x(self) -> str:
        """The key plots put on the x axis: :attr:`x_key`, or the first varied key other than ``seed``
        (``seed`` alone).  Every other varied key but ``seed`` gives the plots a panel per value."""
        if self.x_key is not None:
            return self.x_key
        keys = [k for k, _ in self.vary]
        return next((k for k in keys if k != "seed"), keys[0])


@dataclass(frozen=True)
class SweepOptions:
    out: str | None = None  # default out/<scenario name>-sweep/
    engine: str = "local"
    spark_master: str | None = None
    spark_conf: tuple[str, ...] = ()
    jobs: int | None = None  # points at a time (local engine); default one per CPU
    plots: bool = True
    force: bool = False  # write into a directory holding other files
    progress: bool | str = False


@dataclass(frozen=True)
class SweepResult:
    out_dir: str
    points: int
    ran: int  # points run now
    reused: int  # points found finished
    rows: list[dict] = field(repr=False)  # sweep.csv's rows
    plots: list[str] = field(default_factory=list)
    seconds: float = 0.0


def parse_values(key: str, text: str) -> tuple[object, ...]:
    """``--vary`` values: ``a..b`` (whole numbers, both included) or comma-separated YAML values (commas
    inside brackets or braces belong to the value: ``[1,2],[3,4]`` is two lists)."""
    match = _RANGE.fullmatch(text)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if high < low:
            raise InputError(f"--vary {key}: empty range {text!r}")
        if high - low >= 10_000:
            raise InputError(f"--vary {key}: a range of {high - low + 1:,} values is too many")
        return tuple(range(low, high + 1))
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    values = tuple(parse_assignment(f"{key}={part}", "--vary")[1] for part in parts)
    if any(part.strip() == "" for part in parts):
        raise InputError(f"--vary {key}: an empty value in {text!r}")
    return values


def vary_option(text: str) -> tuple[str, tuple[object, ...]]:
    """``KEY=VALUES`` of ``--vary``."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise InputError(f"--vary {text!r}: expected KEY=VALUES, e.g. subscriptions=100,200,400 or seed=1..5")
    key = key.strip()
    steps(key, "--vary")
    return key, parse_values(key, values)


def read_sweep_file(path: str) -> SweepSpec:
    """A sweep file: ``scenario`` (a path relative to the file), ``vary`` (key -> a list, or a text as
    ``--vary`` takes it), optional ``set`` (key -> value), ``strategies`` (a list) and ``x`` (the varied key
    on the plots' x axis).  Raises InputError naming the file and the key."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: YAML error: {' '.join(str(err).split())}") from None
    if not is_sweep_document(doc):
        raise InputError(f"{path}: a sweep file is a mapping with 'scenario' and 'vary'")
    unknown = sorted(set(doc) - {"scenario", "vary", "set", "strategies", "x"})
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r} (expected one of: scenario, set, strategies, vary, x)")
    if "x" in doc and not isinstance(doc["x"], str):
        raise InputError(f"{path}: x: expected a varied key, got {doc['x']!r}")
    if not isinstance(doc["vary"], dict) or not doc["vary"]:
        raise InputError(f"{path}: vary: expected a mapping of keys to their values, got {doc['vary']!r}")
    vary = []
    for key, values in doc["vary"].items():
        if isinstance(values, str):
            vary.append((str(key), parse_values(str(key), values)))
        elif isinstance(values, list) and values:
            vary.append((str(key), tuple(values)))
        else:
            raise InputError(f"{path}: vary.{key}: expected a non-empty list or a range such as 1..5")
    fixed = doc.get("set") or {}
    strategies = doc.get("strategies") or []
    if not isinstance(fixed, dict):
        raise InputError(f"{path}: set: expected a mapping of keys to values")
    if not isinstance(strategies, list):
        raise InputError(f"{path}: strategies: expected a list of strategy names")
    scenario = os.path.join(os.path.dirname(os.path.abspath(path)), str(doc["scenario"]))
    return SweepSpec(
        scenario, tuple(vary), tuple((str(k), v) for k, v in fixed.items()), tuple(strategies), doc.get("x")
    )


def is_sweep_document(doc: object) -> bool:
    """A sweep file's document (a scenario file has no ``scenario`` key)."""
    return isinstance(doc, dict) and isinstance(doc.get("scenario"), str) and "vary" in doc


def _point_id(point: dict[str, object]) -> str:
    """A readable, file-safe id: ``subscriptions=100,seed=3``."""
    text = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in point.items())
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", text)[:150]


def _fingerprint(spec: SweepSpec, strategies: list[str], point: dict[str, object]) -> str:
    """What makes a finished point reusable: the scenario's text, the changes, the point and the strategies."""
    with open(spec.scenario, "rb") as fh:
        text = hashlib.sha256(fh.read()).hexdigest()
    what = json.dumps([_VERSION, text, list(spec.fixed), list(point.items()), strategies], sort_keys=True)
    return hashlib.sha256(what.encode()).hexdigest()


def _changes(spec: SweepSpec, point: dict[str, object]) -> list[tuple[str, object]]:
    return [*spec.fixed, *point.items()]


def point_rows(point: dict[str, object], report: dict, timings: dict[str, tuple[float, float]]) -> list[dict]:
    """sweep.csv's rows of one point: per strategy and metric, the point's keys, ``strategy``, ``metric``
    and ``value``."""
    rows = []
    for name, entry in report["strategies"].items():
        values: dict[str, object] = {
            "backbone_bytes": entry["backbone_bytes"],
            "backbone_tuples": entry["backbone_tuples"],
            "access_bytes": entry["access_bytes"],
            "latency_p50_s": entry["latency_s"]["p50"],
            "latency_p99_s": entry["latency_s"]["p99"],
            "latency_mean_s": entry["latency_s"]["mean"],
            "exact": int(all(served_exactly(s) for s in entry["subscriptions"])),
            "plan_s": round(timings[name][0], 3),
            "run_s": round(timings[name][1], 3),
        }
        for base, saving in entry["saving_vs"].items():
            values[f"saving_vs_{base.replace('-', '_')}"] = saving
        for what, ratio in entry.get("vs_ideal", {}).items():
            values[f"vs_ideal_{what}"] = ratio
        for metric in METRICS:
            if values.get(metric) is not None:
                rows.append({**point, "strategy": name, "metric": metric, "value": values[metric]})
    return rows


def _run_point(scenario: Scenario, strategies: list[str], engine, engine_name: str, plan_dir: str | None) -> tuple:
    """One point's report and timings: every strategy planned and simulated, here."""
    from reports.simulate import simulate, simulate_spark
    from topologies.expected import expected_results

    if engine_name == "spark":
        entries, _, timings = simulate_spark(scenario, strategies, engine, plan_dir, show_progress=False)
    else:
        entries, _, timings = simulate(scenario, strategies, engine, expected_results(scenario), show_progress=False)
    return assemble_report(scenario, entries, engine=engine_name), timings


def _write_point(path: str, point: dict, fingerprint: str, rows: list[dict], seconds: float) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"version": _VERSION, "point": point, "fingerprint": fingerprint, "seconds": seconds,
                   "rows": rows}, fh)  # fmt: skip
    os.replace(tmp, path)


def _finished(path: str, fingerprint: str) -> list[dict] | None:
    """The rows of a point file written for ``fingerprint``, or None."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc.get("rows") if isinstance(doc, dict) and doc.get("fingerprint") == fingerprint else None


def check_out_dir(out_dir: str, force: bool) -> None:
    """InputError unless ``out_dir`` is new, empty, a previous sweep's, or ``force``."""
    if not os.path.lexists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise InputError(f"--out {out_dir}: exists and is not a directory")
    ours = SWEEP_FILES | {n for n in os.listdir(out_dir) if n.endswith(".png") or n.startswith(".plans.")}
    foreign = sorted(n for n in os.listdir(out_dir) if n not in ours)
    if foreign and not force:
        raise InputError(
            f"--out {out_dir}: directory holds {foreign[0]!r}, which is not part of a sweep"
            " (choose an empty or new directory, or pass --force)"
        )


def run_sweep(spec: SweepSpec, options: SweepOptions) -> SweepResult:
    """Run every point of ``spec`` not finished yet, then write sweep.csv, sweep.md and the plots.

    Every point's scenario is loaded (and so validated) first: InputError for a bad key or value names the
    file and the point, and nothing is written.  A point that fails while running raises its error after
    the points already finished are saved (a sweep run again resumes)."""
    started = time.monotonic()
    if not spec.vary:
        raise InputError("sweep: nothing to vary (give --vary KEY=VALUES or a sweep file)")
    strategies = choose_strategies(spec.strategies)
    engine = engine_for(options.engine, options.spark_master, list(options.spark_conf))
    if options.jobs is not None and options.jobs < 1:
        raise InputError(f"--jobs: must be at least 1, got {options.jobs}")
    points = spec.points()
    scenarios = []
    for point in points:
        try:
            scenarios.append(load_scenario(spec.scenario, _changes(spec, point)))
        except InputError as err:
            raise InputError(f"{err} (at the sweep point {_label(point)})") from None
    out_dir = options.out or os.path.join("out", f"{scenarios[0].name}-sweep")
    check_out_dir(out_dir, options.force)
    os.makedirs(os.path.join(out_dir, "points"), exist_ok=True)
    with open(os.path.join(out_dir, "sweep.json"), "w", encoding="utf-8") as fh:
        design = {"scenario": spec.scenario, "vary": [[k, list(v)] for k, v in spec.vary], "set": list(spec.fixed)}
        design["x"] = spec.x
        json.dump({**design, "strategies": strategies, "points": [_point_id(p) for p in points]}, fh, indent=1)
        fh.write("\n")

    rows: dict[int, list[dict]] = {}
    todo = []
    for k, point in enumerate(points):
        fingerprint = _fingerprint(spec, strategies, point)
        path = os.path.join(out_dir, "points", f"{_point_id(point)}.json")
        found = _finished(path, fingerprint)
        if found is None:
            todo.append((k, path, fingerprint))
        else:
            rows[k] = found
    reused = len(rows)
    jobs = 1 if options.engine == "spark" else min(options.jobs or os.cpu_count() or 1, max(1, len(todo)))
    with Status("sweep", len(points), "point", options.progress) as status:
        if reused:
            status.note(f"{reused} of {len(points)} points finished already")
        status.update(reused, f"{len(todo)} points to run, {jobs} at a time")
        if options.engine == "spark":
            _run_serially(points, scenarios, todo, strategies, engine, out_dir, rows, status)
        else:
            _run_parallel(points, spec.x, scenarios, todo, strategies, engine, jobs, rows, status)
        status.phase("writing sweep.csv and sweep.md")
        from reports.sweep_plots import sweep_markdown, write_sweep_csv, write_sweep_plots

        table = [row for k in sorted(rows) for row in rows[k]]
        write_sweep_csv(os.path.join(out_dir, "sweep.csv"), spec, table)
        plots = []
        if options.plots:
            status.phase("drawing the plots")
            plots = write_sweep_plots(out_dir, spec, table, scenarios[0].name)
        with open(os.path.join(out_dir, "sweep.md"), "w", encoding="utf-8") as fh:
            fh.write(sweep_markdown(spec, table, plots, scenarios[0].name))
    return SweepResult(out_dir, len(points), len(todo), reused, table, plots, time.monotonic() - started)


def _label(point: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())


def _run_serially(points, scenarios, todo, strategies, engine, out_dir, rows, status) -> None:
    """The points one after the other in this process (the Spark engine: Spark spreads each point)."""
    import tempfile

    for k, path, fingerprint in todo:
        status.update(len(rows), f"running {_label(points[k])}")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".plans.", dir=out_dir) as plan_dir:
            report, timings = _run_point(scenarios[k], strategies, engine, "spark", plan_dir)
        rows[k] = point_rows(points[k], report, timings)
        _write_point(path, points[k], fingerprint, rows[k], time.monotonic() - t0)
        status.note(f"point {len(rows)}/{len(points)} done: {_label(points[k])} ({time.monotonic() - t0:.0f} s)")


def _run_parallel(points, x, scenarios, todo, strategies, engine, jobs, rows, status) -> None:
    """The points in forked worker processes, ``jobs`` at a time; a worker's error is raised here once
    the others have stopped (the points finished so far keep their files)."""
    import multiprocessing
    from queue import Empty

    context = multiprocessing.get_context("fork")
    messages = context.Queue()
    waiting, running = list(todo), {}
    started: dict[int, float] = {}
    took: dict[int, float] = {}
    failure: BaseException | None = None
    try:
        while (waiting and failure is None) or running:
            while waiting and failure is None and len(running) < jobs:
                k, path, fingerprint = waiting.pop(0)
                job = (scenarios[k], strategies, engine, points[k], path, fingerprint, messages)
                running[k] = context.Process(target=_worker, args=(k, job), name=f"point{k}", daemon=True)
                running[k].start()
                started[k] = time.monotonic()
            busy = ", ".join(_label(points[k]) for k in running)
            status.update(len(rows), f"running {busy}" + _left(points, x, took, todo, started, jobs))
            try:
                kind, k, payload = messages.get(timeout=0.5)
            except Empty:
                for k, process in list(running.items()):
                    if not process.is_alive() and process.exitcode != 0:
                        failure = failure or EmulatorError(
                            f"the worker running the sweep point {_label(points[k])} died (exit code"
                            f" {process.exitcode})"
                        )
                        running.pop(k)
                continue
            running.pop(k).join()
            if kind == "error":
                failure = failure or payload
                continue
            rows[k] = payload
            took[k] = time.monotonic() - started[k]
            status.note(f"point {len(rows)}/{len(points)} done: {_label(points[k])} ({took[k]:.0f} s)")
    finally:
        for process in running.values():
            process.terminate()
            process.join()
    if failure is not None:
        raise failure


def _left(points: list[dict], x: str, took: dict[int, float], todo: list, started: dict[int, float], jobs: int) -> str:
    """``; about 2:10 left``: each point still to finish costs what the finished ones with its x value
    took on average (the slowest finished one, when none has it yet), less what it ran already."""
    if not took:
        return ""
    now, slowest = time.monotonic(), max(took.values())
    remaining = 0.0
    for k, _, _ in todo:
        if k in took:
            continue
        same = [t for j, t in took.items() if points[j].get(x) == points[k].get(x)]
        cost = sum(same) / len(same) if same else slowest
        remaining += max(0.0, cost - (now - started[k] if k in started else 0.0))
    remaining /= jobs
    return f"; about {int(remaining) // 60}:{int(remaining) % 60:02d} left"


def _worker(k: int, job: tuple) -> None:
    """One point of :func:`_run_parallel` in a forked worker; its rows (or its error) go to the parent."""
    import pickle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    scenario, strategies, engine, point, path, fingerprint, queue = job
    t0 = time.monotonic()
    try:
        report, timings = _run_point(scenario, strategies, engine, "local", None)
        rows = point_rows(point, report, timings)
        _write_point(path, point, fingerprint, rows, time.monotonic() - t0)
        queue.put(("done", k, rows))
    except Exception as error:  # sent to the parent, which raises it
        try:
            pickle.dumps(error)
        except Exception:
            error = EmulatorError(f"sweep point {_label(point)}: {type(error).__name__}: {error}")
        queue.put(("error", k, error))
    queue.close()
    queue.join_thread()
