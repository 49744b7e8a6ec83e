"""Hostile input, generated and curated: whatever a scenario file, a replay CSV, a query or a command line
holds, the answer is either a result or one short line naming the file, key and value (exit 2 on the
command line), never a traceback, a hang, a blown address space or a half-written output directory.

Scenario documents are mutated from valid ones and loaded in a forked child with a time and an address
space limit, so a hang or a memory bomb fails one example instead of the whole run (or the machine).
Beside whole documents, the values that reach a scenario by other paths are generated too (``--set`` and
``--vary`` texts, Python values given to the library), and so are the workload generators' parameters,
their counts against the cap, and replayed values at the edge of a float.  tests/test_fuzz_commands.py
does the same for ``show``, ``expand``, sweeps and the Python API's arguments.

With ``STREAMGLOBE_FUZZ_TALLY=<file>`` each generated example appends its family and outcome to the file
(``loaded``, ``refused``, ...): how many cases a run generated and how each ended.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import traceback
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher import QueryError
from matcher.parser import parse_condition, parse_query
from reports.sweep import vary_option  # imported here, not in each forked child: reports import the engines
from tests.topologies.test_loader_errors import BASE
from topologies.errors import InputError, ScenarioError
from topologies.loader import load_scenario, scenario_from_document, summary
from topologies.overrides import apply_overrides, parse_assignment

# hundreds of forked examples per test, about three minutes in all: the slow suite (CI) runs them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MAX_MESSAGE = 500  # characters of a one-line error, file path included
EXAMPLE_SECONDS = 30.0  # a hang guard, generous: machines here are noisy
EXAMPLE_MEMORY = 1 << 30  # bytes of address space an example may add
FUZZ = settings(
    max_examples=200,
    deadline=timedelta(seconds=30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- one example, bounded -------------------------------------------------------------------------------


class Overrun(AssertionError):
    """An example ran past its time limit or died (killed, out of memory)."""


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def bounded(function, *args, seconds: float = EXAMPLE_SECONDS, memory: int = EXAMPLE_MEMORY):
    """``function(*args)`` (its result must pickle) run in a forked child that may take ``seconds`` and add
    ``memory`` bytes of address space; Overrun if it takes longer or dies."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports through the pipe and never returns into pytest
        os.close(read_end)
        code = 0
        try:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            limit = _address_space() + memory
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            payload = pickle.dumps(function(*args))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    chunks = []
    with os.fdopen(read_end, "rb") as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], seconds)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise Overrun(f"still running after {seconds:g} s")
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        raise Overrun(f"the child died (wait status {status})")
    return pickle.loads(b"".join(chunks))


def tally(family: str, outcome: str) -> None:
    """Count one generated example of ``family`` (a no-op unless ``STREAMGLOBE_FUZZ_TALLY`` names a file)."""
    target = os.environ.get("STREAMGLOBE_FUZZ_TALLY")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"{family}\t{outcome}\n")


def load_verdict(path: str) -> dict:
    """What ``run.py validate path`` would meet, as a small picklable value."""
    try:
        summary(load_scenario(path))
    except ScenarioError as err:
        message = str(err)
        return {"outcome": "refused", "message": message[:2000], "length": len(message)}
    except BaseException:
        return {"outcome": "crashed", "trace": traceback.format_exc()[-5000:]}
    return {"outcome": "loaded"}


def assert_loads_or_refuses(path: str, family: str | None = None) -> dict:
    verdict = bounded(load_verdict, path)
    if family is not None:
        tally(family, verdict["outcome"])
    assert verdict["outcome"] != "crashed", verdict["trace"]
    if verdict["outcome"] == "refused":
        assert_one_short_line(verdict["message"], verdict["length"], path)
    return verdict


def assert_one_short_line(message: str, length: int, path: str) -> None:
    assert length < MAX_MESSAGE, f"{length} characters: {message[:300]}..."
    assert len(message.splitlines()) == 1 and "\n" not in message and "\r" not in message, message
    assert message.startswith(f"{path}: "), message


# --- a) scenario documents ------------------------------------------------------------------------------


