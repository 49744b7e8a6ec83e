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

import contextlib
import hashlib
import itertools
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

import yaml

from reports.progress import Status
from reports.report import assemble_report, served_exactly
from reports.runner import choose_strategies, engine_for
from topologies.bounds import MAX_SWEEP_POINTS, MAX_SWEEP_VALUES, cap, parse_yaml
from topologies.errors import EmulatorError, InputError, shown
from topologies.loader import load_scenario
from topologies.model import Scenario
from topologies.overrides import steps
from topologies.yaml_files import read_yaml

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
SWEEP_PLOTS = frozenset(f"{metric}.png" for metric in METRICS)
_DESIGN_KEYS = frozenset({"scenario", "vary", "set", "strategies", "points"})  # of sweep.json
_MAX_DESIGN_BYTES = 64 * 2**20  # a sweep.json of the largest grid holds about 2 MB
_RANGE = re.compile(r"\s*(-?[0-9]{1,18})\s*\.\.\s*(-?[0-9]{1,18})\s*")  # 18 digits: any seed numpy takes
_WORD = re.compile(r"[A-Za-z0-9_.+-]{1,60}")
_POINT_ID_CHARS = 120  # of a point's readable id, before the hash that keeps long or rewritten ids apart
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
            raise InputError(f"--x {_key_text(self.x_key)}: not a varied key (varied: {', '.join(keys) or 'none'})")

    def points(self) -> list[dict[str, object]]:
        """Every point of the grid, as key -> value in the order of :attr:`vary`.  Raises InputError, before
        making any, for a grid of more points than the cap (``STREAMGLOBE_MAX_SWEEP_POINTS``)."""
        name, default = MAX_SWEEP_POINTS
        limit, size = cap(name, default), 1
        for _, values in self.vary:
            size *= len(values)
            if size > limit:
                counts = " x ".join(f"{len(v):,}" for _, v in self.vary)
                raise InputError(
                    f"sweep: a grid of {counts} values has more than {limit:,} points (set {name} to change the cap)"
                )
        if size == 0:
            raise InputError(f"sweep: vary.{next(k for k, v in self.vary if not v)}: no values")
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


def parse_values(key: str, text: str, where: str | None = None) -> tuple[object, ...]:
    """``--vary`` values: ``a..b`` (whole numbers, both included) or comma-separated YAML values (commas
    inside brackets or braces belong to the value: ``[1,2],[3,4]`` is two lists); at most
    :data:`~topologies.bounds.MAX_SWEEP_VALUES` of them.  Errors start with ``where`` (default ``--vary
    KEY``)."""
    where = where or f"--vary {key}"
    match = _RANGE.fullmatch(text)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if high < low:
            raise InputError(f"{where}: empty range {shown(text)}")
        if high - low >= MAX_SWEEP_VALUES:
            raise InputError(f"{where}: {high - low + 1:,} values, over the {MAX_SWEEP_VALUES:,} a key may take")
        return tuple(range(low, high + 1))
    if text.count(",") >= MAX_SWEEP_VALUES:
        raise InputError(f"{where}: more than {MAX_SWEEP_VALUES:,} values")
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
    if any(part.strip() == "" for part in parts):
        raise InputError(f"{where}: an empty value in {shown(text)}")
    return tuple(parse_yaml(part, where) for part in parts)


def grid_values(key: str, values: object, where: str) -> tuple[object, ...]:
    """The values of one varied key as a sweep file or the Python API gives them: a text as ``--vary``
    takes it, or a non-empty sequence of at most :data:`~topologies.bounds.MAX_SWEEP_VALUES` values.
    Raises InputError naming ``where`` and the key otherwise."""
    if isinstance(values, str):
        return parse_values(key, values, f"{where}: vary.{key}")
    if isinstance(values, list | tuple | range) and 0 < len(values) <= MAX_SWEEP_VALUES:
        return tuple(values)
    if isinstance(values, list | tuple | range) and values:
        raise InputError(f"{where}: vary.{key}: {len(values):,} values, over the {MAX_SWEEP_VALUES:,} a key may take")
    raise InputError(f"{where}: vary.{key}: expected a non-empty list or a range such as 1..5, got {shown(values)}")


