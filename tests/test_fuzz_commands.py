"""Hostile input to the commands around a run and to the Python API, generated: a report.json for ``show``
and its options, ``expand --out`` paths, sweep grids, sweep files and ``--out`` directories, and every
argument of the library's functions.  The answer is a result or one short line (an InputError: exit 2 on
the command line), never a traceback, a hang or a blown address space, and nothing half-written.

Each example runs in a forked child with a time and an address-space limit (tests/test_fuzz_inputs.py).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import run as cli
import streamglobe as sg
from reports.show import VIEWS, show
from reports.sweep import SweepSpec, _point_id, check_out_dir, grid_values, read_sweep_file
from tests.test_fuzz_inputs import FUZZ, HOSTILE, MAX_MESSAGE, bounded, tally, to_yaml
from tests.topologies.test_loader_errors import BASE
from topologies.errors import EmulatorError, InputError

# hundreds of forked examples per test, about three minutes in all: the slow suite (CI) runs them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIGURE1 = str(ROOT / "topologies" / "figure1.yaml")
TINY = {
    "name": "tiny",
    "duration": 2,
    "network": {"super_peers": ["A", "B"], "links": [["A", "B"]]},
    "thin_peers": [{"id": "src", "attach": "A"}, {"id": "dst", "attach": "B"}],
    "streams": [{"id": "s", "source": "src", "rate": 5, "schema": {"v": {"distribution": {"uniform": [0, 1]}}}}],
    "subscriptions": [{"id": "Q1", "peer": "dst", "at": 0, "query": "SELECT v FROM s WHERE v < 0.5"}],
}


def verdict_of(function, *args) -> dict:
    """What ``function(*args)`` gave: ``done`` (and its value when small), ``refused`` with the message of an
    InputError, ``failed`` with an EmulatorError's, or ``crashed`` with the traceback of anything else."""
    try:
        value = function(*args)
    except InputError as err:
        return {"outcome": "refused", "message": str(err)[:2000], "length": len(str(err))}
    except EmulatorError as err:
        return {"outcome": "failed", "message": str(err)[:2000], "length": len(str(err))}
    except BaseException:
        return {"outcome": "crashed", "trace": traceback.format_exc()[-5000:]}
    return {"outcome": "done", "value": value if isinstance(value, str | int | type(None)) else None}


def assert_no_crash(verdict: dict, family: str, *starts: str) -> dict:
    tally(family, verdict["outcome"])
    assert verdict["outcome"] != "crashed", verdict["trace"]
    if verdict["outcome"] in ("refused", "failed"):
        message = verdict["message"]
        assert verdict["length"] < MAX_MESSAGE and "\n" not in message and "\r" not in message, message[:300]
        if starts:
            assert message.startswith(starts), message[:300]
    return verdict


# --- show: a report.json of any shape, and its options ----------------------------------------------------


@pytest.fixture(scope="module")
def report_doc() -> dict:
    return sg.run(sg.build(TINY), ["query-shipping", "ideal"]).doc


REPORT_HOSTILE = [None, True, -1, 1.5, "x", "", [], {}, [1], {"a": 1}, 10**400, "9" * 5000, float("nan"), "\n"]