class Raw:
    """A YAML token written into the text as is (what ``yaml.safe_dump`` cannot or would not write)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"


# nine levels of nine aliases each: 9**9 leaves once expanded, a few hundred bytes as text
BOMB_LEVELS = ["&a [x,x,x,x,x,x,x,x,x]"]
BOMB_LEVELS += [f"&{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
BOMB = "[" + ", ".join(BOMB_LEVELS) + "]"
RAW_TOKENS = [
    "9" * 4000,  # an integer Python converts, far past any float
    "9" * 5000,  # past Python's limit on integer text
    "0b" + "1" * 20000,  # a binary integer: no digit limit, 6,000 decimal digits
    "-0x" + "f" * 3000,
    ".nan",
    ".inf",
    "-.inf",
    "1.0e+999",
    "-1.0e-999",
    "1:30:00",  # sexagesimal 5400
    "0o17",
    "1_000",
    "2001-13-45",  # a timestamp that is no date
    "2001-12-14",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!python/object/apply:os.system [true]",
    "!!float abc",
    "!!timestamp abc",
    "!!bool maybe",
    "!!int xyz",
    "!!str 12",
    "~",
    "&self [*self]",  # a list that contains itself
    "*undefined",
    BOMB,
    "[" * 70 + "]" * 70,
    "[" * 60 + "]" * 60,
    "{<<: {latency: 3ms}, bandwidth: 1Mbit}",
    "{<<: [{rate: 5}, {rate: 6}]}",
    "{<<: 5}",
    '"\\0"',
    '"\\uD800"',
    '"a\\nb"',
    "'" + "x" * 100_000 + "'",
    "|\n  block",
]
NUMBER_TEXTS = ["1e999", "-5", "0", "1e-999", "1e-999999999", "0e999999999", "nan", "inf", ".5", "1.", "5e"]
NUMBER_TEXTS += ["9" * 400, "0x10", "+1", "--1", "1e309", "1E+3", " 5 ", "-0", "1e-320", "2e15", "0.0001"]
UNITS = ["Gbit", "Mbit", "kbit", "Kbit", "bit", "ms", "us", "s", "Gbit/s", "", " ms", "MS", "h", "µs", "bit/s/s"]
NAMES = ["SP0", "SP1", "SP2", "P0", "P1", "s", "x", "n", "Q1", "select", "a b", "SP9", "é", "x" * 300]
HOSTILE = [
    1e308,
    -1e308,
    5e-324,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    0,
    -1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**300,
    "",
    " ",
    "\t",
    "NaN",
    "\u2028",
    "\u202e",
    "\x85",
    "😀",
    "x" * 10_000,
    "a b" * 3000,
    "SELECT * FROM s",
    "SELECT x FROM s WHERE " + "(" * 300 + "x > 1" + ")" * 300,
    "SELECT x FROM nowhere",
    [],
    {},
    [[]],
    [1, 2, 3, 4, 5, 6, 7],
    {"uniform": [0, 1]},
    {"choice": {"values": [1], "weights": [0]}},
    ["SP0", "SP0"],
    ["SP0", "SP1", {"latency": "-5ms"}],
    True,
    False,
    None,
]


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _nested_text(depth: int, kind: str) -> str:
    opener, closer = {"list": ("[", "]"), "map": ("{a: ", "}"), "bad": ("[", "")}[kind]
    return opener * depth + "1" + closer * depth


raw_tokens = st.sampled_from(RAW_TOKENS).map(Raw)
unit_texts = st.builds(lambda n, u: f"{n}{u}", st.sampled_from(NUMBER_TEXTS), st.sampled_from(UNITS))
curated = st.sampled_from(HOSTILE).map(copy.deepcopy)  # a mutation must not change HOSTILE's own lists
hostile_values = st.one_of(  # branches are drawn evenly: the curated ones are listed twice to come up more
    raw_tokens,
    curated,
    unit_texts,
    raw_tokens,
    curated,
    unit_texts,
    st.sampled_from(NAMES),
    st.floats(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(max_size=20),
    st.integers(min_value=60, max_value=200).map(nested),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
hostile_keys = st.one_of(
    st.sampled_from(["colour", "id", "rate", "<<", "type", "x" * 300, "a\nb", "", "schema", "replay", "until"]),
    st.text(max_size=8),
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(),
)

GENERATED = [
    {"model": "grid", "rows": 2, "cols": 2},
    {"model": "tree", "branching": 1, "depth": 3},
    {"model": "transit-stub", "transit": 1, "stubs_per_transit": 1, "nodes_per_stub": 2},
    {"model": "waxman", "n": 3},
    {"model": "barabasi-albert", "n": 3, "m": 1},
]
REPLAY_CSV = "x,n\n0.5,1\n0.25,2\n"
TIMED_CSV = "t,x,kind\n2024-05-01T12:00:01Z,0.5,a\n2024-05-01T12:00:00.250Z,0.25,b\n"


def bases() -> list[dict]:
    """Valid documents to mutate: BASE, BASE on each generated backbone, BASE with a replayed stream."""
    docs = [copy.deepcopy(BASE)]
    for generate in GENERATED:
        doc = copy.deepcopy(BASE)
        doc["network"] = {"defaults": {"bandwidth": "10Mbit", "latency": "1ms"}, "generate": dict(generate)}
        doc["thin_peers"] = [{"id": "P0", "attach": "SP0"}, {"id": "P1", "attach": "SP1"}]
        docs.append(doc)
    docs.append(replay_doc())
    docs.append(events_doc())
    docs.append(newer_doc())
    return docs


def newer_doc() -> dict:
    """BASE with the newer features: a string attribute, a streams generator, a timed replay (``rt.csv``
    beside the scenario file) and a subscriptions generator with a popularity."""
    doc = copy.deepcopy(BASE)
    doc["streams"][0]["schema"]["proto"] = {"type": "string", "distribution": {"choice": ["http", "dns"]}}
    schema = {"v": {"distribution": {"uniform": [0, 10]}}}
    doc["streams"] += [
        {"generate": {"count": 2, "rate": [1, 3], "sources": "spread", "schema": schema}},
        {"id": "timed", "source": "P1", "replay": "rt.csv", "time": "t"},
    ]
    doc["subscriptions"].append(
        {"generate": {"count": 4, "prefix": "G", "popularity": {"zipf": 1.5}, "select": [1, 2]}}
    )
    return doc


def events_doc() -> dict:
    """BASE with failures and recoveries written out and generated."""
    doc = copy.deepcopy(BASE)
    doc["events"] = [
        {"at": 1, "fail": "link", "link": ["SP0", "SP1"]},
        {"at": 2.5, "recover": "link", "link": ["SP1", "SP0"]},
        {"at": 3, "fail": "super_peer", "id": "SP2"},
        {"generate": {"seed": 1, "links": {"mtbf": 4, "mttr": 1}, "super_peers": {"mtbf": 8, "mttr": 2}}},
    ]
    return doc


def replay_doc() -> dict:
    """BASE with its stream replayed from ``r.csv`` beside the scenario file."""
    doc = copy.deepcopy(BASE)
    doc["streams"][0] = {"id": "s", "source": "P0", "rate": 10, "replay": "r.csv"}
    return doc


MUTATION_DEPTH = 8  # deeper than any key of a scenario: a nested hostile value is not mutated inside


def paths(node, prefix: tuple = ()) -> list[tuple]:
    """Every key path into ``node`` (a tree of dicts and lists) up to MUTATION_DEPTH, parents first."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items if len(prefix) < MUTATION_DEPTH else ():
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


def containers(node) -> list:
    """The dicts and lists in ``node`` (itself included) up to MUTATION_DEPTH."""
    return [node, *(value for path in paths(node) if isinstance(value := at(node, path), dict | list))]