def vary_option(text: str) -> tuple[str, tuple[object, ...]]:
    """``KEY=VALUES`` of ``--vary``."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise InputError(f"--vary {text!r}: expected KEY=VALUES, e.g. subscriptions=100,200,400 or seed=1..5")
    key = key.strip()
    steps(key, "--vary")
    return key, parse_values(key, values)


def _key_text(key: object) -> str:
    """A key as an error message writes it: bare when it reads as a key path, else quoted and cut short."""
    return key if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.\[\]-]{1,200}", key) else shown(key)


def read_sweep_file(path: str) -> SweepSpec:
    """A sweep file: ``scenario`` (a path relative to the file), ``vary`` (key -> a list, or a text as
    ``--vary`` takes it), optional ``set`` (key -> value), ``strategies`` (a list) and ``x`` (the varied key
    on the plots' x axis).  Raises InputError naming the file and the key."""
    return sweep_file_spec(read_yaml(path), path)


def read_spec(path: str) -> SweepSpec:
    """What ``run.py sweep PATH`` sweeps: the sweep file at ``path``, or the scenario file at ``path`` with
    nothing varied yet (``--vary`` adds the keys).  The file is read once, as any scenario file is
    (topologies/yaml_files.py); InputError names it when it cannot be read or is not YAML."""
    doc = read_yaml(path)
    return sweep_file_spec(doc, path) if is_sweep_document(doc) else SweepSpec(path, ())


def sweep_file_spec(doc: object, path: str) -> SweepSpec:
    """The sweep the parsed sweep file ``doc`` (read from ``path``) describes."""
    if not is_sweep_document(doc):
        raise InputError(f"{path}: a sweep file is a mapping with 'scenario' and 'vary'")
    unknown = sorted(set(doc) - {"scenario", "vary", "set", "strategies", "x"})
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r} (expected one of: scenario, set, strategies, vary, x)")
    if "x" in doc and not isinstance(doc["x"], str):
        raise InputError(f"{path}: x: expected a varied key, got {shown(doc['x'])}")
    if not isinstance(doc["vary"], dict) or not doc["vary"]:
        raise InputError(f"{path}: vary: expected a mapping of keys to their values, got {shown(doc['vary'])}")
    vary = [(str(key), grid_values(str(key), values, path)) for key, values in doc["vary"].items()]
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
    """A readable, file-safe id, ``subscriptions[0].generate.count=100,seed=3``, distinct for distinct
    points: an id cut to :data:`_POINT_ID_CHARS` or with characters replaced ends in a hash of the point."""
    text = ",".join(f"{k}={_value_text(v)}" for k, v in point.items())
    safe = re.sub(r"[^][A-Za-z0-9_.=,+-]", "_", text)
    if safe == text and len(text) <= _POINT_ID_CHARS:
        return text
    return f"{safe[:_POINT_ID_CHARS]}+{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def _value_text(value: object) -> str:
    """A point's value in its id: a word as it is (``poisson``) when YAML reads it back as that text, every
    other value as JSON (``"100"``, a text that reads as a number; ``[1,4]``)."""
    if isinstance(value, str) and _WORD.fullmatch(value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def _fingerprint(spec: SweepSpec, strategies: list[str], point: dict[str, object]) -> str:
    """What makes a finished point reusable: the scenario's text, the changes, the point and the strategies."""
    with open(spec.scenario, "rb") as fh:
        text = hashlib.sha256(fh.read()).hexdigest()
    what = json.dumps([_VERSION, text, list(spec.fixed), list(point.items()), strategies], sort_keys=True, default=str)
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


def _run_point(scenario: Scenario, strategies: list[str], engine, plan_dir: str | None) -> tuple:
    """One point's report and timings: every strategy planned and simulated, here (an engine that forks:
    one after the other, the point being a worker of its own; else pipelined in ``plan_dir``)."""
    from reports.simulate import simulate, simulate_pipelined

    if engine.forks:
        entries, _, timings = simulate(scenario, strategies, engine, show_progress=False)
    else:
        entries, _, timings = simulate_pipelined(scenario, strategies, engine, plan_dir, show_progress=False)
    return assemble_report(scenario, entries, engine=engine.name), timings


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
    """InputError unless ``out_dir`` is new, empty, a previous sweep's, or ``force``.  A previous sweep's
    directory is known by its ``sweep.json``; without one, every name in it is the user's, even one a
    sweep would write (``sweep.csv``, ``points``, a plot's)."""
    if not os.path.lexists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise InputError(f"--out {out_dir}: exists and is not a directory")
    try:
        names = os.listdir(out_dir)
    except OSError as err:
        raise InputError(f"--out {out_dir}: cannot read it ({err.strerror or err})") from None
    ours = SWEEP_FILES | SWEEP_PLOTS | {n for n in names if n.startswith(".plans.")}
    foreign = sorted(n for n in names if n not in ours or not _previous_sweep(out_dir))
    if foreign and not force:
        raise InputError(
            f"--out {out_dir}: directory holds {shown(foreign[0])}, which is not part of a sweep"
            " (choose an empty or new directory, or pass --force)"
        )


def _previous_sweep(out_dir: str) -> bool:
    """Whether ``out_dir`` holds the ``sweep.json`` of a sweep (its design: what :func:`run_sweep` writes)."""
    path = os.path.join(out_dir, "sweep.json")
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > _MAX_DESIGN_BYTES:
            return False
        with open(path, encoding="utf-8") as fh:
            design = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(design, dict) and set(design) >= _DESIGN_KEYS


def _make_out_dir(out_dir: str) -> None:
    """Create ``out_dir/points`` (and what is missing above it); InputError naming ``--out`` when it
    cannot be written, with the directories created here removed again."""
    missing, parent = [], os.path.abspath(out_dir)
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(os.path.join(out_dir, "points"), exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as err:
        for directory in [os.path.join(os.path.abspath(out_dir), "points"), *missing]:
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        raise InputError(f"--out {out_dir}: cannot write there ({err.strerror or err})") from None


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
    _make_out_dir(out_dir)
    with open(os.path.join(out_dir, "sweep.json"), "w", encoding="utf-8") as fh:
        design = {"scenario": spec.scenario, "vary": [[k, list(v)] for k, v in spec.vary], "set": list(spec.fixed)}
        design.update(x=spec.x, strategies=strategies, points=[_point_id(p) for p in points])
        json.dump(design, fh, indent=1, default=str)
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
    jobs = min(options.jobs or os.cpu_count() or 1, max(1, len(todo))) if engine.forks else 1
    with Status("sweep", len(points), "point", options.progress) as status:
        if reused:
            status.note(f"{reused} of {len(points)} points finished already")
        status.update(reused, f"{len(todo)} points to run, {jobs} at a time")
        if engine.forks:
            _run_parallel(points, spec.x, scenarios, todo, strategies, engine, jobs, rows, status)
        else:
            _run_serially(points, scenarios, todo, strategies, engine, out_dir, rows, status)
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
    """``subscriptions=100, seed=3``: each value as written when short, else cut (:func:`shown`)."""
    return ", ".join(f"{k}={v if len(str(v)) <= 60 else shown(v)}" for k, v in point.items())


def _run_serially(points, scenarios, todo, strategies, engine, out_dir, rows, status) -> None:
    """The points one after the other in this process (the Spark engine: Spark spreads each point)."""
    for k, path, fingerprint in todo:
        status.update(len(rows), f"running {_label(points[k])}")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".plans.", dir=out_dir) as plan_dir:
            report, timings = _run_point(scenarios[k], strategies, engine, plan_dir)
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
        report, timings = _run_point(scenario, strategies, engine, None)
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
