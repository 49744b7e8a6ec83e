"""``python run.py expand``: a scenario file with its workload and events generators written out
(docs/SCENARIOS.md).

The text loads to a scenario equal to the generated one: the same thin-peers, streams, subscriptions and
events, every generated entry as written by its generator (one line each; the events in time order, each
as one written entry), every other value as the file (and its ``--set`` changes) gave it.  Comments and
YAML anchors do not survive; a header says where the file came from.  A topology generator
(``network.generate``) stays as it is: it is as explicit as a list of links, and much shorter.  An
imported network (``network.import``) is written out as super-peers with their positions and links with
their latency, bandwidth and length: the file no longer depends on the data it was read from.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Sequence

import yaml

from topologies.errors import InputError, shown
from topologies.loader import read_scenario
from topologies.model import Scenario


def _flow(value: object) -> str:
    """``value`` as one line of YAML (a flow mapping or sequence, or a scalar)."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...")


def _block(key: str, value: object, indent: str = "") -> list[str]:
    """``key: value``: a collection on one line when short (and a list of scalars), else a list one entry per
    line and a mapping one key per line."""
    nested = isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
    if isinstance(value, list) and value and (nested or len(_flow(value)) > 100):
        return [f"{indent}{key}:"] + [f"{indent}  - {_flow(entry)}" for entry in value]
    if isinstance(value, dict) and value and len(_flow(value)) > 100:
        return [f"{indent}{key}:"] + [line for k, v in value.items() for line in _block(k, v, indent + "  ")]
    return [f"{indent}{_flow({key: value})[1:-1]}"]


def render(
    doc: dict,
    source: str,
    overrides: Sequence[tuple[str, object]] = (),
    into: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The explicit file's text from the expanded document ``doc`` (:func:`read_scenario`) of the file
    ``source``, to be written into the directory ``into`` (default: beside ``source``; a replayed
    stream's CSV path is rewritten relative to it), ``notes`` as comment lines after the header."""
    here = os.path.dirname(os.path.abspath(source))
    there = os.path.abspath(into) if into is not None else here
    if there != here and isinstance(doc.get("streams"), list):
        doc = dict(doc)
        doc["streams"] = [_moved(stream, here, there) for stream in doc["streams"]]
    changed = "".join(f" --set {key}={json.dumps(value)}" for key, value in overrides)
    lines = [
        f"# Written by `python run.py expand {os.path.basename(source)}{changed}`: the scenario with every",
        "# generator of thin-peers, streams, subscriptions or events replaced by the entries it made, and an",
        "# imported network by its super-peers and links (docs/SCENARIOS.md).",
        *(f"#   {_one_line(note)}" for note in notes),
        "",
    ]
    for key, value in doc.items():
        lines += _block(key, value)
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """``text`` safe inside a comment line: a name read from a graph file may hold a line break."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _moved(stream: object, here: str, there: str) -> object:
    if not isinstance(stream, dict) or not isinstance(stream.get("replay"), str):
        return stream
    return {**stream, "replay": os.path.relpath(os.path.join(here, stream["replay"]), there)}


def expand(path: str, overrides: Sequence[tuple[str, object]] = (), into: str | None = None) -> tuple[Scenario, str]:
    """The scenario at ``path`` (with ``overrides``) and its explicit text, to be written into the
    directory ``into`` (default: beside ``path``).  Raises ScenarioError as
    :func:`topologies.loader.load_scenario` does."""
    scenario, doc, notes = read_scenario(path, overrides)
    return scenario, render(doc, path, overrides, into, notes)


def check_out_file(path: str, force: bool) -> None:
    """Raises InputError, before any work, unless the file ``path`` can be written: a non-empty path in an
    existing directory, not naming a directory, and not an existing file unless ``force``."""
    if not path:
        raise InputError("--out: an empty path (leave --out out to write to standard output)")
    if "\0" in path:
        raise InputError(f"--out {shown(path)}: a NUL character")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.lexists(parent) else "does not exist"
        raise InputError(f"--out {path}: {parent} {what}")
    if os.path.isdir(path):
        raise InputError(f"--out {path}: is a directory")
    if os.path.lexists(path):
        if not force:
            raise InputError(f"--out {path}: exists (pass --force to replace it)")
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise InputError(f"--out {path}: exists and is not a regular file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {path}: cannot write in {parent}")


def write_file(path: str, text: str) -> None:
    """``text`` into the file ``path`` whole: written beside it first, then renamed over it, so a failure
    leaves neither a half-written file nor the temporary one.  InputError naming ``--out`` when it fails."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    except OSError as err:
        raise InputError(f"--out {path}: cannot write there ({err.strerror or err})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # what open() would have made of it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(err, OSError):
            raise InputError(f"--out {path}: cannot write there ({err.strerror or err})") from None
        raise