def at(doc, path: tuple):
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_documents(draw) -> dict:
    doc = draw(st.sampled_from(bases()))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "duplicate"]))
        if kind in ("replace", "delete"):
            options = paths(doc)
            leaves = [path for path in options if not isinstance(at(doc, path), dict | list)]
            if not options:
                continue
            # mostly a scalar: a replaced subtree tends to stop the loader at its first, shallow check
            path = draw(st.sampled_from(leaves if leaves and draw(st.integers(0, 3)) else options))
            parent = at(doc, path[:-1])
            if kind == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(hostile_values)
        elif kind == "add":
            maps = [node for node in containers(doc) if isinstance(node, dict)]
            if maps:
                draw(st.sampled_from(maps))[draw(hostile_keys)] = draw(hostile_values)
        else:
            lists = [node for node in containers(doc) if isinstance(node, list) and node]
            if lists:
                chosen = draw(st.sampled_from(lists))
                chosen.append(copy.deepcopy(draw(st.sampled_from(chosen))))
    return doc


def to_yaml(doc: dict) -> str:
    """The document as YAML text, each Raw token in place of its placeholder."""
    raws: list[str] = []

    def replace(node):
        if isinstance(node, Raw):
            raws.append(node.text)
            return f"rawtoken{len(raws) - 1}z"
        if isinstance(node, dict):
            return {key: replace(value) for key, value in node.items()}
        if isinstance(node, list):
            return [replace(value) for value in node]
        return node

    text = yaml.safe_dump(replace(doc), sort_keys=False, width=1 << 30)
    for index in reversed(range(len(raws))):  # rawtoken12z before rawtoken1z
        text = text.replace(f"rawtoken{index}z", raws[index])
    return text


@st.composite
def text_mutations(draw, text: str) -> bytes:
    """Damage the YAML text itself: truncation, inserted bytes, tabs, a BOM, duplicated lines, more
    documents."""
    data = text.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        kind = draw(st.sampled_from(["truncate", "insert", "tab", "bom", "duplicate-line", "document", "anchor"]))
        cut = draw(st.integers(min_value=0, max_value=len(data)))
        if kind == "truncate":
            data = data[:cut]
        elif kind == "insert":
            data = data[:cut] + draw(st.binary(min_size=1, max_size=4)) + data[cut:]
        elif kind == "tab":
            data = data.replace(b"  ", b"\t", draw(st.integers(min_value=1, max_value=3)))
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "duplicate-line":
            lines = data.split(b"\n")
            k = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            data = b"\n".join([*lines[: k + 1], lines[k], *lines[k + 1 :]])
        elif kind == "document":
            data += b"\n---\nname: second\n"
        else:
            data = data.replace(b"network:\n", b"network: &net\n", 1)
            data = data.replace(b"thin_peers:", b"x: *net\nthin_peers:", 1)
    return data


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("fuzz")
    (directory / "r.csv").write_text(REPLAY_CSV)
    (directory / "rt.csv").write_text(TIMED_CSV)
    return directory


@FUZZ
@given(doc=mutated_documents())
def test_mutated_scenarios_load_or_are_refused_in_one_line(workdir, doc):
    path = workdir / "s.yaml"
    path.write_text(to_yaml(doc), encoding="utf-8", errors="surrogatepass")
    assert_loads_or_refuses(str(path), "scenario documents")


@FUZZ
@given(data=st.data())
def test_damaged_scenario_text_loads_or_is_refused_in_one_line(workdir, data):
    doc = data.draw(st.one_of(st.sampled_from(bases()), mutated_documents()))
    path = workdir / "s.yaml"
    path.write_bytes(data.draw(text_mutations(to_yaml(doc))))
    assert_loads_or_refuses(str(path), "damaged scenario text")


CSV_PIECES = ["x", "n", "y", ",", "\n", "\r\n", '"', "1", "-2.5", "nan", "inf", "1e999", "9" * 5000, " ", ""]
CSV_PIECES += ["\x00", "\ufeff", "é", "where", "x y", "a" * 5000, "\t", ";", "0x1", "1_0", "\u2028"]
CSV_PIECES += ["t", "2024-05-01T12:00:00Z", "1e999999999", "-1e16", "1.7e308", "-1.7e308"]  # time columns, ranges


@FUZZ
@given(pieces=st.lists(st.sampled_from(CSV_PIECES), max_size=40), raw=st.binary(max_size=8), timed=st.booleans())
def test_replay_csv_contents_load_or_are_refused_in_one_line(workdir, pieces, raw, timed):
    # each example loads in a fresh child: the replay cache never holds an earlier content of r.csv
    (workdir / "r.csv").write_bytes("".join(pieces).encode("utf-8", "surrogatepass") + raw)
    try:
        path = workdir / "s.yaml"
        doc = replay_doc()
        if timed:  # the column t, when the file has one, gives the emission times
            del doc["streams"][0]["rate"]
            doc["streams"][0]["time"] = "t"
        path.write_text(to_yaml(doc))
        assert_loads_or_refuses(str(path), "replay CSV contents")
    finally:
        (workdir / "r.csv").write_text(REPLAY_CSV)


# Replay files the fuzzing found, kept as fixed examples (each a message of thousands of characters before).
REPLAY_REGRESSIONS = {
    "a header of 5000 digits": "9" * 5000 + "\n1\n",
    "a header name of 300 letters": "x," + "n" * 300 + "\n1,2\n",
    "a cell of 5000 digits": "x,n\n1," + "9" * 5000 + "\n",
    "a cell of 5000 letters": "x,n\n1," + "a" * 5000 + "\n",
}


@pytest.mark.parametrize("name", list(REPLAY_REGRESSIONS))
def test_known_hostile_replay_files_are_refused_in_one_line(tmp_path, name):
    (tmp_path / "r.csv").write_text(REPLAY_REGRESSIONS[name])
    path = tmp_path / "s.yaml"
    path.write_text(to_yaml(replay_doc()))
    assert assert_loads_or_refuses(str(path))["outcome"] == "refused"


def _generated(generate: dict) -> dict:
    doc = copy.deepcopy(bases()[1])
    doc["network"]["generate"] = generate
    return doc


def _edited(**changes) -> dict:
    doc = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        keys = [int(k) if k.isdigit() else k for k in dotted.split("__")]
        at(doc, keys[:-1])[keys[-1]] = value
    return doc


