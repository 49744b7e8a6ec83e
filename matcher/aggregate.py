"""A parsed aggregate subscription (docs/QUERIES.md, "Windowed aggregates")::

    SELECT station, AVG(temp), MAX(wind) FROM weather WHERE temp > -40 GROUP BY station
           WINDOW 10 s SLIDE 5 s HAVING AVG(temp) > 20

An :class:`AggregateQuery` answers, per window and group, one *record* of its outputs.  Its *input* is a
plain selection (:attr:`AggregateQuery.input`): the tuples satisfying WHERE, projected to the attributes
its groups and aggregates read.  Everything that routes and shares tuples sees an aggregate subscription
through the same four members a :class:`~matcher.query.Query` has (``stream``, ``where``, ``select``,
``attributes``), which give that input; what is computed from it, and how records compare, is the
aggregation's (``topologies/expected_aggregates.py`` centrally, ``peers/aggregation.py`` at a super-peer).

Values are exact: sums are the exact sum of the values rounded once to float64 (``math.fsum``'s result),
AVG and VAR the exact rational mean and population variance rounded once, STDDEV the square root of VAR,
MEDIAN the exact midpoint of the two middle values rounded once (the middle value for an odd count).
COUNT(x) counts tuples, as no attribute is ever missing.  A NaN among an attribute's values in a record
makes every aggregate of that attribute NaN except COUNT; records compare by equality, NaN equal to NaN.
Window sizes and slides are the exact decimals written (``0.1 s`` is one tenth, not the float nearest
it), so which window a tuple falls in is decided exactly.

The words of the aggregate clauses (:data:`CONTEXTUAL_WORDS`) are not reserved: the parser reads them as
such only where a clause may start, a unit only after a window's length, a function only before ``(``, so
attributes and streams may bear those names.  The canonical text (:meth:`AggregateQuery.to_text`) reads
back without quoting any of them, but quotes every name spelled like a clause word or a function all the
same, for a reader looking for where the clauses start: ``GROUP BY "window" WINDOW 10 s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from matcher.predicate import Predicate
from matcher.query import Query
from matcher.text import name_to_text, predicate_to_text

FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "VAR", "STDDEV", "MEDIAN")
"""The aggregate functions, upper-case, in the order the documentation lists them."""

HOLISTIC = frozenset({"MEDIAN"})
"""Functions with no partial state smaller than the values themselves: shared only by identical queries."""

STATES = ("count", "sum", "sumsq", "min", "max")
"""The partial states a shared aggregate flow may carry per pane and group (one count serves every
aggregate of a record; the others are per attribute)."""

TIME_UNITS = {"S": Fraction(1), "MS": Fraction(1, 1000), "MIN": Fraction(60)}
"""The units of a time window's size and slide, upper-case, each in seconds (written in any case)."""

COUNT_UNITS = frozenset({"TUPLES", "TUPLE"})
"""The units of a count window's size and slide, upper-case (written in any case)."""

CLAUSE_WORDS = ("GROUP", "BY", "WINDOW", "SLIDE", "HAVING")
"""The words starting the clauses of an aggregate query, upper-case (``BY`` follows ``GROUP``)."""

CONTEXTUAL_WORDS = frozenset({*CLAUSE_WORDS, *FUNCTIONS, *TIME_UNITS, *COUNT_UNITS})
"""The words an aggregate query gives a meaning, upper-case.  They are not reserved (unlike
:data:`matcher.text.KEYWORDS`): a name spelled like one is read as a name wherever a name is expected."""

_QUOTED_WORDS = frozenset({*CLAUSE_WORDS, *FUNCTIONS})
"""The canonical text quotes a name spelled like one of these (the units, which stand only after a
number, mislead no reader)."""

_NEEDS = {
    "COUNT": (),
    "SUM": ("sum",),
    "AVG": ("sum",),
    "MIN": ("min",),
    "MAX": ("max",),
    "VAR": ("sum", "sumsq"),
    "STDDEV": ("sum", "sumsq"),
    "MEDIAN": (),
}


