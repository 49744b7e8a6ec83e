"""Windowed aggregate queries (docs/QUERIES.md, "Windowed aggregates"): exact parses, the members giving the
plain input, contextual words, text attributes, errors with their positions, and round trips."""

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import (
    Aggregate,
    AggregateQuery,
    Box,
    Interval,
    Predicate,
    Query,
    QueryError,
    Window,
    parse_condition,
    parse_query,
)
from matcher.aggregate import CONTEXTUAL_WORDS, FUNCTIONS
from matcher.text import KEYWORDS, name_to_text
from tests.matcher.test_parser import intervals

TRUE = Predicate.TRUE


def where(**constraints: Interval) -> Predicate:
    return Predicate([Box(constraints)])


def having(*boxes: dict[str, Interval]) -> Predicate:
    return Predicate([Box(b) for b in boxes])


def seconds(size, slide=None) -> Window:
    return Window(Fraction(size), Fraction(size if slide is None else slide))


def tuples(size, slide=None) -> Window:
    return Window(Fraction(size), Fraction(size if slide is None else slide), tuples=True)


AVG_TEMP, MAX_WIND, COUNT_ALL = Aggregate("AVG", "temp"), Aggregate("MAX", "wind"), Aggregate("COUNT")

# Exact parses: the text, then the query it is (its text field aside).

EXACT = [
    (
        "SELECT station, AVG(temp), MAX(wind) FROM weather WHERE temp > -40 GROUP BY station"
        " WINDOW 10 s SLIDE 5 s HAVING AVG(temp) > 20",
        AggregateQuery(
            ("station", AVG_TEMP, MAX_WIND),
            "weather",
            where(temp=Interval.above(-40)),
            ("station",),
            seconds(10, 5),
            having({"AVG(temp)": Interval.above(20)}),
        ),
    ),
    ("SELECT COUNT(*) FROM s WINDOW 100 TUPLES", AggregateQuery((COUNT_ALL,), "s", TRUE, (), tuples(100))),
    (
        "SELECT MEDIAN(x), COUNT(x) FROM s WHERE x BETWEEN 0 AND 1 WINDOW 0.1 s SLIDE 1 min",  # gaps between windows
        AggregateQuery(
            (Aggregate("MEDIAN", "x"), Aggregate("COUNT", "x")),
            "s",
            where(x=Interval.closed(0, 1)),
            (),
            Window(Fraction(1, 10), Fraction(60)),
        ),
    ),
    (
        "SELECT g, SUM(v) FROM s GROUP BY g WINDOW 250 ms HAVING COUNT(*) >= 3 OR g = 2",
        AggregateQuery(
            ("g", Aggregate("SUM", "v")),
            "s",
            TRUE,
            ("g",),
            Window(Fraction(1, 4), Fraction(1, 4)),
            having({"COUNT(*)": Interval.above(3, inclusive=True)}, {"g": Interval.point(2)}),
        ),
    ),
    (
        "SELECT STDDEV(v), g2, VAR(v), g1 FROM s GROUP BY g1, g2 WINDOW 5 TUPLES SLIDE 2 TUPLE"
        " HAVING NOT (MIN(v) < 0 AND g1 != 1)",
        AggregateQuery(
            (Aggregate("STDDEV", "v"), "g2", Aggregate("VAR", "v"), "g1"),
            "s",
            TRUE,
            ("g1", "g2"),
            tuples(5, 2),
            having({"MIN(v)": Interval.above(0, inclusive=True)}, {"g1": Interval.point(1)}),
        ),
    ),
    (
        "SELECT SUM(v) FROM s WINDOW 1.5e-3 s SLIDE .5 ms",
        AggregateQuery((Aggregate("SUM", "v"),), "s", TRUE, (), Window(Fraction(3, 2000), Fraction(1, 2000))),
    ),
]