# Documents the fuzzing found, or reading the boundary code did, kept as fixed examples (each was a
# traceback, a hang, a memory bomb, a multi-line or a megabyte-long message before it was fixed).
REGRESSIONS = {
    "rate of 4000 digits": _edited(streams__0__rate=Raw("9" * 4000)),
    "bandwidth of 4000 digits": _edited(network__defaults__bandwidth=Raw("9" * 4000)),
    "latency of 4000 digits": _edited(network__defaults__latency=Raw("9" * 4000)),
    "seed of 6000 digits in binary": _edited(seed=Raw("0b" + "1" * 20000)),
    "latency exponent -999999999": _edited(network__defaults__latency="1e-999999999ms"),
    "latency 0e999999999": _edited(network__defaults__latency="0e999999999s"),
    "alias bomb as a super-peer reference": _edited(thin_peers__0__attach=Raw(BOMB)),
    "alias bomb as a link": _edited(network__links__0=Raw(BOMB)),
    "alias bomb as a distribution": _edited(streams__0__schema__x__distribution=Raw("{uniform: " + BOMB + "}")),
    "a set as a key": _edited(network__defaults=Raw("{? !!set {a: null} : 1}")),
    "a list as a generator model": _generated({"model": [1], "n": 3}),
    "NUL in the replay path": _edited(streams__0={"id": "s", "source": "P0", "rate": 1, "replay": "a\0b.csv"}),
    "long id echoed": _edited(thin_peers__0__attach="x y" * 10_000),
    "long key echoed": _edited(network__defaults={"k" * 10_000: 1}),
    "newline in an attribute name": _edited(streams__0__schema={"a\nb": {"distribution": {"uniform": [0, 1]}}}),
    "tree of branching 1 and depth 10**15": _generated({"model": "tree", "branching": 1, "depth": 10**15}),
    "tree of branching 0 and depth 10**15": _generated({"model": "tree", "branching": 0, "depth": 10**15}),
    "waxman of 50,000 nodes": _generated({"model": "waxman", "n": 50_000}),
    "transit-stub of one 40,000-node stub": _generated(
        {"model": "transit-stub", "transit": 1, "stubs_per_transit": 1, "nodes_per_stub": 40_000}
    ),
    "transit-stub of 50,000 transit nodes": _generated(
        {"model": "transit-stub", "transit": 50_000, "stubs_per_transit": 0, "nodes_per_stub": 1}
    ),
    "barabasi-albert of 25,000 links per node": _generated({"model": "barabasi-albert", "n": 50_000, "m": 25_000}),
    "query with a 5000-character token": _edited(subscriptions__0__query="SELECT x FROM s WHERE x > 1 " + "y" * 5000),
    "a !!timestamp that is none": _edited(duration=Raw("!!timestamp abc")),
    "a !!bool that is none": _edited(seed=Raw("!!bool maybe")),
    "a name of 300 characters": _edited(name="n" * 300),
    "an attribute name of 300 characters": _edited(
        streams__0__schema={"a" * 300: {"distribution": {"uniform": [0, 1]}}}
    ),
    "query with a 5000-digit number": _edited(subscriptions__0__query="SELECT x FROM s WHERE x > " + "9" * 5000),
    "an event at a time of 4000 digits": _edited(events=[{"at": Raw("9" * 4000), "fail": "super_peer", "id": "SP1"}]),
    "alias bomb as an event's link": _edited(events=[{"at": 1, "fail": "link", "link": Raw(BOMB)}]),
    "an mtbf of 5e-324": _edited(events=[{"generate": {"links": {"mtbf": 5e-324, "mttr": 5e-324}}}]),
    "an mtbf of 1e308 and a failed recovery": _edited(
        events=[
            {"generate": {"links": {"mtbf": 1e308, "mttr": 1}}},
            {"at": 1, "recover": "link", "link": ["SP0", "SP1"]},
        ]
    ),
}


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_known_hostile_documents_are_refused_in_one_line(tmp_path, name):
    path = tmp_path / "s.yaml"
    path.write_text(to_yaml(REGRESSIONS[name]), encoding="utf-8", errors="surrogatepass")
    assert assert_loads_or_refuses(str(path))["outcome"] == "refused"


def test_load_scenario_refuses_a_path_with_a_nul_byte():
    with pytest.raises(ScenarioError) as info:
        load_scenario("a\0b.yaml")
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)


# --- b) queries -----------------------------------------------------------------------------------------

KEYWORDS = ["SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "BETWEEN", "TRUE", "FALSE"]
QUERY_TOKENS = st.one_of(
    st.sampled_from(KEYWORDS),
    st.sampled_from(KEYWORDS).map(str.lower),
    st.sampled_from(KEYWORDS).map(str.title),
    st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">=", "==", "=<", "!", "<<"]),
    st.sampled_from(["(", ")", ",", "*", "+", "-", "((", "))"]),
    st.sampled_from(["0", "1", "-0", "+1", "1.5", ".5", "1.", "1e309", "-1e309", "1e-400", "nan", "inf", "-inf"]),
    st.sampled_from(["1e", "1e+", "1.2.3", "0x10", "1_000", "9" * 400, "4.9e-324", "1.7976931348623157e308"]),
    st.floats().map(repr),
    st.integers().map(str),
    st.sampled_from(["x", "y", "s", "_", "a1", '"x"', '"a b"', '"a""b"', '"', '""', '"SELECT"', '"open', "é"]),
    st.sampled_from([";", "#", "'", "`", "\\", "\x00", "\n", "\t", "$", "{", "}", "[", "]", "∑", "\u2028", "--"]),
    st.text(max_size=3),
)
SEPARATORS = st.sampled_from([" ", " ", "", "\n", "\t", "  "])


@st.composite
def query_soup(draw) -> str:
    tokens = draw(st.lists(st.tuples(QUERY_TOKENS, SEPARATORS), max_size=30))
    body = "".join(token + space for token, space in tokens)
    return draw(st.sampled_from(["", "SELECT x FROM s WHERE ", "SELECT * FROM s ", "SELECT "])) + body


