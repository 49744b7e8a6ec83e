"""The query parser: exact DNF output, NOT push-down against a direct evaluator, round trips, errors."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import INF, MAX_BOXES, Box, Interval, Predicate, Query, QueryError, interval, parse_condition, parse_query
from tests.matcher.pointwise import members as pointwise_members

GRID = np.array([-1.0, *(x / 2 for x in range(13)), 7.0])  # one point per cell of the bounds 0..6
DIMS = ("a", "b", "c")
COLUMNS = dict(zip(DIMS, (g.ravel() for g in np.meshgrid(GRID, GRID, GRID, indexing="ij")), strict=True))


def members(pred: Predicate, columns=COLUMNS):
    return pointwise_members(pred, columns)


def box(**constraints: Interval) -> Box:
    return Box(constraints)


# Exact outputs.

EXACT = [
    ("a < 5", [box(a=Interval.below(5))]),
    ("a <= 5", [box(a=Interval.below(5, inclusive=True))]),
    ("a > 5", [box(a=Interval.above(5))]),
    ("a >= 5", [box(a=Interval.above(5, inclusive=True))]),
    ("a = 5", [box(a=Interval.point(5))]),
    ("a != 5", [box(a=Interval.below(5)), box(a=Interval.above(5))]),
    ("a <> 5", [box(a=Interval.below(5)), box(a=Interval.above(5))]),
    ("NOT a < 5", [box(a=Interval.above(5, inclusive=True))]),
    ("NOT NOT a < 5", [box(a=Interval.below(5))]),
    ("NOT a = 5", [box(a=Interval.below(5)), box(a=Interval.above(5))]),
    ("NOT a != 5", [box(a=Interval.point(5))]),
    ("a BETWEEN 1 AND 5", [box(a=Interval.closed(1, 5))]),
    ("a BETWEEN 5 AND 5", [box(a=Interval.point(5))]),
    ("a BETWEEN 5 AND 1", []),
    ("NOT a BETWEEN 1 AND 5", [box(a=Interval.below(1)), box(a=Interval.above(5))]),
    ("a NOT BETWEEN 1 AND 5", [box(a=Interval.below(1)), box(a=Interval.above(5))]),
    ("NOT a BETWEEN 5 AND 1", [Box()]),
    ("a IN (3, 1, 3)", [box(a=Interval.point(3)), box(a=Interval.point(1))]),
    (
        "a NOT IN (3, 1)",
        [box(a=Interval.below(1)), box(a=interval(1, 3, False, False)), box(a=Interval.above(3))],
    ),
    ("a > 1 AND a <= 4", [box(a=interval(1, 4, False, True))]),
    ("a > 3 AND a < 2", []),
    ("a > 1 AND b = 2", [box(a=Interval.above(1), b=Interval.point(2))]),
    (
        "(a = 1 OR a = 2) AND (b = 1 OR b = 2)",  # distributed left to right
        [
            box(a=Interval.point(1), b=Interval.point(1)),
            box(a=Interval.point(1), b=Interval.point(2)),
            box(a=Interval.point(2), b=Interval.point(1)),
            box(a=Interval.point(2), b=Interval.point(2)),
        ],
    ),
    (
        "NOT (a = 1 OR b > 2)",  # De Morgan, then != splits
        [
            box(a=Interval.below(1), b=Interval.below(2, inclusive=True)),
            box(a=Interval.above(1), b=Interval.below(2, inclusive=True)),
        ],
    ),
    ("NOT (a < 1 AND b < 2)", [box(a=Interval.above(1, inclusive=True)), box(b=Interval.above(2, inclusive=True))]),
    ("TRUE", [Box()]),
    ("FALSE", []),
    ("NOT TRUE", []),
    ("FALSE OR a = 1 OR TRUE", [box(a=Interval.point(1)), Box()]),
    ("a = 1 AND FALSE", []),
    ("a = 1 AND TRUE", [box(a=Interval.point(1))]),
    ("((a = 1))", [box(a=Interval.point(1))]),
    ("a<-1.5e-3", [box(a=Interval.below(-0.0015))]),
    ("a > +2", [box(a=Interval.above(2))]),
    ("a > - .5", [box(a=Interval.above(-0.5))]),
    ("a IN (5., 1E3, 2e+1)", [box(a=Interval.point(5)), box(a=Interval.point(1000)), box(a=Interval.point(20))]),
    ('"select" = 1 AND "we""ird name" < 2', [Box({"select": Interval.point(1), 'we"ird name': Interval.below(2)})]),
]


@pytest.mark.parametrize(("text", "boxes"), EXACT, ids=[t for t, _ in EXACT])
def test_exact_dnf(text, boxes):
    assert parse_condition(text) == Predicate(boxes)
    assert parse_condition(text).boxes == tuple(boxes)  # nothing was dropped by Predicate() above


def test_keywords_are_case_insensitive_and_names_are_not():
    lower = parse_query("select a, B from s where a between 1 and 2 or not b in (1) and true")
    upper = parse_query("SELECT a, B FROM s WHERE a BETWEEN 1 AND 2 OR NOT b IN (1) AND TRUE")
    assert dataclasses.replace(lower, text="") == dataclasses.replace(upper, text="")
    assert lower.select == ("a", "B") and lower.where.dims == ("a", "b")


def test_query_fields():
    text = "SELECT ra, dec FROM photons WHERE ra BETWEEN 120 AND 140 AND (dec > 10 OR energy >= 1.5)"
    query = parse_query(text)
    assert query.select == ("ra", "dec") and query.stream == "photons" and query.text == text
    assert query.where == Predicate(
        [
            Box({"ra": Interval.closed(120, 140), "dec": Interval.above(10)}),
            Box({"ra": Interval.closed(120, 140), "energy": Interval.above(1.5, inclusive=True)}),
        ]
    )
    star = parse_query("SELECT * FROM photons")
    assert star.select is None and star.where == Predicate.TRUE
    assert star.attributes(("ra", "dec")) == ("ra", "dec")
    assert query.attributes(("dec", "energy", "ra")) == ("dec", "ra")
    assert query.referenced() == ("dec", "energy", "ra")
    assert parse_query("SELECT a FROM s WHERE a > 1 AND a < 0").where == Predicate.FALSE


def test_seed_004_example_p2_implies_p1_but_not_conversely():
    p1 = parse_condition(
        "(a >= 3 AND a <= 12 AND b >= 0 AND b <= 5) OR (a >= 9 AND a <= 14 AND b >= 2 AND b <= 8)"
        " OR (a >= 0 AND a <= 5 AND b >= 1 AND b <= 6)"
    )
    p2 = parse_condition("(a >= 1) AND (a <= 8) AND (b >= 2) AND (b <= 4)")
    assert p1.boxes == (
        Box({"a": Interval.closed(3, 12), "b": Interval.closed(0, 5)}),
        Box({"a": Interval.closed(9, 14), "b": Interval.closed(2, 8)}),
        Box({"a": Interval.closed(0, 5), "b": Interval.closed(1, 6)}),
    )
    assert p2.boxes == (Box({"a": Interval.closed(1, 8), "b": Interval.closed(2, 4)}),)
    assert p2.implies(p1)
    assert not p1.implies(p2)
    assert not any(b.contains(p2.boxes[0]) for b in p1.boxes)  # why the quick check alone misses it


# NOT push-down and DNF against a direct evaluation of the expression tree.

VALUES = st.sampled_from([0, 1, 2, 2.5, 3, 4, 5, 6])


def comparisons():
    op = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])
    return st.one_of(
        st.tuples(st.just("cmp"), st.sampled_from(DIMS), op, VALUES),
        st.tuples(st.just("between"), st.sampled_from(DIMS), st.booleans(), VALUES, VALUES),
        st.tuples(st.just("in"), st.sampled_from(DIMS), st.booleans(), st.lists(VALUES, min_size=1, max_size=3)),
        st.tuples(st.just("const"), st.booleans()),
    )


trees = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        st.tuples(st.just("not"), inner),
        st.tuples(st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=10,
)


def render(tree, case) -> str:
    """The tree as query text; ``case`` picks each keyword's spelling."""

    def kw(word):
        return case(word)

    kind = tree[0]
    if kind == "cmp":
        _, dim, op, value = tree
        return f"{dim} {op} {value}"
    if kind == "between":
        _, dim, negated, lo, hi = tree
        return f"{dim} {kw('NOT') + ' ' if negated else ''}{kw('BETWEEN')} {lo} {kw('AND')} {hi}"
    if kind == "in":
        _, dim, negated, values = tree
        return f"{dim} {kw('NOT') + ' ' if negated else ''}{kw('IN')} ({', '.join(map(str, values))})"
    if kind == "const":
        return kw("TRUE" if tree[1] else "FALSE")
    if kind == "not":
        return f"{kw('NOT')} ({render(tree[1], case)})"
    return f" {kw(kind.upper())} ".join(f"({render(t, case)})" for t in tree[1])