@pytest.mark.parametrize(("text", "query"), EXACT, ids=[t for t, _ in EXACT])
def test_exact_parse(text, query):
    parsed = parse_query(text)
    assert parsed == dataclasses.replace(query, text=text)
    assert parsed.text == text


def test_the_members_give_the_plain_input():
    query = parse_query("SELECT g, SUM(v) FROM s WHERE w < 5 GROUP BY g WINDOW 10 s HAVING AVG(u) > 1 AND g = 2")
    assert query.aggregates == (Aggregate("SUM", "v"), Aggregate("AVG", "u"))  # SELECT's, then HAVING's only
    assert query.selected == (Aggregate("SUM", "v"),)
    assert query.select == ("g", "v", "u")
    assert query.input == Query(("g", "v", "u"), "s", where(w=Interval.below(5)))
    assert query.attributes(("u", "v", "w", "g")) == ("u", "v", "g")
    assert query.referenced() == ("g", "u", "v", "w")
    assert query.record_values() == 2
    assert [query.column(o) for o in query.outputs] == ["g", "SUM(v)"]
    assert query.having.dims == ("AVG(u)", "g")
    star = parse_query("SELECT COUNT(*), COUNT(x) FROM s WINDOW 1 s")
    # COUNT(x) counts tuples (no attribute is ever missing): its input need not carry x, which it still names
    assert star.select == () and star.aggregates == (COUNT_ALL, Aggregate("COUNT", "x"))
    assert star.referenced() == ("x",)


def test_a_plain_query_is_still_a_query():
    for text in ("SELECT a FROM s", "SELECT * FROM s WHERE a > 1", "SELECT count, window FROM group_"):
        assert type(parse_query(text)) is Query


def test_keywords_and_contextual_words_are_case_insensitive():
    texts = [
        "SELECT g, COUNT(*), AVG(x) FROM s WHERE x > 1 GROUP BY g WINDOW 1 MIN SLIDE 30 S HAVING MAX(x) < 3",
        "select g, count(*), avg(x) from s where x > 1 group by g window 1 min slide 30 s having max(x) < 3",
        "Select g, Count(*), Avg(x) From s Where x > 1 Group By g Window 1 Min Slide 30 S Having Max(x) < 3",
    ]
    parsed = [dataclasses.replace(parse_query(t), text="") for t in texts]
    assert parsed[0] == parsed[1] == parsed[2]
    assert parsed[0].window == seconds(60, 30) and parsed[0].having.dims == ("MAX(x)",)
    counted = [parse_query(f"SELECT COUNT(*) FROM s WINDOW 4 {unit}").window for unit in ("TUPLES", "tuple", "Tuples")]
    assert counted == [tuples(4)] * 3


# Contextual words: names wherever a name stands, clause words only where a clause may start.


def test_contextual_words_name_attributes_and_streams():
    query = parse_query(
        "SELECT count, window, COUNT(*), MIN(min), SUM(s) FROM window WHERE slide > 1 AND having < 2 AND by = 3"
        " GROUP BY count, window WINDOW 1 min HAVING count = 1 AND COUNT(*) > 2 AND window < 3"
    )
    assert query.outputs == ("count", "window", COUNT_ALL, Aggregate("MIN", "min"), Aggregate("SUM", "s"))
    assert query.stream == "window" and query.groups == ("count", "window")
    assert query.where.dims == ("by", "having", "slide")
    assert query.having == having(
        {"count": Interval.point(1), "COUNT(*)": Interval.above(2), "window": Interval.below(3)}
    )
    assert query.window == seconds(60)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT group, COUNT(*) FROM tuples GROUP BY group WINDOW 2 tuples",
        'SELECT "group", COUNT(*) FROM "tuples" GROUP BY "group" WINDOW 2 tuples',
    ],
)
def test_quoted_or_not_a_name_is_a_name(text):
    query = parse_query(text)
    assert query.outputs == ("group", COUNT_ALL) and query.stream == "tuples" and query.groups == ("group",)