def assert_round_trip_query(text: str) -> None:
    try:
        query = parse_query(text)
    except QueryError as err:
        assert len(str(err).splitlines()) == 1, str(err)
        return
    again = parse_query(query.to_text())
    assert (again.select, again.stream, again.where) == (query.select, query.stream, query.where), query.to_text()


def assert_round_trip_condition(text: str) -> None:
    try:
        predicate = parse_condition(text)
    except QueryError as err:
        assert len(str(err).splitlines()) == 1, str(err)
        return
    assert parse_condition(predicate.to_text()) == predicate, predicate.to_text()


@settings(max_examples=400, deadline=timedelta(seconds=30))
@given(text=query_soup())
def test_query_soup_parses_or_is_one_query_error(text):
    assert_round_trip_query(text)
    assert_round_trip_condition(text.removeprefix("SELECT x FROM s WHERE "))


VALID_NUMBERS = st.one_of(
    st.sampled_from(["0", "-0", "1", "-1.5", ".5", "1e308", "1e-320", "1e+16", "123456789012345678901234567890"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
VALID_NAMES = st.sampled_from(["x", "y", "z_1", '"a b"', '"select"', '"q""uote"', '"é"'])
OPERATORS = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])
comparisons = st.one_of(
    st.builds(lambda n, op, v: f"{n} {op} {v}", VALID_NAMES, OPERATORS, VALID_NUMBERS),
    st.builds(
        lambda n, no, a, b: f"{n} {no}BETWEEN {a} AND {b}",
        VALID_NAMES,
        st.sampled_from(["", "NOT "]),
        VALID_NUMBERS,
        VALID_NUMBERS,
    ),
    st.builds(
        lambda n, no, vs: f"{n} {no}IN ({', '.join(vs)})",
        VALID_NAMES,
        st.sampled_from(["", "not "]),
        st.lists(VALID_NUMBERS, min_size=1, max_size=4),
    ),
    st.sampled_from(["TRUE", "FALSE"]),
)
conditions = st.recursive(
    comparisons,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
        st.builds(lambda a, b: f"{a} OR {b}", inner, inner),
        st.builds(lambda a: f"NOT ({a})", inner),
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=timedelta(seconds=30))
@given(condition=conditions, select=st.sampled_from(["*", "x", "x, y", '"a b", z_1']))
def test_valid_queries_round_trip_through_their_canonical_text(condition, select):
    assert_round_trip_condition(condition)
    assert_round_trip_query(f"SELECT {select} FROM s WHERE {condition}")


# --- c) the command line --------------------------------------------------------------------------------


VALIDATE = ["validate", "{dir}/s.yaml"]
SWEEP = ["sweep", "{dir}/s.yaml", "--strategy", "ideal", "--no-plots"]
EXPAND = ["expand", "{dir}/s.yaml", "--out"]
MINIMAL_REPORT = {
    "strategies": {
        "ideal": {
            "backbone_bytes": 0,
            "backbone_tuples": 0,
            "access_bytes": 0,
            "latency_s": {"p50": None, "p99": None},
            "subscriptions": [],
        }
    }
}
CLI_CASES = {
    # name: (files to create {relative path: text or bytes}, arguments with {dir} for the directory)
    "rate of 4000 digits": ({"s.yaml": to_yaml(REGRESSIONS["rate of 4000 digits"])}, VALIDATE),
    "latency exponent -999999999": (
        {"s.yaml": to_yaml(REGRESSIONS["latency exponent -999999999"])},
        VALIDATE,
    ),
    "YAML nested 5000 levels": (
        {"s.yaml": to_yaml(BASE) + "extra: " + "[" * 5000 + "]" * 5000 + "\n"},
        VALIDATE,
    ),
    "alias bomb": ({"s.yaml": to_yaml(REGRESSIONS["alias bomb as a super-peer reference"])}, VALIDATE),
    "tree of depth 10**15": (
        {"s.yaml": to_yaml(REGRESSIONS["tree of branching 1 and depth 10**15"])},
        VALIDATE,
    ),
    "waxman of 50,000 nodes": ({"s.yaml": to_yaml(REGRESSIONS["waxman of 50,000 nodes"])}, VALIDATE),
    "/dev/zero": ({}, ["validate", "/dev/zero"]),
    "a FIFO": ({"pipe.yaml": None}, ["validate", "{dir}/pipe.yaml"]),
    "a directory": ({}, ["run", "{dir}", "--out", "{dir}/out"]),
    "a 300-character name": ({"s.yaml": to_yaml(_edited(name="n" * 300))}, VALIDATE),
    "a newline in the scenario path": ({}, ["validate", "{dir}/no\nsuch.yaml"]),
    "replay cell of 200,000 characters": (
        {"s.yaml": to_yaml(replay_doc()), "r.csv": "x,n\n1," + "2" * 200_000 + "\n"},
        ["run", "{dir}/s.yaml", "--out", "{dir}/out"],
    ),
    "replay cell of 5000 digits": (
        {"s.yaml": to_yaml(replay_doc()), "r.csv": "x,n\n1," + "9" * 5000 + "\n"},
        ["run", "{dir}/s.yaml", "--out", "{dir}/out"],
    ),
    "replay of binary garbage": (
        {"s.yaml": to_yaml(replay_doc()), "r.csv": bytes(range(256)) * 8},
        ["run", "{dir}/s.yaml", "--out", "{dir}/out"],
    ),
    "unknown option to validate": ({"s.yaml": to_yaml(BASE)}, ["validate", "{dir}/s.yaml", "--bogus"]),
    "unknown option to run": ({"s.yaml": to_yaml(BASE)}, ["run", "{dir}/s.yaml", "--frobnicate", "--out", "{dir}/out"]),
    "bad --jobs value": ({"s.yaml": to_yaml(BASE)}, ["run", "{dir}/s.yaml", "--jobs", "two\nlines"]),
    "no command": ({}, []),
    "unknown command": ({}, ["teleport", "x" * 100_000]),
    "--out under a regular file": (
        {"s.yaml": to_yaml(BASE), "a-file": "keep me"},
        ["run", "{dir}/s.yaml", "--out", "{dir}/a-file/below", "--strategy", "ideal", "--no-plots"],
    ),
    # the cases of the second hardening round, one per family (the generated ones are in-process)
    "--set nested 5000 levels": ({"s.yaml": to_yaml(BASE)}, [*VALIDATE, "--set", "seed=" + _nested_text(5000, "list")]),
    "--set of 5000 digits": ({"s.yaml": to_yaml(BASE)}, [*VALIDATE, "--set", "seed=" + "9" * 5000]),
    "--vary nested 5000 levels": ({"s.yaml": to_yaml(BASE)}, [*SWEEP, "--vary", "seed=" + _nested_text(5000, "map")]),
    "--vary of 5000 digits": ({"s.yaml": to_yaml(BASE)}, [*SWEEP, "--vary", "seed=1," + "9" * 5000]),
    "--vary range of 5000 digits": ({"s.yaml": to_yaml(BASE)}, [*SWEEP, "--vary", "seed=1.." + "9" * 5000]),
    "a grid of 81 million points": (
        {"s.yaml": to_yaml(BASE)},
        [*SWEEP, "--vary", "seed=1..9000", "--vary", "duration=1..9000"],
    ),
    "a sweep file with a YAML error": (
        {"s.yaml": to_yaml(BASE), "w.yaml": "scenario: s.yaml\nvary: {seed: [1, 2\n"},
        ["sweep", "{dir}/w.yaml"],
    ),
    "a sweep file of 200,000 seeds": (
        {"s.yaml": to_yaml(BASE), "w.yaml": f"scenario: s.yaml\nvary:\n  seed: {list(range(200_000))}\n"},
        ["sweep", "{dir}/w.yaml"],
    ),
    "a sweep file nested 5000 levels": (
        {"s.yaml": to_yaml(BASE), "w.yaml": f"scenario: s.yaml\nvary:\n  seed: {_nested_text(5000, 'list')}\n"},
        ["sweep", "{dir}/w.yaml"],
    ),
    "sweep --out holding only the user's files": (
        {"s.yaml": to_yaml(BASE), "mine/sweep.csv": "my data", "mine/points/notes": "mine", "mine/x.png": "png"},
        [*SWEEP, "--vary", "seed=1", "--out", "{dir}/mine"],
    ),
    "generate.count 1,000,000": (
        {"s.yaml": to_yaml(_edited(subscriptions=[{"generate": {"count": 1_000_000}}]))},
        VALIDATE,
    ),
    "replay of +-1.797e308 with a generator": (
        {
            "s.yaml": to_yaml({**replay_doc(), "subscriptions": [{"generate": {"count": 5}}]}),
            "r.csv": "x,n\n1.797e308,1\n-1.797e308,2\n",
        },
        VALIDATE,
    ),
    "a thin-peer named coordinator": ({"s.yaml": to_yaml(_edited(thin_peers__0__id="coordinator"))}, VALIDATE),
    "show /dev/zero": ({}, ["show", "/dev/zero"]),
    "show a report.json of the wrong shape": (
        {"report.json": json.dumps({"strategies": {"x": {"backbone_bytes": "lots"}}})},
        ["show", "{dir}/report.json"],
    ),
    "show a report.json nested 100,000 levels": ({"report.json": "[" * 100_000}, ["show", "{dir}"]),
    "show a report.json holding NaN": (
        {"report.json": json.dumps(MINIMAL_REPORT).replace('"p50": null', '"p50": NaN')},
        ["show", "{dir}/report.json"],
    ),
    "show --sort of no column": ({"report.json": json.dumps(MINIMAL_REPORT)}, ["show", "{dir}", "--sort", "bogus"]),
    "show --top -1": ({"report.json": json.dumps(MINIMAL_REPORT)}, ["show", "{dir}", "--links", "--top", "-1"]),
    "expand --out under a missing directory": ({"s.yaml": to_yaml(BASE)}, [*EXPAND, "{dir}/nowhere/x.yaml"]),
    "expand --out under a file": ({"s.yaml": to_yaml(BASE), "a-file": "keep me"}, [*EXPAND, "{dir}/a-file/x.yaml"]),
    "expand --out onto a directory, --force": (
        {"s.yaml": to_yaml(BASE), "adir/keep": "keep me"},
        [*EXPAND, "{dir}/adir", "--force"],
    ),
    "expand --out ''": ({"s.yaml": to_yaml(BASE)}, [*EXPAND, ""]),
}


def _limited_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limited_address_space,
    )