def evaluate(tree, columns):
    """Reference semantics of the written expression, evaluated directly on numpy columns."""
    kind = tree[0]
    if kind == "cmp":
        _, dim, op, value = tree
        x = columns[dim]
        return {
            "=": x == value,
            "!=": x != value,
            "<>": x != value,
            "<": x < value,
            "<=": x <= value,
            ">": x > value,
            ">=": x >= value,
        }[op]
    if kind == "between":
        _, dim, negated, lo, hi = tree
        inside = (columns[dim] >= lo) & (columns[dim] <= hi)
        return ~inside if negated else inside
    if kind == "in":
        _, dim, negated, values = tree
        inside = np.isin(columns[dim], values)
        return ~inside if negated else inside
    if kind == "const":
        return np.full(len(columns["a"]), tree[1])
    if kind == "not":
        return ~evaluate(tree[1], columns)
    parts = [evaluate(t, columns) for t in tree[1]]
    return np.logical_and.reduce(parts) if kind == "and" else np.logical_or.reduce(parts)


@settings(max_examples=300)
@given(trees, st.sampled_from([str.upper, str.lower, str.title]))
def test_dnf_agrees_with_direct_evaluation(tree, case):
    pred = parse_condition(render(tree, case))
    np.testing.assert_array_equal(members(pred), evaluate(tree, COLUMNS))
    assert all(not b.is_empty() for b in pred.boxes)