def test_a_quoted_word_never_starts_a_clause_or_gives_a_unit():
    with pytest.raises(QueryError, match="needs a WINDOW") as err:
        parse_query('SELECT COUNT(*) FROM s "WINDOW" 1 s')
    assert (err.value.position, err.value.token) == (23, '"WINDOW"')
    with pytest.raises(QueryError, match="expected a unit") as err:
        parse_query('SELECT COUNT(*) FROM s WINDOW 1 "s"')
    assert (err.value.position, err.value.token) == (32, '"s"')
    with pytest.raises(QueryError, match="unexpected"):
        parse_query('SELECT a FROM s "GROUP" BY a')


def test_the_contextual_words_are_not_reserved():
    words = {"GROUP", "BY", "WINDOW", "SLIDE", "HAVING", "TUPLES", "TUPLE", "S", "MS", "MIN", *FUNCTIONS}
    assert words == CONTEXTUAL_WORDS and not words & KEYWORDS
    assert name_to_text("window") == "window" and name_to_text("count") == "count"  # plain queries' text
    assert parse_condition("window > 1 AND count < 2").dims == ("count", "window")


def test_the_canonical_text_quotes_names_spelled_like_clause_words_or_functions():
    query = parse_query(
        "select count, sum(window) from window where by > 1 group by count window 1 min slide 0.5 min"
        " having count = 2 and sum(window) > 1 and count(*) < 9"
    )
    assert query.to_text() == (
        'SELECT "count", SUM("window") FROM "window" WHERE "by" > 1 GROUP BY "count" WINDOW 60 s SLIDE 30 s'
        ' HAVING COUNT(*) < 9 AND SUM("window") > 1 AND "count" = 2'
    )
    plain = parse_query("SELECT COUNT(x) FROM s WHERE ms > 1 GROUP BY tuples WINDOW 3 TUPLES")
    assert plain.to_text() == "SELECT COUNT(x) FROM s WHERE ms > 1 GROUP BY tuples WINDOW 3 TUPLES"  # units: bare


# Text attributes: group attributes compared with quoted texts as codes, aggregates only counted.

TEXTS = {"flows": {"proto": ["tcp", "udp", "dns"], "site": ["a", "b"]}}


def test_text_attributes_in_group_by_and_having():
    query = parse_query(
        "SELECT proto, COUNT(proto), AVG(bytes) FROM flows WHERE site = 'b' GROUP BY proto WINDOW 10 s"
        " HAVING proto IN ('udp', 'dns', 'ftp') AND COUNT(*) > 1 OR proto != 'tcp' AND AVG(bytes) < 2",
        TEXTS.get,
    )
    assert query.groups == ("proto",) and query.where == where(site=Interval.point(1))
    assert query.having == having(
        {"proto": Interval.point(1), "COUNT(*)": Interval.above(1)},
        {"proto": Interval.point(2), "COUNT(*)": Interval.above(1)},
        {"proto": Interval.below(0), "AVG(bytes)": Interval.below(2)},
        {"proto": Interval.above(0), "AVG(bytes)": Interval.below(2)},
    )


@pytest.mark.parametrize(
    ("text", "message", "position", "token"),
    [
        ("SELECT SUM(proto) FROM flows WINDOW 1 s", "text attribute 'proto' can only be counted, not SUM", 7, "SUM"),
        (
            "SELECT COUNT(*) FROM flows WINDOW 1 s HAVING MAX(site) > 0",
            "text attribute 'site' can only be counted, not MAX",
            45,
            "MAX",
        ),
        (
            "SELECT proto, COUNT(*) FROM flows GROUP BY proto WINDOW 1 s HAVING proto > 1",
            "text attribute 'proto' compares only with =, != and IN",
            73,
            ">",
        ),
        ("SELECT COUNT(*) FROM flows WINDOW 1 s HAVING COUNT(*) = 'tcp'", "a quoted text compares", 56, "'tcp'"),
    ],
)
def test_text_attribute_errors(text, message, position, token):
    with pytest.raises(QueryError) as err:
        parse_query(text, TEXTS.get)
    assert message in str(err.value)
    assert (err.value.position, err.value.token) == (position, token)