@dataclass(frozen=True)
class Aggregate:
    """``function(attribute)``; ``attribute`` is None for ``COUNT(*)``."""

    function: str
    attribute: str | None = None

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise ValueError(f"unknown aggregate function {self.function!r}")
        if self.attribute is None and self.function != "COUNT":
            raise ValueError(f"{self.function} needs an attribute ('*' is only for COUNT)")

    @property
    def reads(self) -> str | None:
        """The attribute whose values it reads: None for COUNT, whose ``COUNT(x)`` counts tuples as ``COUNT(*)``
        does (no attribute is ever missing), so that a record's input need not carry ``x``."""
        return None if self.function == "COUNT" else self.attribute

    @property
    def holistic(self) -> bool:
        return self.function in HOLISTIC

    def states(self) -> tuple[tuple[str, str | None], ...]:
        """The partial states this aggregate is computed from, as ``(state, attribute)`` pairs, the count
        as ``("count", None)`` (every aggregate needs it: AVG and VAR divide by it, and a record exists
        only where it is positive).  A holistic aggregate has none: it needs the values."""
        if self.holistic:
            return (("count", None),)
        return (("count", None), *((state, self.attribute) for state in _NEEDS[self.function]))

    def to_text(self) -> str:
        return f"{self.function}({'*' if self.attribute is None else _name_text(self.attribute)})"


@dataclass(frozen=True)
class Window:
    """``WINDOW size [SLIDE slide]`` in seconds of emission time (``tuples`` False) or in tuples of a group
    (``tuples`` True); ``slide == size`` is a tumbling window, a smaller slide makes windows overlap, a
    larger one leaves gaps no window covers.  Time window ``k`` covers ``[k * slide, k * slide + size)``;
    count window ``j`` of a group holds its tuples ``j * slide`` to ``j * slide + size - 1``.  Raises
    ValueError for a size or slide not positive, or not whole for a count window."""

    size: Fraction
    slide: Fraction
    tuples: bool = False

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise ValueError("a window's size and slide are positive")
        if self.tuples and (self.size.denominator != 1 or self.slide.denominator != 1):
            raise ValueError("a count window's size and slide are whole numbers of tuples")

    @property
    def tumbling(self) -> bool:
        return self.size == self.slide

    def first_start(self, at: float) -> Fraction:
        """The start of the first time window starting at or after ``at`` (window 0's when ``at <= 0``): the
        first a subscription registered at ``at`` receives."""
        return max(0, math.ceil(Fraction(at) / self.slide)) * self.slide

    def whole_panes(self, length: Fraction) -> bool:
        """Every window is a whole run of time panes of ``length`` seconds (``length`` divides the size and
        the slide); never for a count window."""
        return not self.tuples and (self.size / length).denominator == 1 and (self.slide / length).denominator == 1

    def to_text(self) -> str:
        unit = "TUPLES" if self.tuples else "s"
        text = f"WINDOW {_decimal(self.size)} {unit}"
        return text if self.tumbling else f"{text} SLIDE {_decimal(self.slide)} {unit}"


def pane_length(windows: Iterable[Window]) -> Fraction:
    """The longest length every window's size and slide is a whole multiple of: their gcd, as exact
    fractions (0 for no window)."""
    length = Fraction(0)
    for window in windows:
        for x in (window.size, window.slide):
            length = Fraction(
                math.gcd(length.numerator * x.denominator, x.numerator * length.denominator),
                length.denominator * x.denominator,
            )
    return length