def _prepare(tmp_path: Path, files: dict, args: list[str]) -> tuple[Path, list[str], list[str]]:
    directory = tmp_path / "in"
    directory.mkdir()
    for name, content in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            os.mkfifo(directory / name)
        elif isinstance(content, bytes):
            (directory / name).write_bytes(content)
        else:
            (directory / name).write_text(content, encoding="utf-8", errors="surrogatepass")
    before = sorted(p.name for p in directory.iterdir())
    return directory, [a.replace("{dir}", str(directory)) for a in args], before


@pytest.mark.parametrize("name", list(CLI_CASES))
def test_hostile_command_lines_exit_2_with_one_line_and_write_nothing(tmp_path, name):
    files, args = CLI_CASES[name]
    directory, args, before = _prepare(tmp_path, files, args)
    result = cli(args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and result.stderr.endswith("\n"), result.stderr[:3000]
    assert len(lines[0]) < 2 * MAX_MESSAGE, lines[0][:300]
    assert result.stdout == ""
    assert sorted(p.name for p in directory.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no out/ beside it either


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a byte-order mark", "\ufeff" + to_yaml(BASE)),
        (
            "merge keys",
            to_yaml(BASE).replace(
                "    - latency: 5ms\n", "    - <<: {latency: 3ms, bandwidth: 1Mbit}\n      latency: 1ms\n"
            ),
        ),
        ("a 100-character name", to_yaml(_edited(name="n" * 100))),
    ],
)
def test_hostile_but_valid_scenarios_validate(tmp_path, name, text):
    _, args, _ = _prepare(tmp_path, {"s.yaml": text}, VALIDATE)
    result = cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and len(result.stdout.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


# --- d) values on other paths: --set and --vary texts, Python values ------------------------------------

SET_KEYS = ["seed", "duration", "streams[0].rate", "subscriptions[0].until", "network.defaults.latency", "name"]
SET_KEYS += ["thin_peers", "network.nothing", "streams[99].rate", "streams[" + "9" * 30 + "].rate", "a..b", "x y"]


yaml_values = st.one_of(
    st.builds(_nested_text, st.integers(0, 6000), st.sampled_from(["list", "map", "bad"])),
    st.builds(lambda sign, n: sign + "9" * n, st.sampled_from(["", "-", "+"]), st.integers(1, 9000)),
    st.builds(
        lambda prefix, n: prefix + "1" * n, st.sampled_from(["0b", "0x", "0o", "1.", "1e"]), st.integers(1, 9000)
    ),
    st.sampled_from([t for t in RAW_TOKENS if "\n" not in t]),
    st.sampled_from(["1..5", "5..1", "1.." + "9" * 30, "-3..-1", "&a [*a]", "*nowhere", "[1, 2", "{a: 1", ""]),
    st.text(max_size=30),
)


def set_verdict(path: str, flag: str, key: str, texts: list[str]) -> dict:
    """``--set KEY=TEXT`` (or ``--vary KEY=TEXT,...``) read and the scenario loaded with it: what the user
    meets."""
    try:
        if flag == "--set":
            changes = [parse_assignment(f"{key}={texts[0]}")]
        else:
            key, values = vary_option(f"{key}={','.join(texts)}")
            changes = [(key, values[0])]
        load_scenario(path, changes)
    except InputError as err:
        return {"outcome": "refused", "message": str(err)[:2000], "length": len(str(err))}
    except BaseException:
        return {"outcome": "crashed", "trace": traceback.format_exc()[-5000:]}
    return {"outcome": "loaded"}


def assert_short_line(verdict: dict, *starts: str) -> None:
    assert verdict["outcome"] != "crashed", verdict["trace"]
    if verdict["outcome"] == "refused":
        message = verdict["message"]
        assert verdict["length"] < MAX_MESSAGE and "\n" not in message and "\r" not in message, message[:300]
        assert message.startswith(starts), message[:300]


@FUZZ
@given(
    flag=st.sampled_from(["--set", "--vary"]),
    key=st.sampled_from(SET_KEYS),
    texts=st.lists(yaml_values, min_size=1, max_size=3),
)
def test_set_and_vary_texts_load_or_are_refused_in_one_line(workdir, flag, key, texts):
    path = workdir / "base.yaml"
    path.write_text(to_yaml(BASE))
    verdict = bounded(set_verdict, str(path), flag, key, texts)
    tally(f"{flag} texts", verdict["outcome"])
    assert_short_line(verdict, flag, str(path))


class Odd:
    """A value no YAML document holds."""


def python_value(draw, depth: int = 0):
    kind = draw(st.sampled_from(["scalar", "odd", "deep", "cycle", "shared", "list", "dict"]))
    if kind == "scalar" or depth > 2:
        return draw(st.one_of(st.sampled_from(HOSTILE), st.integers(), st.floats(), st.text(max_size=5)))
    if kind == "odd":
        return draw(
            st.sampled_from(
                [Odd(), {1, 2}, frozenset(), b"bytes", 1j, Fraction(1, 3), np.int64(5), np.float64("nan"), -(10**5000)]
            )
        )
    if kind == "deep":
        return nested(draw(st.integers(0, 5000)))
    if kind == "cycle":
        loop: list = [1]
        loop.append(loop)
        return draw(st.sampled_from([loop, {"a": loop}, [[loop]]]))
    if kind == "shared":  # 2**levels leaves once expanded, levels lists as objects
        value: list = ["x"]
        for _ in range(draw(st.integers(1, 60))):
            value = [value, value]
        return value
    if kind == "list":
        return [python_value(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))]
    return {draw(st.sampled_from(["id", "rate", 1, None, "x"])): python_value(draw, depth + 1) for _ in range(2)}