# Windows: exact lengths, units, slides.


@pytest.mark.parametrize(
    ("written", "window"),
    [
        ("WINDOW 0.1 s", Window(Fraction(1, 10), Fraction(1, 10))),
        ("WINDOW 1 ms", Window(Fraction(1, 1000), Fraction(1, 1000))),
        ("WINDOW 0.5 min SLIDE 100 ms", Window(Fraction(30), Fraction(1, 10))),
        ("WINDOW 3 s SLIDE 7 s", seconds(3, 7)),  # a slide beyond the length: gaps no window covers
        ("WINDOW 1e2 TUPLES SLIDE 250 TUPLES", tuples(100, 250)),
        ("WINDOW 4.0 TUPLES", tuples(4)),  # a whole number, however written
        ("WINDOW +2 s", seconds(2)),
        ("WINDOW 0.000000000000000000000000000000000001 s", seconds(Fraction(1, 10**36))),
    ],
)
def test_window_lengths_are_exact(written, window):
    query = parse_query(f"SELECT COUNT(*) FROM s {written}")
    assert query.window == window
    assert parse_query(query.to_text()).window == window


def test_window_text():
    assert seconds(Fraction(1, 10)).to_text() == "WINDOW 0.1 s"
    assert seconds(Fraction(3, 8), Fraction(60)).to_text() == "WINDOW 0.375 s SLIDE 60 s"
    assert tuples(10, 3).to_text() == "WINDOW 10 TUPLES SLIDE 3 TUPLES"
    with pytest.raises(ValueError, match="no exact decimal"):
        seconds(Fraction(1, 3)).to_text()
    with pytest.raises(ValueError, match="positive"):
        Window(Fraction(0), Fraction(1))
    with pytest.raises(ValueError, match="whole"):
        Window(Fraction(3, 2), Fraction(1), tuples=True)


# Errors: one line, 0-based position and offending token.