def test_dnf_size_is_limited():
    clauses = " AND ".join(f"(x{i} = 0 OR x{i} = 1)" for i in range(14))  # 2**14 boxes
    with pytest.raises(QueryError, match="too complex") as err:
        parse_condition(clauses)
    assert err.value.token == "AND" and err.value.position == clauses.index(" AND ") + 1
    fits = " AND ".join(f"(x{i} = 0 OR x{i} = 1)" for i in range(13))  # 8192 boxes
    assert len(parse_condition(fits).boxes) == 2**13 <= MAX_BOXES


def test_contradictions_do_not_count_against_the_limit():
    many = ", ".join(str(i) for i in range(200))
    pred = parse_condition(f"a IN ({many}) AND a IN ({many})")  # 40,000 pairs, 200 non-empty
    assert len(pred.boxes) == 200


# Round trips.

NAMES = st.sampled_from(["a", "b_2", "_x", "Ra", "select", "And", "in", "x y", 'q"uote', "Ünï", "1st", "a-b"])
NUMBERS = st.one_of(
    st.integers(-6, 6).map(float),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, -0.0, 1e16, 1e-300, 5e-324, 1.7976931348623157e308, 123456789012345678.0]),
)


@st.composite
def intervals(draw):
    lo, hi = sorted([draw(st.one_of(NUMBERS, st.just(-INF))), draw(st.one_of(NUMBERS, st.just(INF)))])
    return interval(lo, hi, draw(st.booleans()), draw(st.booleans()))


boxes = st.lists(st.tuples(NAMES, intervals()), max_size=4).map(Box)
predicates = st.lists(boxes, max_size=5).map(Predicate)


@settings(max_examples=300)
@given(predicates)
def test_condition_round_trip(pred):
    assert parse_condition(pred.to_text()) == pred


@given(st.one_of(st.none(), st.lists(NAMES, min_size=1, max_size=4, unique=True).map(tuple)), NAMES, predicates)
def test_query_round_trip(select, stream, where):
    query = Query(select, stream, where)
    text = query.to_text()
    assert parse_query(text) == dataclasses.replace(query, text=text)


def test_canonical_texts():
    assert Predicate.TRUE.to_text() == "TRUE" and Predicate.FALSE.to_text() == "FALSE"
    assert parse_condition("a >= 1 AND a < 2 OR b BETWEEN 0 AND 0.5").to_text() == (
        "(a >= 1 AND a < 2) OR (b BETWEEN 0 AND 0.5)"
    )
    assert Query(None, "s", Predicate.TRUE).to_text() == "SELECT * FROM s"
    assert Query(("from",), "my stream", Predicate.FALSE).to_text() == 'SELECT "from" FROM "my stream" WHERE FALSE'