python_values = st.composite(python_value)()


def python_verdict(path: str, key: str, value: object, how: str) -> dict:
    """The scenario at ``path`` with ``value`` at ``key``, given as a change (``load(changes=...)``) or in
    the document itself (``build``)."""
    try:
        if how == "change":
            load_scenario(path, [(key, value)])
        else:
            doc = apply_overrides(yaml.safe_load(Path(path).read_text()), [(key, "placeholder")], path)
            target, last = doc, None
            steps = key.replace("[", ".").replace("]", "").split(".")
            for step in steps[:-1]:
                target = target[int(step)] if step.isdigit() else target[step]
            last = steps[-1]
            target[int(last) if last.isdigit() else last] = value
            scenario_from_document(doc, "<python>")
    except InputError as err:
        return {"outcome": "refused", "message": str(err)[:2000], "length": len(str(err))}
    except BaseException:
        return {"outcome": "crashed", "trace": traceback.format_exc()[-5000:]}
    return {"outcome": "loaded"}


@FUZZ
@given(key=st.sampled_from(SET_KEYS[:6]), value=python_values, how=st.sampled_from(["change", "document"]))
def test_python_values_load_or_are_refused_in_one_line(workdir, key, value, how):
    path = workdir / "base.yaml"
    path.write_text(to_yaml(BASE))
    verdict = bounded(python_verdict, str(path), key, value, how)
    tally("Python values", verdict["outcome"])
    assert_short_line(verdict, str(path), "<python>", "--set")


# --- e) the workload generators: parameters, counts against the cap, replayed extremes -----------------

EXTREMES = [0, -1, 0.5, 1, 2, 10, 11, 1e-300, 1e300, 1.7e308, float("inf"), float("nan"), 10**20, "1", None, [1, 2]]
extremes = st.one_of(st.sampled_from(EXTREMES), st.floats(), st.integers(-(10**6), 10**6))