ERRORS = [
    # aggregates without a WINDOW, a WINDOW (GROUP BY, HAVING) without aggregates
    ("SELECT COUNT(*) FROM s", "an aggregate query needs a WINDOW", 22, ""),
    ("SELECT COUNT(*) FROM s GROUP BY a HAVING COUNT(*) > 1", "an aggregate query needs a WINDOW", 34, "HAVING"),
    ("SELECT COUNT(*) FROM s SLIDE 1 s", "an aggregate query needs a WINDOW", 23, "SLIDE"),
    ("SELECT a FROM s WINDOW 10 s", "WINDOW needs an aggregate in the select list", 16, "WINDOW"),
    ("SELECT * FROM s WHERE a > 1 window 10 s", "WINDOW needs an aggregate in the select list", 28, "window"),
    ("SELECT a FROM s GROUP BY a WINDOW 1 s", "GROUP BY needs an aggregate in the select list", 16, "GROUP"),
    ("SELECT a FROM s HAVING a > 1", "HAVING needs an aggregate in the select list", 16, "HAVING"),
    # the select list
    ("SELECT *, COUNT(*) FROM s WINDOW 10 s", "SELECT * cannot be combined with aggregates", 7, "*"),
    ("SELECT COUNT(*), * FROM s WINDOW 10 s", "SELECT * cannot be combined with aggregates", 17, "*"),
    ("SELECT a, * FROM s", "'*' cannot be combined with other select items", 10, "*"),
    ("SELECT a, COUNT(*) FROM s WINDOW 10 s", "'a' is selected but not grouped", 7, "a"),
    ("SELECT COUNT(*), b FROM s GROUP BY a WINDOW 10 s", "'b' is selected but not grouped", 17, "b"),
    ("SELECT FOO(x) FROM s WINDOW 10 s", "unknown aggregate function FOO (known: COUNT, SUM, AVG,", 7, "FOO"),
    ("SELECT SUM(*) FROM s WINDOW 10 s", "SUM(*) is not an aggregate: only COUNT takes '*'", 11, "*"),
    ("SELECT SUM(x), sum(x) FROM s WINDOW 1 s", "SUM(x) is selected twice", 15, "sum"),
    ("SELECT a, COUNT(*), a FROM s GROUP BY a WINDOW 1 s", "attribute 'a' is selected twice", 20, "a"),
    ("SELECT COUNT() FROM s WINDOW 1 s", "expected an attribute name or * in COUNT(...)", 13, ")"),
    ("SELECT AVG(x FROM s WINDOW 1 s", "expected ')' to close AVG(", 13, "FROM"),
    ('SELECT "COUNT"(x) FROM s WINDOW 1 s', "expected FROM after the select list", 14, "("),
    # GROUP BY
    ("SELECT COUNT(*) FROM s GROUP BY a, b, a WINDOW 1 s", "attribute 'a' is grouped twice", 38, "a"),
    ("SELECT COUNT(*) FROM s GROUP a WINDOW 1 s", "expected BY after GROUP", 29, "a"),
    ("SELECT COUNT(*) FROM s GROUP BY", "expected an attribute name after GROUP BY", 31, ""),
    ("SELECT COUNT(*) FROM s GROUP BY WINDOW 1 s", "an aggregate query needs a WINDOW", 39, "1"),  # groups on window
    ('SELECT "COUNT(*)", COUNT(*) FROM s GROUP BY "COUNT(*)" WINDOW 1 s', "is named like the aggregate", 19, "COUNT"),
    # HAVING
    ("SELECT COUNT(*) FROM s WINDOW 1 s HAVING b > 1", "'b' is not grouped (an aggregate of it", 41, "b"),
    ("SELECT COUNT(*) FROM s WINDOW 10 s HAVING foo(x) > 1", "unknown aggregate function foo", 42, "foo"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s HAVING SUM(*) > 1", "SUM(*) is not an aggregate", 45, "*"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s HAVING COUNT(*) 1", "expected a comparison operator", 50, "1"),
    ("SELECT COUNT(*) FROM s WHERE COUNT(x) > 1 WINDOW 1 s", "an aggregate cannot stand in WHERE", 29, "COUNT"),
    # windows
    ("SELECT COUNT(*) FROM s WINDOW -1 s", "WINDOW must be positive", 30, "-1"),
    ("SELECT COUNT(*) FROM s WINDOW 0 s", "WINDOW must be positive", 30, "0"),
    ("SELECT COUNT(*) FROM s WINDOW 0.0 TUPLES", "WINDOW must be positive", 30, "0.0"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s SLIDE - 0 s", "SLIDE must be positive", 40, "-0"),
    ("SELECT COUNT(*) FROM s WINDOW 2.5 TUPLES", "WINDOW must be a whole number of TUPLES", 30, "2.5"),
    ("SELECT COUNT(*) FROM s WINDOW 2 TUPLES SLIDE 0.5 TUPLES", "SLIDE must be a whole number of TUPLES", 45, "0.5"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s SLIDE 1 TUPLES", "SLIDE must be in seconds, as its WINDOW is", 42, "TUPLES"),
    ("SELECT COUNT(*) FROM s WINDOW 1 TUPLES SLIDE 1 ms", "SLIDE must be in TUPLES, as its WINDOW is", 47, "ms"),
    ("SELECT COUNT(*) FROM s WINDOW 1", "expected a unit after the number of WINDOW: s, ms, min or TUPLES", 31, ""),
    ("SELECT COUNT(*) FROM s WINDOW 1 h", "expected a unit after the number of WINDOW", 32, "h"),
    ("SELECT COUNT(*) FROM s WINDOW s", "expected a number after WINDOW", 30, "s"),
    ("SELECT COUNT(*) FROM s WINDOW 10s", "malformed number", 30, "10s"),
    ("SELECT COUNT(*) FROM s WINDOW 1e999 s", "number out of range", 30, "1e999"),
    ("SELECT COUNT(*) FROM s WINDOW 1e-400 s", "number out of range", 30, "1e-400"),
    # clauses out of their place
    ("SELECT COUNT(*) FROM s WINDOW 1 s GROUP BY a", "GROUP BY cannot come here: the clauses go", 34, "GROUP"),
    ("SELECT COUNT(*) FROM s GROUP BY a WHERE a > 1 WINDOW 1 s", "WHERE cannot come here", 34, "WHERE"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s HAVING COUNT(*) > 1 SLIDE 1 s", "SLIDE cannot come here", 54, "SLIDE"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s WINDOW 2 s", "WINDOW cannot come here", 34, "WINDOW"),
    ("SELECT COUNT(*) FROM s WINDOW 1 s x", "unexpected 'x' after the end of the query", 34, "x"),
]


@pytest.mark.parametrize(("text", "message", "position", "token"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_position_and_token(text, message, position, token):
    with pytest.raises(QueryError) as err:
        parse_query(text)
    assert message in str(err.value)
    assert (err.value.position, err.value.token) == (position, token)
    assert f"at position {position}" in str(err.value) and "\n" not in str(err.value)


# Round trips: parse_query(q.to_text()) == q over generated queries.

NAMES = st.sampled_from(
    ["a", "b_2", "Ra", "x y", 'q"uote', "select", "count", "Window", "group", "by", "s", "MIN", "tuples", "HAVING"]
)
ATTRIBUTES = st.sampled_from(["a", "v", "count", "window", "s", "min", "x y"])
AGGREGATES = st.one_of(st.just(COUNT_ALL), st.builds(Aggregate, st.sampled_from(FUNCTIONS), ATTRIBUTES))


def conditions(dims):
    boxes = st.lists(st.tuples(dims, intervals()), max_size=3).map(Box)
    return st.lists(boxes, max_size=3).map(Predicate)


@st.composite
def lengths(draw, whole: bool) -> Fraction:
    """A positive length with a short decimal (a whole number of tuples for a count window)."""
    if whole:
        return Fraction(draw(st.integers(1, 10**6)))
    return Fraction(draw(st.integers(1, 10**6)), 10 ** draw(st.integers(0, 4)))


@st.composite
def windows(draw) -> Window:
    counts = draw(st.booleans())
    size = draw(lengths(counts))
    return Window(size, draw(st.one_of(st.just(size), lengths(counts))), counts)


@st.composite
def aggregate_queries(draw) -> AggregateQuery:
    groups = tuple(draw(st.lists(NAMES, max_size=3, unique=True)))
    aggregates = draw(st.lists(AGGREGATES, min_size=1, max_size=3, unique=True))
    shown = draw(st.lists(st.sampled_from(groups), unique=True)) if groups else []
    outputs = tuple(draw(st.permutations([*shown, *aggregates])))
    columns = [*groups, *(AggregateQuery.column(a) for a in [*aggregates, *draw(st.lists(AGGREGATES, max_size=2))])]
    return AggregateQuery(
        outputs,
        draw(NAMES),
        draw(conditions(st.one_of(NAMES, ATTRIBUTES))),
        groups,
        draw(windows()),
        draw(conditions(st.sampled_from(columns))),
    )


@settings(max_examples=300)
@given(aggregate_queries())
def test_round_trip(query):
    text = query.to_text()
    parsed = parse_query(text)
    assert parsed == dataclasses.replace(query, text=text)
    assert parsed.aggregates == query.aggregates and parsed.select == query.select