# Errors: one line, 0-based position and offending token.

ERRORS = [
    ("a > abc", "expected a number after '>'", 4, "abc"),
    ("a >", "expected a number after '>'", 3, ""),
    ("a # 3", "unexpected character", 2, "#"),
    ("a < 5 )", "unexpected ')' after the end of the condition", 6, ")"),
    ("a IN ()", "the IN list is empty", 6, ")"),
    ("a IN 1, 2", "expected '(' after IN", 5, "1"),
    ("a IN (1, 2", "expected ')' to close the IN list", 10, ""),
    ("a BETWEEN 1 5", "expected AND between the bounds of BETWEEN", 12, "5"),
    ("a BETWEEN 1 AND", "expected a number after 'AND'", 15, ""),
    ("(a < 3", "expected ')' to close the '(' opened at offset 0", 6, ""),
    ("a < 1e", "malformed number", 4, "1e"),
    ("a < 1.2.3", "malformed number", 4, "1.2.3"),
    ("a < 1e999", "number out of range", 4, "1e999"),
    ("from = 3", "found the keyword FROM", 0, "from"),
    ("", "expected a condition", 0, ""),
    ("NOT", "expected a condition", 3, ""),
    ("a AND b", "expected a comparison operator, BETWEEN or IN after 'a'", 2, "AND"),
    ("a NOT = 1", "expected BETWEEN or IN after NOT", 6, "="),
    ("a < 1 OR", "expected a condition", 8, ""),
    ('"ab = 1', "unterminated quoted name", 0, '"ab = 1'),
    ('"" = 1', "empty quoted name", 0, '""'),
    ("5 < a", "expected a condition", 0, "5"),
]


@pytest.mark.parametrize(("text", "message", "position", "token"), ERRORS, ids=[e[0] for e in ERRORS])
def test_condition_errors_name_position_and_token(text, message, position, token):
    with pytest.raises(QueryError) as err:
        parse_condition(text)
    assert message in str(err.value)
    assert (err.value.position, err.value.token) == (position, token)
    assert f"at position {position}" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


QUERY_ERRORS = [
    ("SELECT a s", "expected FROM after the select list", 9, "s"),
    ("a FROM s", "expected SELECT at the start of the query", 0, "a"),
    ("SELECT FROM s", "expected an attribute name after SELECT, found the keyword FROM", 7, "FROM"),
    ("SELECT a, FROM s", "expected an attribute name after ','", 10, "FROM"),
    ("SELECT a, a FROM s", "attribute 'a' is selected twice", 10, "a"),
    ("SELECT a FROM", "expected a stream name after FROM", 13, ""),
    ("SELECT a FROM s WHERE", "expected a condition", 21, ""),
    ("SELECT a FROM s WHERE a < 1 b", "unexpected 'b' after the end of the query", 28, "b"),
    ("SELECT a FROM s t", "unexpected 't' after the end of the query", 16, "t"),
    ("SELECT * FROM s WHERE a > abc", "expected a number after '>'", 26, "abc"),
]


@pytest.mark.parametrize(("text", "message", "position", "token"), QUERY_ERRORS, ids=[e[0] for e in QUERY_ERRORS])
def test_query_errors_name_position_and_token(text, message, position, token):
    with pytest.raises(QueryError) as err:
        parse_query(text)
    assert message in str(err.value)
    assert (err.value.position, err.value.token) == (position, token)


def test_error_text_format():
    with pytest.raises(QueryError) as err:
        parse_query("SELECT a FROM s WHERE dec > abc")
    assert str(err.value) == "expected a number after '>' at position 28 (near 'abc')"
    with pytest.raises(QueryError) as err:
        parse_condition("a <")
    assert str(err.value) == "expected a number after '<' at position 3 (at the end of the input)"


@pytest.mark.parametrize(
    "text", ["SELECT x FROM s WHERE x > 1 " + "y" * 100_000, "SELECT x FROM s WHERE x > " + "9" * 100_000]
)
def test_a_megabyte_token_is_quoted_cut(text):
    with pytest.raises(QueryError) as caught:
        parse_query(text)
    assert len(str(caught.value)) < 200 and "..." in str(caught.value)
    assert len(caught.value.token) == 100_000  # the token itself is kept whole for callers
