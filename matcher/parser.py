"""The query language (docs/QUERIES.md), parsed into a :class:`Query` whose condition is in DNF, or an
:class:`~matcher.aggregate.AggregateQuery` when the select list holds an aggregate.

Grammar (keywords case-insensitive; ``TRUE``/``FALSE`` and ``NOT BETWEEN``/``NOT IN`` are extensions)::

    query      := SELECT ( '*' | name { ',' name } ) FROM name [ WHERE condition ]
                | SELECT item { ',' item } FROM name [ WHERE condition ] [ GROUP BY name { ',' name } ]
                  window [ HAVING condition ]                      (at least one item an aggregate)
    item       := name | aggregate
    aggregate  := function '(' ( '*' | name ) ')'                   ('*' only for COUNT)
    function   := COUNT | SUM | AVG | MIN | MAX | VAR | STDDEV | MEDIAN
    window     := WINDOW length time [ SLIDE length time ] | WINDOW length count [ SLIDE length count ]
    time       := s | ms | min
    count      := TUPLES | TUPLE
    length     := number                                           (exact; > 0; whole for count)
    condition  := conjunct { OR conjunct }
    conjunct   := negation { AND negation }
    negation   := NOT negation | '(' condition ')' | TRUE | FALSE | comparison
    comparison := subject ( '=' | '!=' | '<>' | '<' | '<=' | '>' | '>=' ) number
                | subject [ NOT ] BETWEEN number AND number
                | subject [ NOT ] IN '(' number { ',' number } ')'
                | name ( '=' | '!=' | '<>' ) text | name [ NOT ] IN '(' text { ',' text } ')'
    subject    := name                          (in WHERE: an attribute)
                | aggregate | name              (in HAVING: an aggregate, or a GROUP BY attribute)
    name       := identifier | '"' characters, with '""' for a quote '"'
    number     := [ '+' | '-' ] digits [ '.' digits ] [ ( 'e' | 'E' ) [ '+' | '-' ] digits ]
    text       := "'" characters, with "''" for a quote "'"

**Contextual words.**  Only the words of :data:`matcher.text.KEYWORDS` are reserved.  The words of the
aggregate clauses (:data:`matcher.aggregate.CONTEXTUAL_WORDS`) are names like any other, read as clause
words only where a clause may start (``GROUP BY``, ``WINDOW``, ``SLIDE``, ``HAVING`` after the FROM
name, the WHERE condition, the GROUP BY list or the window), as a unit only after a window's length, and
as a function only before ``(`` in the select list and in HAVING; a double-quoted name is never one.  So
``SELECT count, COUNT(*) FROM window GROUP BY count WINDOW 10 s`` groups on the attribute ``count`` of
the stream ``window``.

**Aggregate queries.**  A window's length and slide are kept as exact fractions of seconds (``0.1 s`` is
one tenth, ``1 ms`` a thousandth, ``1 min`` sixty) or of tuples; the slide defaults to the length and
may exceed it (windows with gaps between them).  HAVING's condition becomes a predicate over the record's
columns (:meth:`~matcher.aggregate.AggregateQuery.column`: ``AVG(temp)`` for an aggregate, the name for a
group attribute).

**Text attributes.**  A parse given ``texts`` (a text attribute's name -> its values, in order) reads a
comparison of such an attribute with quoted texts as one of the value's position in that list (its
*code*: a text attribute travels as the code of its value): ``proto = 'dns'`` is ``proto = 1`` when
``dns`` is the second value.  A text that is not one of the values matches nothing (``!=`` it: everything).
Text compares only by ``=``, ``!=`` and ``IN``; a number with a text attribute, or a text with any other,
is an error.  Without ``texts`` every attribute holds numbers (a plan's conditions, which keep the codes).

Parsing builds a small expression tree; :func:`_dnf` then pushes NOT down to the comparisons (each
comparison is a set of intervals on one attribute, so its negation is the complement of that set) and
distributes AND over OR left to right.  Within a conjunction, intervals on the same attribute intersect
and empty boxes are dropped, so a contradiction yields ``Predicate.FALSE``.  A long AND on one attribute
(``a != 1 AND a != 2 AND ...``, ``a NOT IN (...)``) is merged by bisection instead of multiplied out: the
same boxes in the same order, in near-linear time.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from matcher.aggregate import CLAUSE_WORDS, COUNT_UNITS, FUNCTIONS, TIME_UNITS, Aggregate, AggregateQuery, Window
from matcher.predicate import INF, UNBOUNDED, Box, Interval, Predicate, interval
from matcher.query import Query, QueryError, quoted
from matcher.text import KEYWORDS

MAX_BOXES = 10_000
"""A condition whose DNF has more boxes than this is rejected (the DNF of a CNF grows exponentially)."""

MAX_PAIRS = 1_000_000
"""Distributing AND over OR may try at most this many box pairs at one AND (bounds the work even when
most pairs turn out empty).  The count is that of the plain product, ``len(left) * len(right)``, also
when the sorted merge of :func:`_conjoin` needs far fewer: whether a condition is accepted does not
depend on how its boxes are computed."""


_COMPARISONS = ("<=", ">=", "!=", "<>", "=", "<", ">")
_PUNCTUATION = frozenset("(),*+-")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]+")


@dataclass(frozen=True)
class _Token:
    kind: str  # "name", "number", "keyword", "op", "punct" or "end"
    text: str  # the keyword upper-cased, the unquoted name, else the source text
    position: int
    source: str  # as written, for error messages
    quoted: bool = False  # a double-quoted name: never a clause word, unit or function


def _tokenize(text: str) -> list[_Token]:
    """Split ``text`` into tokens, ending with an "end" token.  Raises QueryError on a bad character."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if word := _WORD.match(text, i):
            upper = word.group().upper()
            kind = "keyword" if upper in KEYWORDS else "name"
            tokens.append(_Token(kind, upper if kind == "keyword" else word.group(), i, word.group()))
            i = word.end()
        elif number := _NUMBER.match(text, i):
            end = number.end()
            if end < n and (text[end].isalnum() or text[end] in "._"):
                tail = _NUMBER_TAIL.match(text, i)
                raise QueryError("malformed number", i, tail.group() if tail else text[i:end])
            tokens.append(_Token("number", number.group(), i, number.group()))
            i = end
        elif c == '"':
            name, end = _quoted_name(text, i)
            tokens.append(_Token("name", name, i, text[i:end], quoted=True))
            i = end
        elif c == "'":
            value, end = _quoted_text(text, i)
            tokens.append(_Token("text", value, i, text[i:end]))
            i = end
        elif op := next((o for o in _COMPARISONS if text.startswith(o, i)), None):
            tokens.append(_Token("op", op, i, op))
            i += len(op)
        elif c in _PUNCTUATION:
            tokens.append(_Token("punct", c, i, c))
            i += 1
        else:
            raise QueryError("unexpected character", i, c)
    tokens.append(_Token("end", "", n, ""))
    return tokens


