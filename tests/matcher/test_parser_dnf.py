"""The parser's DNF against the plain product it replaces, long ANDs and NOT IN lists, the size limits."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import MAX_BOXES, Box, Interval, QueryError, interval, parse_condition
from matcher.parser import MAX_PAIRS, _Comparison, _Constant, _dnf, _Not, _Parser
from matcher.predicate import UNBOUNDED

# The reference: the plain left-major product, as the parser computed every AND before the sorted merge.
# It leaves out the size limits, which the generated conditions stay far below.


def reference_complement(iv: Interval) -> tuple[Interval, ...]:
    if iv.is_empty():
        return (UNBOUNDED,)
    left, right = UNBOUNDED.minus(iv)
    return tuple(piece for piece in (left, right) if piece is not None)


def reference_dnf(node, negated: bool) -> list[Box]:
    if isinstance(node, _Constant):
        return [Box()] if node.value != negated else []
    if isinstance(node, _Not):
        return reference_dnf(node.operand, not negated)
    if isinstance(node, _Comparison):
        if not negated:
            return [box for iv in node.intervals if not (box := Box({node.dim: iv})).is_empty()]
        result = [Box()]
        for iv in node.intervals:
            rays = [Box({node.dim: piece}) for piece in reference_complement(iv)]
            result = [joined for box in result for ray in rays if not (joined := box.intersect(ray)).is_empty()]
        return result
    conjunctive = node.conjunctive != negated
    parts = (reference_dnf(operand, negated) for operand in node.operands)
    if not conjunctive:
        return [box for part in parts for box in part]
    result = [Box()]
    for part in parts:
        result = [joined for left in result for right in part if not (joined := left.intersect(right)).is_empty()]
    return result


# Conditions on one to three attributes over a few small constants, so that intervals touch, overlap and
# share ends (open against closed, points on ends) often; -0.0 against 0 checks which of two equal bounds
# is kept.

CONSTANTS = st.sampled_from(["-1", "-0.0", "0", "0.5", "1", "1.5", "2", "3"])
OPERATORS = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])


def conditions_on(dims: tuple[str, ...]) -> st.SearchStrategy[str]:
    name = st.sampled_from(dims)
    leaf = st.one_of(
        st.builds("{} {} {}".format, name, OPERATORS, CONSTANTS),
        st.builds("{} {}BETWEEN {} AND {}".format, name, st.sampled_from(["", "NOT "]), CONSTANTS, CONSTANTS),
        st.builds(
            "{} {}IN ({})".format,
            name,
            st.sampled_from(["", "NOT "]),
            st.lists(CONSTANTS, min_size=1, max_size=8).map(", ".join),
        ),
        st.sampled_from(["TRUE", "FALSE"]),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            inner.map("NOT ({})".format),
            st.lists(inner, min_size=2, max_size=8).map(lambda xs: " AND ".join(f"({x})" for x in xs)),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: " OR ".join(f"({x})" for x in xs)),
        ),
        max_leaves=16,
    )


conditions = st.one_of(conditions_on(("a",)), conditions_on(("a", "b")), conditions_on(("a", "b", "c")))


def spelled_out(boxes: list[Box]) -> str:
    """The boxes' intervals as Python writes them, where ``-0.0`` and ``0.0`` differ."""
    return repr([box.items() for box in boxes])


@settings(max_examples=500, deadline=None)
@given(conditions, st.booleans())
def test_dnf_equals_the_plain_product(text, negated):
    node = _Parser(text).condition()
    expected = reference_dnf(node, negated)
    assert spelled_out(_dnf(node, negated)) == spelled_out(expected)  # the same boxes in the same order


# Long ANDs of one attribute: exact results.


def test_long_chain_of_not_equal():
    text = " AND ".join(f"a != {i}" for i in range(1, 5001))
    pred = parse_condition(text)
    assert len(pred.boxes) == 5001
    assert pred.boxes[0] == Box({"a": Interval.below(1)})
    assert pred.boxes[1] == Box({"a": interval(1, 2, False, False)})
    assert pred.boxes[-1] == Box({"a": Interval.above(5000)})
    on_b = {"b": Interval.point(0)}  # the boxes differ in a alone: still merged, b carried along
    assert parse_condition(f"a <= 2.5 AND b = 0 AND {text}").boxes == (
        Box({"a": Interval.below(1), **on_b}),
        Box({"a": interval(1, 2, False, False), **on_b}),
        Box({"a": interval(2, 2.5, False, True), **on_b}),
    )


def test_long_not_in_list():
    values = [*range(5000, 0, -2), *range(1, 5001, 2)]  # written out of order: the result is sorted anyway
    pred = parse_condition(f"a NOT IN ({', '.join(map(str, values))})")
    assert len(pred.boxes) == 5001
    assert pred.boxes[0] == Box({"a": Interval.below(1)})
    assert pred.boxes[2499] == Box({"a": interval(2499, 2500, False, False)})
    assert pred.boxes[-1] == Box({"a": Interval.above(5000)})
    assert parse_condition("NOT a NOT IN (3, 1, 2)").boxes == tuple(Box({"a": Interval.point(v)}) for v in (3, 1, 2))


# The limits: the same refusals whichever way the boxes are computed.


def test_the_pair_limit_counts_the_plain_product():
    side = int(MAX_PAIRS**0.5)  # both sides sorted: the merge would need few steps, but the count is the same
    fits = ", ".join(map(str, range(side)))
    assert len(parse_condition(f"a IN ({fits}) AND a IN ({fits})").boxes) == side
    over = ", ".join(map(str, range(side + 1)))
    with pytest.raises(QueryError, match=f"over {MAX_PAIRS:,} box pairs") as err:
        parse_condition(f"a IN ({over}) AND a IN ({over})")
    assert err.value.token == "AND"


def test_a_long_chain_is_refused_once_over_the_box_limit():
    text = " AND ".join(f"a != {i}" for i in range(1, MAX_BOXES + 1))  # MAX_BOXES + 1 boxes
    with pytest.raises(QueryError, match=f"over {MAX_BOXES:,} boxes") as err:
        parse_condition(text)
    assert (err.value.position, err.value.token) == (text.index(" AND ") + 1, "AND")
    assert len(parse_condition(text.rpartition(" AND ")[0]).boxes) == MAX_BOXES


def test_in_lists_are_held_to_the_box_limit():
    values = ", ".join(map(str, range(MAX_BOXES + 1)))
    # refused even where the AND would shrink it, as the same list spelled out with OR always was
    for text in (f"a IN ({values})", f"a NOT IN ({values})", f"a NOT IN ({values}) AND a < 1"):
        with pytest.raises(QueryError, match=f"over {MAX_BOXES:,} boxes") as err:
            parse_condition(text)
        assert (err.value.position, err.value.token) == (text.index("IN"), "IN")
    fits = ", ".join(map(str, range(MAX_BOXES)))
    assert len(parse_condition(f"a IN ({fits}, {fits})").boxes) == MAX_BOXES  # repeated values count once


# Round trips of the largest predicates the parser makes.


@pytest.mark.parametrize("keyword", ["IN", "NOT IN"])
def test_largest_in_lists_round_trip(keyword):
    count = MAX_BOXES if keyword == "IN" else MAX_BOXES - 1  # NOT IN has one box more than values
    pred = parse_condition(f"a {keyword} ({', '.join(str(i / 8) for i in range(count))})")
    assert len(pred.boxes) == MAX_BOXES
    assert parse_condition(pred.to_text()) == pred
