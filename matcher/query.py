"""A parsed subscription query: ``SELECT attrs FROM stream WHERE condition`` (docs/QUERIES.md)."""

from __future__ import annotations

from dataclasses import dataclass

from matcher.predicate import Predicate
from matcher.text import name_to_text


def quoted(token: str) -> str:
    """``repr(token)`` as an error message quotes it: cut to 40 characters (a token can be a megabyte)."""
    return repr(token if len(token) <= 40 else token[:37] + "...")


class QueryError(ValueError):
    """A query or condition does not parse; ``position`` is the 0-based offset of ``token`` in the text."""

    def __init__(self, message: str, position: int, token: str):
        near = f"near {quoted(token)}" if token else "at the end of the input"
        super().__init__(f"{message} at position {position} ({near})")
        self.position = position
        self.token = token


@dataclass(frozen=True)
class Query:
    """``select`` is None for ``SELECT *``; ``where`` is the condition in DNF (TRUE without WHERE)."""

    select: tuple[str, ...] | None
    stream: str
    where: Predicate
    text: str = ""

    def attributes(self, schema: tuple[str, ...]) -> tuple[str, ...]:
        """The selected attributes in schema order (all of them for ``SELECT *``)."""
        if self.select is None:
            return schema
        chosen = set(self.select)
        return tuple(a for a in schema if a in chosen)

    def referenced(self) -> tuple[str, ...]:
        """Attributes named in SELECT or WHERE, sorted."""
        return tuple(sorted(set(self.select or ()) | set(self.where.dims)))

    def to_text(self) -> str:
        """Query text that :func:`matcher.parser.parse_query` reads back to an equal query."""
        select = "*" if self.select is None else ", ".join(name_to_text(a) for a in self.select)
        where = "" if self.where == Predicate.TRUE else f" WHERE {self.where.to_text()}"
        return f"SELECT {select} FROM {name_to_text(self.stream)}{where}"