def _quoted_name(text: str, start: int) -> tuple[str, int]:
    """The name of the double-quoted identifier at ``start`` and the offset just past it."""
    name, end = _quoted(text, start, '"', "name")
    if not name and end == start + 2:
        raise QueryError("empty quoted name", start, '""')
    return name, end


def _codes(texts: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per text attribute, each value's code: its position in the attribute's values."""
    return {dim: {value: float(k) for k, value in enumerate(values)} for dim, values in texts.items()}


def _quoted_text(text: str, start: int) -> tuple[str, int]:
    """The value of the single-quoted text at ``start`` and the offset just past it."""
    return _quoted(text, start, "'", "text")


def _quoted(text: str, start: int, quote: str, what: str) -> tuple[str, int]:
    """The content of the ``quote``-delimited ``what`` at ``start`` (a doubled quote stands for one) and
    the offset just past it."""
    parts: list[str] = []
    i = start + 1
    while True:
        close = text.find(quote, i)
        if close < 0:
            raise QueryError(f"unterminated quoted {what}", start, text[start : start + 20])
        parts.append(text[i:close])
        if text.startswith(quote, close + 1):
            parts.append(quote)
            i = close + 2
            continue
        return "".join(parts), close + 1


# The expression tree: what was written, before NOT push-down and DNF.


@dataclass(frozen=True)
class _Constant:
    value: bool


@dataclass(frozen=True)
class _Comparison:
    """``dim`` lies in the union of ``intervals`` (one comparison: a ray, a point, two rays, points...);
    ``position`` is the offset of its ``operator`` (a comparison operator, BETWEEN or IN)."""

    dim: str
    intervals: tuple[Interval, ...]
    position: int
    operator: str


@dataclass(frozen=True)
class _Not:
    operand: _Node


@dataclass(frozen=True)
class _Junction:
    """AND (``conjunctive``) or OR of ``operands``; ``position`` is the first operator's offset."""

    conjunctive: bool
    operands: tuple[_Node, ...]
    position: int
    operator: str


_Node = _Constant | _Comparison | _Not | _Junction


class _Parser:
    """Recursive descent over the token list; each method consumes one grammar rule."""

    def __init__(self, text: str, texts: Mapping[str, Sequence[str]] | None = None):
        self.tokens = _tokenize(text)
        self.index = 0
        self.codes = _codes(texts or {})
        self.groups: tuple[str, ...] = ()
        # what a comparison compares: an attribute in WHERE, a record's column in HAVING
        self.subject: Callable[[], tuple[str, bool]] = self.attribute

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def error(self, message: str, token: _Token | None = None) -> QueryError:
        token = token or self.current
        return QueryError(message, token.position, token.source)

    def at_keyword(self, keyword: str) -> bool:
        return self.current.kind == "keyword" and self.current.text == keyword

    def at_word(self, word: str) -> bool:
        """At the unquoted name ``word`` (upper-case), written in any case: a contextual word."""
        token = self.current
        return token.kind == "name" and not token.quoted and token.text.upper() == word

    def at_call(self) -> bool:
        """At an unquoted name followed by '(': a function, where an aggregate may stand."""
        token, following = self.current, self.tokens[min(self.index + 1, len(self.tokens) - 1)]
        return token.kind == "name" and not token.quoted and following.kind == "punct" and following.text == "("

    def clause(self) -> str | None:
        """The clause the current token starts (WHERE, GROUP, WINDOW, SLIDE or HAVING), else None."""
        if self.at_keyword("WHERE"):
            return "WHERE"
        return next((word for word in _CLAUSES if self.at_word(word)), None)

    def misplaced(self, *clauses: str) -> None:
        """Raises QueryError when the current token starts one of ``clauses``, out of its place."""
        if (word := self.clause()) in clauses:
            raise self.error(
                f"{_CLAUSES.get(word, word)} cannot come here: the clauses go in the order WHERE, GROUP BY, "
                "WINDOW (with its SLIDE), HAVING"
            )

    def at_punct(self, char: str) -> bool:
        return self.current.kind == "punct" and self.current.text == char

    def expect_keyword(self, keyword: str, context: str) -> _Token:
        if not self.at_keyword(keyword):
            raise self.error(f"expected {keyword} {context}")
        return self.advance()

    def expect_punct(self, char: str, context: str) -> _Token:
        if not self.at_punct(char):
            raise self.error(f"expected {char!r} {context}")
        return self.advance()

    def expect_end(self, what: str) -> None:
        if self.current.kind != "end":
            raise self.error(f"unexpected {quoted(self.current.source)} after the end of the {what}")

    def name(self, what: str) -> str:
        token = self.current
        if token.kind == "name":
            self.advance()
            return token.text
        if token.kind == "keyword":
            raise self.error(f'expected {what}, found the keyword {token.text} (quote it as "{token.source}")')
        raise self.error(f"expected {what}")

    def number(self, after: str) -> float:
        sign_token = self.current if self.at_punct("-") or self.at_punct("+") else None
        if sign_token is not None:
            self.advance()
        token = self.current
        if token.kind != "number":
            if token.kind == "text":
                raise self.error(f"a quoted text compares only with a text attribute, after {after!r}")
            raise self.error(f"expected a number after {after!r}")
        self.advance()
        value = float(token.text)
        if math.isinf(value):
            raise self.error("number out of range", token)
        return -value if sign_token is not None and sign_token.text == "-" else value

    # query := SELECT ( '*' | item { ',' item } ) FROM name [ WHERE condition ] [ aggregation ]
    def query(
        self, text: str, texts_of: Callable[[str], Mapping[str, Sequence[str]]] | None = None
    ) -> Query | AggregateQuery:
        self.expect_keyword("SELECT", "at the start of the query")
        items = self.select_list()
        self.expect_keyword("FROM", "after the select list")
        stream = self.name("a stream name after FROM")
        if texts_of is not None:
            self.codes = _codes(texts_of(stream))
        aggregated = any(isinstance(output, Aggregate) for output, _ in items)
        for output, token in items:
            if isinstance(output, Aggregate):
                self.check_text(output, token)
        condition: _Node = _Constant(True)
        if self.at_keyword("WHERE"):
            self.advance()
            condition = self.condition()
        if aggregated:
            return self.aggregation(text, items, stream, condition)
        if (word := self.clause()) in _CLAUSES:
            raise self.error(f"{_CLAUSES[word]} needs an aggregate in the select list (such as COUNT(*))")
        self.expect_end("query")
        select = None if items[0][0] is None else tuple(name for name, _ in items)
        return Query(select, stream, Predicate(_dnf(condition, negated=False)), text)

    def select_list(self) -> list[tuple[str | Aggregate | None, _Token]]:
        """The select items, each with its first token: an attribute's name, an :class:`Aggregate`, or None
        for '*'.  Raises QueryError on an item selected twice or '*' beside another item."""
        items: list[tuple[str | Aggregate | None, _Token]] = []
        while not items or self.at_punct(","):
            if items:
                self.advance()
            token = self.current
            output = self.select_item("after ','" if items else "after SELECT")
            if items and (output is None or items[0][0] is None):
                star = token if output is None else items[0][1]
                if any(isinstance(o, Aggregate) for o, _ in [*items, (output, token)]):
                    raise self.error("SELECT * cannot be combined with aggregates: name the GROUP BY attributes", star)
                raise self.error("'*' cannot be combined with other select items", star)
            if any(output == o for o, _ in items):
                what = f"attribute {output!r}" if isinstance(output, str) else output.to_text()
                raise self.error(f"{what} is selected twice", token)
            items.append((output, token))
        return items

    def select_item(self, after: str) -> str | Aggregate | None:
        if self.at_punct("*"):
            self.advance()
            return None
        if self.at_call():
            return self.aggregate()
        return self.name(f"an attribute name {after}")

    # aggregate := function '(' ( '*' | name ) ')'
    def aggregate(self) -> Aggregate:
        """The aggregate at a name followed by '('.  Raises QueryError on an unknown function or '*' in
        another function than COUNT."""
        token = self.advance()
        function = token.text.upper()
        if function not in FUNCTIONS:
            raise self.error(f"unknown aggregate function {token.source} (known: {', '.join(FUNCTIONS)})", token)
        self.advance()  # '('
        attribute = None
        if self.at_punct("*"):
            if function != "COUNT":
                raise self.error(f"{function}(*) is not an aggregate: only COUNT takes '*'")
            self.advance()
        else:
            attribute = self.name(f"an attribute name{' or *' if function == 'COUNT' else ''} in {function}(...)")
        self.expect_punct(")", f"to close {function}(")
        return Aggregate(function, attribute)

    def check_text(self, aggregate: Aggregate, token: _Token) -> None:
        """Raises QueryError when ``aggregate`` (written at ``token``) computes on a text attribute's codes:
        only COUNT applies to one."""
        if aggregate.attribute in self.codes and aggregate.function != "COUNT":
            raise self.error(
                f"text attribute {aggregate.attribute!r} can only be counted, not {aggregate.function}", token
            )

    def check_column(self, aggregate: Aggregate, token: _Token) -> None:
        """Raises QueryError when a GROUP BY attribute bears the name of ``aggregate``'s column: a record
        would hold two columns of that name."""
        if (column := AggregateQuery.column(aggregate)) in self.groups:
            raise self.error(f"the GROUP BY attribute {column!r} is named like the aggregate {column}", token)

    # aggregation := [ GROUP BY name { ',' name } ] window [ HAVING condition ]
    def aggregation(
        self, text: str, items: list[tuple[str | Aggregate | None, _Token]], stream: str, condition: _Node
    ) -> AggregateQuery:
        """The rest of an aggregate query, whose select ``items`` hold an aggregate.  Raises QueryError on a
        missing WINDOW, a select item neither an aggregate nor grouped, a group attribute named twice, a
        HAVING naming an attribute not grouped, or a clause out of its place."""
        groups: list[str] = []
        if self.at_word("GROUP"):
            self.advance()
            if not self.at_word("BY"):
                raise self.error("expected BY after GROUP")
            self.advance()
            while not groups or self.at_punct(","):
                after = "after ','" if groups else "after GROUP BY"
                if groups:
                    self.advance()
                token = self.current
                group = self.name(f"an attribute name {after}")
                if group in groups:
                    raise self.error(f"attribute {group!r} is grouped twice", token)
                groups.append(group)
        self.groups = tuple(groups)
        for output, token in items:
            if isinstance(output, Aggregate):
                self.check_column(output, token)
            elif output not in groups:
                raise self.error(
                    f"{output!r} is selected but not grouped: besides aggregates, the select list names only "
                    "GROUP BY attributes",
                    token,
                )
        if not self.at_word("WINDOW"):
            self.misplaced("WHERE", "GROUP")
            raise self.error("an aggregate query needs a WINDOW (WINDOW <n> s or WINDOW <n> TUPLES)")
        window = self.window()
        having: _Node = _Constant(True)
        if self.at_word("HAVING"):
            self.advance()
            self.subject = self.column
            having = self.condition()
        self.misplaced(*_CLAUSES)
        self.expect_end("query")
        return AggregateQuery(
            tuple(output for output, _ in items),
            stream,
            Predicate(_dnf(condition, negated=False)),
            self.groups,
            window,
            Predicate(_dnf(having, negated=False)),
            text,
        )

    # window := WINDOW length unit [ SLIDE length unit ]
    def window(self) -> Window:
        self.advance()  # WINDOW
        size, tuples = self.length("WINDOW", None)
        slide = size
        if self.at_word("SLIDE"):
            self.advance()
            slide, _ = self.length("SLIDE", tuples)
        return Window(size, slide, tuples)

    def length(self, clause: str, tuples: bool | None) -> tuple[Fraction, bool]:
        """The length after WINDOW or SLIDE (``tuples``: whether its WINDOW counts tuples), exact in
        seconds or tuples, and whether it counts tuples.  Raises QueryError on a missing number or unit, a
        SLIDE of the other kind than its WINDOW, a length not positive, out of float64's range, or not
        whole for a count."""
        start = self.current
        sign = self.advance().text if self.at_punct("-") or self.at_punct("+") else ""
        number = self.current
        if number.kind != "number":
            raise self.error(f"expected a number after {clause}")
        self.advance()
        unit = self.current
        word = unit.text.upper() if unit.kind == "name" and not unit.quoted else ""
        if word not in TIME_UNITS and word not in COUNT_UNITS:
            raise self.error(f"expected a unit after the number of {clause}: s, ms, min or TUPLES")
        counts = word in COUNT_UNITS
        if tuples is not None and counts != tuples:
            raise self.error(f"SLIDE must be in {'TUPLES' if tuples else 'seconds'}, as its WINDOW is")
        self.advance()

        def wrong(message: str) -> QueryError:
            return QueryError(message, start.position, sign + number.source)

        value = _exact(number.text)
        if value is None:
            raise wrong("number out of range")
        if value == 0 or sign == "-":
            raise wrong(f"{clause} must be positive")
        if counts and value.denominator != 1:
            raise wrong(f"{clause} must be a whole number of TUPLES")
        return (value if counts else value * TIME_UNITS[word]), counts

    # condition := conjunct { OR conjunct }
    def condition(self) -> _Node:
        return self.junction("OR", self.conjunct)

    # conjunct := negation { AND negation }
    def conjunct(self) -> _Node:
        return self.junction("AND", self.negation)

    def junction(self, keyword: str, operand) -> _Node:
        first = operand()
        if not self.at_keyword(keyword):
            return first
        position = self.current.position
        operands = [first]
        while self.at_keyword(keyword):
            self.advance()
            operands.append(operand())
        return _Junction(keyword == "AND", tuple(operands), position, keyword)

    # negation := NOT negation | '(' condition ')' | TRUE | FALSE | comparison
    def negation(self) -> _Node:
        token = self.current
        if self.at_keyword("NOT"):
            self.advance()
            return _Not(self.negation())
        if self.at_punct("("):
            self.advance()
            inner = self.condition()
            if not self.at_punct(")"):
                raise self.error(f"expected ')' to close the '(' opened at offset {token.position}")
            self.advance()
            return inner
        if self.at_keyword("TRUE") or self.at_keyword("FALSE"):
            self.advance()
            return _Constant(token.text == "TRUE")
        if token.kind not in ("name", "keyword"):
            raise self.error("expected a condition (an attribute name, NOT, '(', TRUE or FALSE)")
        return self.comparison()

    def text_code(self, dim: str, after: str) -> float | None:
        """The code of the quoted text at the current token among ``dim``'s values (None: not one of them)."""
        token = self.current
        if token.kind != "text":
            raise self.error(f"{dim!r} holds text: compare it with a quoted value such as 'abc', after {after!r}")
        self.advance()
        return self.codes[dim].get(token.text)

    def text_comparison(self, dim: str) -> _Node:
        """A comparison of the text attribute ``dim``: ``=``, ``!=``/``<>`` or ``[NOT] IN`` quoted texts."""
        token = self.current
        if token.kind == "op":
            if token.text not in ("=", "!=", "<>"):
                raise self.error(f"text attribute {dim!r} compares only with =, != and IN")
            self.advance()
            code = self.text_code(dim, token.text)
            points = () if code is None else (Interval.point(code),)
            node = _Comparison(dim, points, token.position, token.text)
            return node if token.text == "=" else _Not(node)
        negated = self.at_keyword("NOT")
        if negated:
            self.advance()
        keyword = self.current
        if not self.at_keyword("IN"):
            raise self.error(f"text attribute {dim!r} compares only with =, != and IN")
        self.advance()
        self.expect_punct("(", "after IN")
        if self.at_punct(")"):
            raise self.error("the IN list is empty")
        codes = [self.text_code(dim, "(")]
        while self.at_punct(","):
            self.advance()
            codes.append(self.text_code(dim, ","))
        self.expect_punct(")", "to close the IN list")
        unique = dict.fromkeys(c for c in codes if c is not None)
        node = _Comparison(dim, tuple(Interval.point(c) for c in unique), keyword.position, keyword.text)
        return _Not(node) if negated else node

    def attribute(self) -> tuple[str, bool]:
        """WHERE's subject: an attribute's name, and whether it holds text."""
        if self.at_call() and self.current.text.upper() in FUNCTIONS:
            raise self.error("an aggregate cannot stand in WHERE: HAVING compares aggregates")
        dim = self.name("an attribute name")
        return dim, dim in self.codes

    def column(self) -> tuple[str, bool]:
        """HAVING's subject: an aggregate or a GROUP BY attribute, as the name of its column in a record
        (:meth:`AggregateQuery.column`), and whether it holds text."""
        token = self.current
        if self.at_call():
            aggregate = self.aggregate()
            self.check_text(aggregate, token)
            self.check_column(aggregate, token)
            return AggregateQuery.column(aggregate), False
        group = self.name("an aggregate or a GROUP BY attribute")
        if group not in self.groups:
            raise self.error(
                f"HAVING compares aggregates and GROUP BY attributes, and {group!r} is not grouped (an aggregate "
                f"of it, such as {Aggregate('MAX', group).to_text()}, may be compared)",
                token,
            )
        return group, group in self.codes

    def comparison(self) -> _Node:
        dim, text = self.subject()
        if text:
            return self.text_comparison(dim)
        token = self.current
        if token.kind == "op":
            self.advance()
            return _Comparison(
                dim, _comparison_intervals(token.text, self.number(token.text)), token.position, token.text
            )
        negated = self.at_keyword("NOT")
        if negated:
            self.advance()
        keyword = self.current
        if self.at_keyword("BETWEEN"):
            self.advance()
            lo = self.number("BETWEEN")
            self.expect_keyword("AND", "between the bounds of BETWEEN")
            hi = self.number("AND")
            node: _Node = _Comparison(dim, (interval(lo, hi, True, True),), keyword.position, keyword.text)
        elif self.at_keyword("IN"):
            self.advance()
            self.expect_punct("(", "after IN")
            if self.at_punct(")"):
                raise self.error("the IN list is empty")
            values = [self.number("(")]
            while self.at_punct(","):
                self.advance()
                values.append(self.number(","))
            self.expect_punct(")", "to close the IN list")
            unique = dict.fromkeys(values)  # duplicates add nothing; first occurrence keeps the order
            node = _Comparison(dim, tuple(Interval.point(v) for v in unique), keyword.position, keyword.text)
        elif negated:
            raise self.error("expected BETWEEN or IN after NOT")
        else:
            raise self.error(f"expected a comparison operator, BETWEEN or IN after {dim!r}")
        return _Not(node) if negated else node


_CLAUSES = {word: "GROUP BY" if word == "GROUP" else word for word in CLAUSE_WORDS if word != "BY"}
"""The clauses of an aggregate query after WHERE, by their first word, each as messages name it."""


def _exact(number: str) -> Fraction | None:
    """The exact value of the unsigned ``number`` as written, or None when a float64 could not hold it
    (too large, or too small yet not zero): that bound spares a written exponent of thousands of digits."""
    approximate = float(number)
    mantissa = number.lower().partition("e")[0]
    if math.isinf(approximate) or (approximate == 0 and mantissa.strip("0.")):
        return None
    return Fraction(number)


def _comparison_intervals(op: str, value: float) -> tuple[Interval, ...]:
    if op == "=":
        return (Interval.point(value),)
    if op in ("!=", "<>"):
        return (Interval.below(value), Interval.above(value))
    if op == "<":
        return (Interval.below(value),)
    if op == "<=":
        return (Interval.below(value, inclusive=True),)
    if op == ">":
        return (Interval.above(value),)
    return (Interval.above(value, inclusive=True),)


def _complement(iv: Interval) -> tuple[Interval, ...]:
    """The values outside ``iv``: at most two rays (everything when ``iv`` is empty)."""
    if iv.is_empty():
        return (UNBOUNDED,)
    left, right = UNBOUNDED.minus(iv)
    return tuple(piece for piece in (left, right) if piece is not None)


def _dnf(node: _Node, negated: bool) -> list[Box]:
    """The boxes of ``node`` (of ``NOT node`` when ``negated``) in DNF, left-to-right order.

    An AND is the left-major product of its operands' boxes, empty intersections dropped (see
    :func:`_conjoin`).  Raises QueryError when the DNF of the condition or of any part of it (an IN list
    included) exceeds :data:`MAX_BOXES` boxes, or an AND needs more than :data:`MAX_PAIRS` box pairs.
    """
    if isinstance(node, _Constant):
        return [Box()] if node.value != negated else []
    if isinstance(node, _Not):
        return _dnf(node.operand, not negated)
    if isinstance(node, _Comparison):
        if not negated:
            result = [box for iv in node.intervals if not (box := Box({node.dim: iv})).is_empty()]
            _check_size(len(result), node)
            return result
        # NOT (x in I1 or ... or Ik) = (x not in I1) and ... and (x not in Ik)
        result, dim = [Box()], None
        for iv in node.intervals:
            result, dim = _conjoin(result, dim, [Box({node.dim: piece}) for piece in _complement(iv)])
            _check_size(len(result), node)
        return result
    conjunctive = node.conjunctive != negated  # De Morgan: NOT flips AND and OR
    parts = (_dnf(operand, negated) for operand in node.operands)
    if not conjunctive:
        result = [box for part in parts for box in part]
        _check_size(len(result), node)
        return result
    result, dim = [Box()], None
    for part in parts:
        if len(result) * len(part) > MAX_PAIRS:
            raise QueryError(
                f"condition too complex: its DNF needs over {MAX_PAIRS:,} box pairs", node.position, node.operator
            )
        result, dim = _conjoin(result, dim, part)
        _check_size(len(result), node)
    return result


def _check_size(count: int, node: _Junction | _Comparison) -> None:
    if count > MAX_BOXES:
        raise QueryError(f"condition too complex: its DNF has over {MAX_BOXES:,} boxes", node.position, node.operator)


def _conjoin(left: list[Box], left_dim: str | None, right: list[Box]) -> tuple[list[Box], str | None]:
    """``left AND right``: ``l.intersect(r)`` for each ``l`` of ``left`` and, within it, each ``r`` of
    ``right``, empty boxes dropped; and the dimension the result is sorted on (see :func:`_sorted_on`), or None.

    ``left_dim`` is the dimension ``left`` is sorted on, or None.  Carrying it from one AND operand to the
    next spares a long AND (``a != 1 AND a != 2 AND ...``) a pass over every box at every step: when
    ``right`` constrains nothing but that dimension, :func:`_merge_sorted` gives the same boxes in the same
    order by bisection.  Either way ``left`` may be changed in place; the boxes of both are non-empty.
    """
    dim = _only_dim(right)
    if dim is not None and dim == left_dim and _sorted_on(right, dim):
        return _merge_sorted(left, right, dim), dim
    joined = [both for one in left for other in right if not (both := one.intersect(other)).is_empty()]
    return joined, (dim if dim is not None and _sorted_on(joined, dim) else None)


def _only_dim(boxes: list[Box]) -> str | None:
    """The one dimension every box constrains, when they constrain that one alone."""
    dims = {box.dims for box in boxes}
    if len(dims) != 1:
        return None
    (only,) = dims
    return only[0] if len(only) == 1 else None


def _sorted_on(boxes: list[Box], dim: str) -> bool:
    """Every box constrains ``dim``, all agree on every other dimension, and along ``dim`` each box lies
    wholly before the next (so the boxes are disjoint)."""
    rest = None
    upper = (-INF, -1)
    for box in boxes:
        iv = box.get(dim)
        if iv.is_unbounded() or _lower_end(iv) <= upper:
            return False
        others = tuple(item for item in box.items() if item[0] != dim)
        if rest is None:
            rest = others
        elif others != rest:
            return False
        upper = _upper_end(iv)
    return True


def _lower_end(iv: Interval) -> tuple[float, int]:
    """Where ``iv`` starts: an open end lies just above its bound.  Interval ``x`` lies wholly before
    interval ``y`` exactly when ``_upper_end(x) < _lower_end(y)``."""
    return iv.lo, 0 if iv.lo_closed else 1


def _upper_end(iv: Interval) -> tuple[float, int]:
    """Where ``iv`` ends: an open end lies just below its bound."""
    return iv.hi, 0 if iv.hi_closed else -1


def _merge_sorted(left: list[Box], right: list[Box], dim: str) -> list[Box]:
    """``left AND right`` in :func:`_conjoin`'s order when both are sorted on ``dim`` and ``right``
    constrains nothing else; ``left`` is changed in place and returned.

    Sorted and disjoint along ``dim``, the pairs that meet form a chain: if ``left[i]`` meets ``right[j]``
    and ``left[k]`` meets ``right[m]`` with ``i < k``, then ``j <= m`` (a point of the first pair lies
    before one of the second).  So the left-major product is these pairs in order along ``dim``.  Each
    ``right`` box meets a run of ``left`` found by bisection.  A box inside the right box it meets is its
    own intersection with it (equal, not merely equivalent), which holds for every box strictly inside a
    run, so only the run's two ends are looked at; the boxes outside every run are dropped.  Consecutive
    runs share at most one box, the one spanning the gap between two right boxes.  The result is written
    by at most ``2 len(right) + 1`` slice replacements, each moving at most ``len(left)`` references.
    """
    if not left:
        return left
    at = left[0].dims.index(dim)  # the same in every box: they differ in no other dimension

    # _lower_end and _upper_end inlined: bisection calls these about 2 log2(len(left)) times per right box
    def lower(box: Box) -> tuple[float, int]:
        iv = box.items()[at][1]
        return iv.lo, 0 if iv.lo_closed else 1

    def upper(box: Box) -> tuple[float, int]:
        iv = box.items()[at][1]
        return iv.hi, 0 if iv.hi_closed else -1

    runs: list[tuple[int, int]] = []
    pieces: dict[int, list[Box]] = {}  # the boxes that change, by index: their intersections in order
    start = 0
    for other in right:
        iv = other.get(dim)
        start = bisect_left(left, _lower_end(iv), start, key=upper)  # the first box not wholly before iv
        stop = bisect_right(left, _upper_end(iv), start, key=lower)  # the first box wholly after iv
        if start == stop:
            continue
        runs.append((start, stop))
        for edge in (start, stop - 1) if stop - 1 > start else (start,):
            if not iv.covers(left[edge].items()[at][1]):
                pieces.setdefault(edge, []).append(left[edge].intersect(other))
    edits = [(index, index + 1, boxes) for index, boxes in pieces.items()]  # left[first:stop] = boxes
    done = 0
    for start, stop in runs:
        if done < start:
            edits.append((done, start, []))
        done = max(done, stop)
    if done < len(left):
        edits.append((done, len(left), []))
    edits.sort(key=lambda edit: edit[0])
    for first, stop, boxes in reversed(edits):  # from the back, so the indices ahead stay valid
        left[first:stop] = boxes
    return left


def parse_condition(text: str, texts: Mapping[str, Sequence[str]] | None = None) -> Predicate:
    """The condition ``text`` (a WHERE clause without the keyword) as a DNF predicate; ``texts``: the text
    attributes' values (above).

    Raises QueryError (with the 0-based position and the offending token) on a syntax error or a DNF
    larger than :data:`MAX_BOXES`.
    """
    try:
        parser = _Parser(text, texts)
        node = parser.condition()
        parser.expect_end("condition")
        return Predicate(_dnf(node, negated=False))
    except RecursionError:
        raise _too_deep(text) from None


def parse_query(
    text: str, texts_of: Callable[[str], Mapping[str, Sequence[str]]] | None = None
) -> Query | AggregateQuery:
    """``SELECT <attrs | *> FROM <stream> [WHERE <condition>]`` as a :class:`Query`, or, when the select
    list holds an aggregate, ``SELECT [group attrs,] AGG(x) [, ...] FROM <stream> [WHERE <condition>]
    [GROUP BY attr, ...] WINDOW <n> s | TUPLES [SLIDE <m> s | TUPLES] [HAVING <condition>]`` as an
    :class:`~matcher.aggregate.AggregateQuery` (``text`` kept either way); ``texts_of(stream)``: that
    stream's text attributes' values (above).

    Raises QueryError (with the 0-based position and the offending token) on a syntax error, an output
    or group attribute named twice, a DNF larger than :data:`MAX_BOXES`; and for aggregates on an
    aggregate without WINDOW or WINDOW (GROUP BY, HAVING) without aggregate, ``*`` beside an aggregate,
    a select item neither aggregated nor grouped, an unknown function, ``*`` in another function than
    COUNT, a function other than COUNT of a text attribute, HAVING naming an attribute not grouped, a
    window's length not positive or a count's not whole, a SLIDE of the other kind than its WINDOW.
    """
    try:
        return _Parser(text).query(text, texts_of)
    except RecursionError:
        raise _too_deep(text) from None


def _too_deep(text: str) -> QueryError:
    # the parser and the DNF recurse once per parenthesis or NOT: hundreds of them nested exceed Python's
    # stack, which no query a person writes comes near
    return QueryError("condition nests too deeply (parentheses or NOT)", 0, text[:20])