@st.composite
def generator_specs(draw) -> dict:
    """A subscription generator with some of its parameters at or past their edges."""
    spec: dict = {"count": draw(st.integers(1, 40))}
    model = draw(st.sampled_from(["hot-spots", "zipf", "uniform"]))
    interests = {"model": model}
    if model == "hot-spots":
        interests |= draw(st.fixed_dictionaries({}, optional={"spread": extremes, "spots": extremes}))
    elif model == "zipf":
        interests |= draw(st.fixed_dictionaries({}, optional={"exponent": extremes, "regions": extremes}))
    spec["interests"] = interests
    names = st.sampled_from(["x", "n", "y", "x", 7])
    spec["predicate"] = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "attributes": st.lists(names, min_size=0, max_size=4),
                "width": st.one_of(extremes, st.lists(extremes, min_size=2, max_size=2)),
                "cut": extremes,
                "disjunction": extremes,
            },
        )
    )
    optional = {
        "select": st.one_of(extremes, st.lists(st.integers(-1, 200), min_size=2, max_size=2)),
        "overlap": extremes,
        "arrivals": st.one_of(
            st.fixed_dictionaries({"process": st.just("poisson")}, optional={"over": st.lists(extremes, max_size=3)}),
            st.fixed_dictionaries({"process": st.just("waves")}, optional={"waves": extremes, "spread": extremes}),
        ),
        "holding": st.one_of(
            st.fixed_dictionaries({"exponential": extremes}),
            st.fixed_dictionaries({"uniform": st.lists(extremes, min_size=2, max_size=2)}),
            st.fixed_dictionaries({"fixed": extremes}, optional={"leave": extremes}),
        ),
        "peers": st.lists(st.sampled_from(["P0", "P1", "P9"]), max_size=3),
    }
    spec |= draw(st.fixed_dictionaries({}, optional=optional))
    return spec


def generated_verdict(path: str) -> dict:
    """:func:`load_verdict` with numpy's and Python's RuntimeWarnings as errors (a warning on stderr is a
    bound missed), and what the generator made when it loaded."""
    import warnings

    warnings.simplefilter("error", RuntimeWarning)
    try:
        scenario = load_scenario(path)
    except ScenarioError as err:
        return {"outcome": "refused", "message": str(err)[:2000], "length": len(str(err))}
    except BaseException:
        return {"outcome": "crashed", "trace": traceback.format_exc()[-5000:]}
    sources = {s.id: s.source for s in scenario.streams}
    return {"outcome": "loaded", "own": sum(sources[s.stream] == s.peer for s in scenario.subscriptions)}


@FUZZ
@given(spec=generator_specs(), everyone_publishes=st.booleans())
def test_generator_parameters_load_or_are_refused_in_one_line(workdir, spec, everyone_publishes):
    doc = copy.deepcopy(BASE)
    doc["subscriptions"] = [{"generate": spec}]
    if everyone_publishes:  # P1 publishes too: no thin-peer is free of streams
        doc["streams"].append({**copy.deepcopy(doc["streams"][0]), "id": "t", "source": "P1"})
    path = workdir / "g.yaml"
    path.write_text(to_yaml(doc))
    verdict = bounded(generated_verdict, str(path))
    tally("generator parameters", verdict["outcome"])
    assert_short_line(verdict, str(path))
    if verdict["outcome"] == "loaded" and "peers" not in spec:  # a source never gets its own tuples back
        assert verdict["own"] == 0


def counts_verdict(path: str, limit: int) -> dict:
    os.environ["STREAMGLOBE_MAX_GENERATED"] = str(limit)
    return load_verdict(path)


@FUZZ
@given(
    kind=st.sampled_from(["thin_peers", "subscriptions"]),
    counts=st.lists(st.one_of(st.integers(1, 120), st.sampled_from([10**6, 10**12, 10**18])), min_size=1, max_size=3),
)
def test_generator_counts_past_the_cap_are_refused_before_generating(workdir, kind, counts):
    limit = 100
    doc = copy.deepcopy(BASE)
    prefixes = ["G", "H", "J"]
    written = len(doc[kind])
    doc[kind] += [
        {"generate": {"count": n, "prefix": prefixes[k], **({"attach": "spread"} if kind == "thin_peers" else {})}}
        for k, n in enumerate(counts)
    ]
    path = workdir / "c.yaml"
    path.write_text(to_yaml(doc))
    verdict = bounded(counts_verdict, str(path), limit)
    tally("generator counts", verdict["outcome"])
    assert_short_line(verdict, str(path))
    made = 0
    for k, n in enumerate(counts):  # the first generator past the cap is the one refused, before generating
        made += n
        if made > limit:
            assert verdict["outcome"] == "refused", counts
            assert f"{kind}[{written + k}].generate.count: " in verdict["message"], verdict["message"]
            assert f"cap of {limit} generated" in verdict["message"]
            return
    assert verdict["outcome"] == "loaded", verdict.get("message")


REPLAY_EXTREMES = ["1.7976931348623157e308", "-1.7976931348623157e308", "1e308", "-1e308", "5e-324", "-0.0"]
REPLAY_EXTREMES += ["1e-300", "0", "1", "-2.5", "9e307", "-9e307"]


@FUZZ
@given(
    rows=st.lists(st.tuples(st.sampled_from(REPLAY_EXTREMES), st.sampled_from(REPLAY_EXTREMES)), min_size=1, max_size=6)
)
def test_replayed_extremes_with_a_generator_load_or_are_refused_in_one_line(workdir, rows):
    (workdir / "r.csv").write_text("x,n\n" + "".join(f"{a},{b}\n" for a, b in rows))
    try:
        doc = replay_doc()
        doc["subscriptions"] = [{"generate": {"count": 10, "predicate": {"attributes": ["x", "n"]}, "select": 2}}]
        path = workdir / "rg.yaml"
        path.write_text(to_yaml(doc))
        verdict = bounded(generated_verdict, str(path))
    finally:
        (workdir / "r.csv").write_text(REPLAY_CSV)
    tally("replayed extremes", verdict["outcome"])
    assert_short_line(verdict, str(path))
    columns = list(zip(*((float(a), float(b)) for a, b in rows), strict=True))
    too_wide = any(not math.isfinite(max(c) - min(c)) for c in columns)
    assert (verdict["outcome"] == "refused") == too_wide, verdict.get("message")
