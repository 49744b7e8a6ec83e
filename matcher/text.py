"""Canonical text form of boxes and predicates, in the query language (docs/QUERIES.md).

The text parses back to the very same structure: ``parse_condition(predicate.to_text()) == predicate``.
``TRUE`` and ``FALSE`` are accepted by the parser as an extension so that every predicate has a text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matcher.predicate import Box, Interval, Predicate

KEYWORDS = frozenset({"SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "BETWEEN", "IN", "TRUE", "FALSE"})
"""Reserved words of the query language, the one list: the parser reads them as keywords in any case (a
name spelled like one must be quoted), and a scenario may not name a stream or an attribute after one
(the loader and the JSON Schema refuse it)."""


def is_keyword(word: str) -> bool:
    """``word`` is a reserved word of the query language, in any case."""
    return word.upper() in KEYWORDS


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def name_to_text(name: str) -> str:
    """``name`` as written in a query: bare when it is a plain identifier, else in double quotes."""
    if _PLAIN_NAME.fullmatch(name) and not is_keyword(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def number_to_text(x: float) -> str:
    """Shortest text that reads back as the same float (integers without a decimal point)."""
    x = float(x)  # an Interval built directly may hold ints
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def interval_to_text(dim: str, iv: Interval, dim_text: Callable[[str], str] = name_to_text) -> str:
    """``iv`` on ``dim``, the dimension written by ``dim_text`` (default: as a name)."""
    dim = dim_text(dim)
    if iv.lo == iv.hi and iv.lo_closed and iv.hi_closed:
        return f"{dim} = {number_to_text(iv.lo)}"
    if iv.lo_closed and iv.hi_closed:
        return f"{dim} BETWEEN {number_to_text(iv.lo)} AND {number_to_text(iv.hi)}"
    parts = []
    if iv.lo != -math.inf:
        parts.append(f"{dim} {'>=' if iv.lo_closed else '>'} {number_to_text(iv.lo)}")
    if iv.hi != math.inf:
        parts.append(f"{dim} {'<=' if iv.hi_closed else '<'} {number_to_text(iv.hi)}")
    return " AND ".join(parts)


def box_to_text(box: Box, dim_text: Callable[[str], str] = name_to_text) -> str:
    if box.is_empty():
        return "FALSE"
    if box.is_universal():
        return "TRUE"
    return " AND ".join(interval_to_text(d, iv, dim_text) for d, iv in box.items())


def predicate_to_text(
    predicate: Predicate, memo: dict[Box, str] | None = None, dim_text: Callable[[str], str] = name_to_text
) -> str:
    """The canonical text; ``memo`` keeps each box's text for the next call (predicates of one plan share
    most of their boxes); ``dim_text`` writes a dimension (default: as a name; an aggregate query's HAVING
    writes its aggregate columns as expressions)."""
    if not predicate.boxes:
        return "FALSE"
    if memo is None:
        texts = [box_to_text(b, dim_text) for b in predicate.boxes]
    else:
        texts = [memo.get(b) or memo.setdefault(b, box_to_text(b, dim_text)) for b in predicate.boxes]
    return texts[0] if len(texts) == 1 else " OR ".join(f"({t})" for t in texts)