@st.composite
def damaged_reports(draw, doc: dict) -> str:
    """``doc`` with values replaced, keys deleted or added, then written as JSON and maybe cut or nested."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(0, 4))):
        node, path = doc, []
        while isinstance(node, dict | list) and node and draw(st.integers(0, 4)):
            key = draw(st.sampled_from(list(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append(key)
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if not path:
            continue
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(REPORT_HOSTILE)))  # later edits stay here
    text = json.dumps(doc, allow_nan=True)
    cut = draw(st.sampled_from(["whole", "whole", "cut", "nested", "garbage"]))
    if cut == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif cut == "nested":
        text = "[" * draw(st.integers(1, 50_000)) + text
    elif cut == "garbage":
        text = draw(st.sampled_from(["", "\x00", "\ufeff{}", "[]", "null", '{"strategies": []}', "\xff\xfe"]))
    return text


def show_options():
    return st.tuples(
        st.sampled_from(VIEWS),
        st.one_of(st.none(), st.sampled_from(["ideal", "query-shipping", "nope", ""])),
        st.one_of(st.none(), st.sampled_from(["bytes", "tuples", "id", "expected", "bogus", "delivered", ""])),
        st.booleans(),
        st.one_of(st.none(), st.integers(-5, 5), st.sampled_from([10**30, -(10**30)])),
    )


@FUZZ
@given(data=st.data(), options=show_options())
def test_show_prints_or_refuses_any_report_and_options_in_one_line(tmp_path_factory, report_doc, data, options):
    directory = tmp_path_factory.mktemp("show")
    path = directory / "report.json"
    path.write_text(data.draw(damaged_reports(report_doc)), encoding="utf-8", errors="surrogatepass")
    what, strategy, sort, ascending, top = options
    verdict = bounded(verdict_of, show, str(path), what, strategy, sort, ascending, top)
    assert_no_crash(verdict, "show", str(path), "--", "show:")
    if verdict["outcome"] == "done" and top is not None and what != "table":  # never more rows than asked
        rows = [line for line in verdict["value"].splitlines()[2:] if not line.startswith("... ")]
        assert len(rows) <= top


# --- expand --out ---------------------------------------------------------------------------------------

OUT_SHAPES = ["", "new.yaml", "existing.yaml", "adir", "adir/", "nowhere/x.yaml", "a-file/x.yaml", ".", "..", "x\0y"]


def run_cli(args: list[str], cwd: str) -> dict:
    """``run.py ARGS`` in this (forked) process, in ``cwd``: its exit code and what it printed."""
    os.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args)
        except SystemExit as exit_:
            code = exit_.code
    return {"code": code, "stdout": out.getvalue()[-3000:], "stderr": err.getvalue()[-3000:]}


@FUZZ
@given(out=st.sampled_from(OUT_SHAPES), force=st.booleans(), relative=st.booleans())
def test_expand_out_writes_the_file_or_one_line_and_nothing(tmp_path_factory, out, force, relative):
    directory = tmp_path_factory.mktemp("expand")
    (directory / "s.yaml").write_text(to_yaml(BASE))
    (directory / "existing.yaml").write_text("mine\n")
    (directory / "a-file").write_text("mine\n")
    (directory / "adir").mkdir()
    (directory / "adir" / "keep").write_text("mine\n")
    before = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    target = out if relative else str(directory / out) if out else ""
    args = ["expand", str(directory / "s.yaml"), "--out", target] + ["--force"] * force
    result = bounded(run_cli, args, str(directory))
    after = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    if result["code"] == 0:
        tally("expand --out", "written")
        written = directory / out
        assert written.is_file() and written.read_text().startswith("# Written by")
        assert after == sorted({*before, str(written.relative_to(directory))})  # nothing else, no temporary file
    else:
        tally("expand --out", "refused")
        assert result["code"] == 2, result
        lines = result["stderr"].splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --out"), result["stderr"]
        assert after == before and (directory / "existing.yaml").read_text() == "mine\n"


# --- sweeps: grids, files, --out directories, point ids ------------------------------------------------


def vary_values(lengths: list[int]):
    return st.one_of(
        st.builds(lambda a, b: f"{a}..{b}", st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6)),
        st.builds(lambda n: list(range(n)), st.sampled_from(lengths)),
        st.sampled_from(HOSTILE),
        st.text(max_size=20),
    )


@FUZZ
@given(
    vary=st.dictionaries(
        st.sampled_from(["seed", "duration", "streams[0].rate", "x"]),
        vary_values([0, 1, 3, 100, 10_000, 10_001, 200_000]),
        max_size=4,
    )
)
def test_a_sweep_grid_is_bounded_before_any_point_is_made(vary):
    def points() -> int:
        grid = tuple((key, grid_values(key, values, "sweep")) for key, values in vary.items())
        return len(SweepSpec("s.yaml", grid).points())

    verdict = bounded(verdict_of, points, memory=1 << 29)
    assert_no_crash(verdict, "sweep grids", "sweep", "--vary")
    if verdict["outcome"] == "done":
        assert verdict["value"] <= 10_000


@FUZZ
@given(
    doc=st.one_of(
        st.fixed_dictionaries(
            {
                "scenario": st.sampled_from(["s.yaml", "nowhere.yaml"]),
                "vary": st.one_of(
                    st.none(),
                    st.dictionaries(
                        st.sampled_from(["seed", "duration", 5]), vary_values([0, 1, 3, 10_001]), max_size=2
                    ),
                ),
            },
            optional={"set": st.sampled_from(HOSTILE), "strategies": st.sampled_from(HOSTILE), "extra": st.just(1)},
        ),
        st.sampled_from(HOSTILE),
    )
)
def test_sweep_files_are_read_or_refused_in_one_line(tmp_path_factory, doc):
    directory = tmp_path_factory.mktemp("sweepfile")
    (directory / "s.yaml").write_text(to_yaml(BASE))
    path = directory / "w.yaml"
    path.write_text(to_yaml(doc) if isinstance(doc, dict) else json.dumps(doc, default=str))
    verdict = bounded(verdict_of, lambda: (read_sweep_file(str(path)), None)[1])
    assert_no_crash(verdict, "sweep files", str(path))


OURS = ["sweep.csv", "sweep.md", "points", "backbone_bytes.png", "exact.png", ".plans.x"]


@FUZZ
@given(
    names=st.lists(st.sampled_from([*OURS, "holiday.png", "notes.txt", "sweep.json"]), unique=True, max_size=5),
    design=st.sampled_from(["ours", "garbage", "a list", "huge"]),
)
def test_only_a_previous_sweep_or_an_empty_directory_is_taken_for_sweep_out(tmp_path_factory, names, design):
    directory = tmp_path_factory.mktemp("sweepout")
    for name in names:
        if name == "points":
            (directory / name).mkdir()
        elif name == "sweep.json":
            text = {
                "ours": json.dumps({"scenario": "s", "vary": [], "set": [], "strategies": [], "points": []}),
                "garbage": "{",
                "a list": "[]",
                "huge": "[" * 100_000,
            }[design]
            (directory / name).write_text(text)
        else:
            (directory / name).write_text("mine")
    verdict = bounded(verdict_of, check_out_dir, str(directory), False)
    assert_no_crash(verdict, "sweep --out", "--out")
    previous = "sweep.json" in names and design == "ours"
    foreign = {"holiday.png", "notes.txt"} & set(names)
    assert (verdict["outcome"] == "done") == (not names or (previous and not foreign)), (names, design)


point_values = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.text(max_size=200), st.lists(st.integers(), max_size=3)
)


@FUZZ
@given(points=st.lists(st.dictionaries(st.sampled_from(["seed", "x", "a[0].b"]), point_values, min_size=1), max_size=8))
def test_sweep_point_ids_are_file_safe_short_and_distinct(points):
    distinct = {json.dumps(p, sort_keys=True) for p in points}
    ids = {_point_id(json.loads(p)) for p in distinct}
    tally("sweep point ids", "distinct" if len(ids) == len(distinct) else "collided")
    assert len(ids) == len(distinct)
    for found in ids:
        assert re.fullmatch(r"[][A-Za-z0-9_.=,+-]{1,140}", found), found


# --- the Python API: every argument, hostile ------------------------------------------------------------

API_HOSTILE = [None, 0, -1, True, "2", "", [], {}, object(), 1.5, float("nan"), b"x", ["x"], {"x": 1}, 10**30]
API_HOSTILE += [np.int64(2), "local", "sharing-em", ("query-shipping",), FIGURE1, range(3), iter([1])]


def api_call(name: str, slot: str | int, value: object, out: str) -> object:
    """Call ``sg.<name>`` with valid arguments on TINY, but ``value`` in ``slot`` (an index or a keyword), in
    the directory holding ``out``: a hostile value taken for a relative path (``run(out="2")``) writes there,
    never into the directory pytest was started in.  Runs in a forked child, so the change of directory ends
    with it."""
    os.chdir(Path(out).parent)
    tiny = sg.build(TINY)
    plan = sg.plan(tiny, "query-shipping")
    run = {"jobs": 1, "plots": False, "progress": False, "engine": "local", "out": None, "check_plans": False}
    sweep = {"strategies": ["query-shipping"], "plots": False, "jobs": 1, "out": out, "changes": {"duration": 2}}
    calls = {  # each made when called: a run or a report costs a second
        "load": lambda: (sg.load, [FIGURE1], {"seed": None, "changes": None}),
        "build": lambda: (sg.build, [TINY], {"seed": None, "changes": None}),
        "plan": lambda: (sg.plan, [tiny, "query-shipping"], {}),
        "simulate": lambda: (sg.simulate, [tiny, plan], {"engine": "local", "spark_master": None}),
        "check": lambda: (sg.check, [tiny, sg.simulate(tiny, plan)], {}),
        "run": lambda: (sg.run, [tiny, ["query-shipping"]], run),
        "sweep": lambda: (sg.sweep, [FIGURE1, {"seed": [1]}], sweep),
        "active_subscriptions": lambda: (lambda s: list(sg.active_subscriptions(s)), [tiny], {}),
        "register_strategy": lambda: (sg.register_strategy, ["mine", lambda s, n: plan], {}),
        "unregister_strategy": lambda: (sg.unregister_strategy, ["mine"], {}),
        "report": lambda: (lambda r, k: r[k], [sg.run(tiny, ["ideal"]), "ideal"], {}),
    }
    function, args, kwargs = calls[name]()
    if isinstance(slot, int):
        args[slot] = value
    else:
        kwargs[slot] = value
    try:
        function(*args, **kwargs)
    finally:
        with contextlib.suppress(InputError):
            sg.unregister_strategy("mine")
    return None


API_SLOTS = [
    ("load", 0), ("load", "seed"), ("load", "changes"), ("build", 0), ("build", "seed"), ("build", "changes"),
    ("plan", 0), ("plan", 1), ("simulate", 0), ("simulate", 1), ("simulate", "engine"), ("simulate", "spark_master"),
    ("check", 0), ("check", 1), ("run", 0), ("run", 1), ("run", "jobs"), ("run", "plots"), ("run", "progress"),
    ("run", "engine"), ("run", "out"), ("run", "check_plans"), ("sweep", 0), ("sweep", 1), ("sweep", "strategies"),
    ("sweep", "jobs"), ("sweep", "out"), ("sweep", "changes"), ("active_subscriptions", 0), ("register_strategy", 0),
    ("register_strategy", 1), ("unregister_strategy", 0), ("report", 1),
]  # fmt: skip


@FUZZ
@given(slot=st.sampled_from(API_SLOTS), value=st.sampled_from(API_HOSTILE))
def test_api_arguments_give_a_result_or_the_librarys_own_error(tmp_path_factory, slot, value):
    out = str(tmp_path_factory.mktemp("api") / "sweep")
    verdict = bounded(verdict_of, api_call, *slot, value, out, seconds=120)
    assert_no_crash(verdict, "API arguments")
