"""Reading a scenario file's YAML safely (docs/SCENARIOS.md, bounds): a regular UTF-8 file of bounded size,
parsed by :func:`topologies.bounds.parse_yaml` (bounded nesting, a safe loader that refuses duplicate keys
and malformed tags), every problem one :class:`ScenarioError` line naming the file (and the line, for a
YAML error).
"""

from __future__ import annotations

import os
import stat

from topologies.bounds import parse_yaml
from topologies.errors import ScenarioError, shown

MAX_FILE_BYTES = 16 * 2**20  # ~100,000 subscriptions; loading YAML takes about 5 s a megabyte


def _read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; otherwise ScenarioError
    naming the path (a device, a FIFO or a directory is refused before it is opened for reading:
    ``/dev/zero`` would never end, a FIFO would block)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise ScenarioError(f"{path}: {info.st_size:,} bytes, over the limit of {limit:,}")
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: file not found") from None
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read: {err.strerror or err}") from None
    except ValueError:  # os.stat refuses a NUL character, which no file name holds
        raise ScenarioError(f"{shown(path)}: bad file name (a NUL character)") from None
    if len(data) > limit:
        raise ScenarioError(f"{path}: over the limit of {limit:,} bytes")
    return data


def read_yaml(path: str) -> object:
    """The parsed document of the YAML file at ``path``; ScenarioError naming the file for anything wrong."""
    data = _read_regular_file(path, MAX_FILE_BYTES)
    try:
        text = data.decode("utf-8-sig")  # a UTF-8 byte-order mark is accepted
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: cannot read: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return parse_yaml(text, path)