@dataclass(frozen=True)
class AggregateQuery:
    """``outputs``: the SELECT list in order, each a group attribute's name or an :class:`Aggregate`;
    ``having``: a condition over the record's columns (:meth:`column` names them: a group attribute by its
    name, an aggregate by its canonical text such as ``AVG(temp)``), TRUE without HAVING."""

    outputs: tuple[str | Aggregate, ...]
    stream: str
    where: Predicate
    groups: tuple[str, ...]
    window: Window
    having: Predicate = Predicate.TRUE
    text: str = ""

    @property
    def aggregates(self) -> tuple[Aggregate, ...]:
        """Every aggregate a record needs, the SELECT list's then those named only in HAVING, each once."""
        found = dict.fromkeys(o for o in self.outputs if isinstance(o, Aggregate))
        columns = {self.column(a): a for a in found}
        for dim in self.having.dims:
            if dim not in columns and dim not in self.groups:
                found.setdefault(_having_aggregate(dim))
        return tuple(found)

    @property
    def selected(self) -> tuple[Aggregate, ...]:
        """The aggregates a result record carries: those of the SELECT list, in order."""
        return tuple(o for o in self.outputs if isinstance(o, Aggregate))

    @property
    def select(self) -> tuple[str, ...]:
        """The attributes the input must carry: the groups', then each aggregated attribute once."""
        names = dict.fromkeys(self.groups)
        names.update(dict.fromkeys(a.reads for a in self.aggregates if a.reads is not None))
        return tuple(names)

    @property
    def input(self) -> Query:
        """The selection whose tuples the records are computed from."""
        return Query(self.select, self.stream, self.where)

    def attributes(self, schema: tuple[str, ...]) -> tuple[str, ...]:
        """The input's attributes in schema order (what a delivery of the input carries)."""
        return self.input.attributes(schema)

    def referenced(self) -> tuple[str, ...]:
        """Attributes named in SELECT, WHERE or GROUP BY, sorted."""
        named = {a.attribute for a in self.aggregates if a.attribute is not None}
        return tuple(sorted(set(self.select) | named | set(self.where.dims)))

    @staticmethod
    def column(output: str | Aggregate) -> str:
        """The name of an output's column in a record (and in HAVING's condition)."""
        return output if isinstance(output, str) else output.to_text()

    def partial_states(self) -> frozenset[tuple[str, str]] | None:
        """The partial states its records are combined from besides the count, as ``(state, attribute)``
        pairs; None when an aggregate is holistic (MEDIAN needs the values themselves)."""
        if any(a.holistic for a in self.aggregates):
            return None
        return frozenset((s, a) for aggregate in self.aggregates for s, a in aggregate.states() if a is not None)

    def record_values(self) -> int:
        """How many values a result record carries besides its window id: its group attributes and the
        aggregates of its SELECT list (docs/ACCOUNTING.md, "Records")."""
        return len(self.groups) + len(self.selected)

    def to_text(self) -> str:
        """Query text that :func:`matcher.parser.parse_query` reads back to an equal query.  HAVING writes
        its columns as what they name: a group attribute by its name, an aggregate as itself (the
        column ``AVG(temp)`` as the expression ``AVG(temp)``, not as the quoted name ``"AVG(temp)"``)."""
        select = ", ".join(_name_text(o) if isinstance(o, str) else o.to_text() for o in self.outputs)
        text = f"SELECT {select} FROM {_name_text(self.stream)}"
        if self.where != Predicate.TRUE:
            text += f" WHERE {predicate_to_text(self.where, dim_text=_name_text)}"
        if self.groups:
            text += " GROUP BY " + ", ".join(_name_text(g) for g in self.groups)
        text += " " + self.window.to_text()
        if self.having != Predicate.TRUE:
            groups = set(self.groups)  # the other columns are aggregates, written as their expressions
            having = predicate_to_text(self.having, dim_text=lambda c: _name_text(c) if c in groups else c)
            text += f" HAVING {having}"
        return text


def _having_aggregate(column: str) -> Aggregate:
    """The aggregate a HAVING column names (``AVG(temp)``, ``COUNT(*)``: :meth:`Aggregate.to_text`)."""
    function, _, rest = column.partition("(")
    inner = rest[:-1]
    if inner == "*":
        return Aggregate(function)
    if inner.startswith('"'):
        inner = inner[1:-1].replace('""', '"')
    return Aggregate(function, inner)


def _decimal(x: Fraction) -> str:
    """``x`` as the shortest exact decimal (a window's size or slide is written as one).  Raises
    ValueError when ``x`` has none (its denominator has a prime factor other than 2 and 5)."""
    rest, twos, fives = x.denominator, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        raise ValueError(f"{x} has no exact decimal form")
    digits = max(twos, fives)
    if digits == 0:
        return str(x.numerator)
    whole, part = divmod(x.numerator * 10**digits // x.denominator, 10**digits)
    return f"{whole}.{str(part).rjust(digits, '0').rstrip('0')}"


def _name_text(name: str) -> str:
    """``name`` as an aggregate query's canonical text writes it: as :func:`matcher.text.name_to_text`
    does, and quoted also when spelled like a clause word or a function."""
    if name.upper() in _QUOTED_WORDS:
        return '"' + name.replace('"', '""') + '"'
    return name_to_text(name)
