"""The worked examples of Kuntschke & Kemper's section 3 (predicates p1, p2, p3 and p1' of Figures 2-5),
reproduced exactly."""

import pytest

from matcher import MATCHERS, Box, Interval, Predicate, interval, match_em, match_hcr, match_hsr, quick_check
from matcher.predicate import CellGrid, split_cells


def box(a: Interval, b: Interval) -> Box:
    return Box({"a": a, "b": b})


C = Interval.closed
P1 = Predicate([box(C(3, 12), C(0, 5)), box(C(9, 14), C(2, 8)), box(C(0, 5), C(1, 6))])
P2 = Predicate([box(C(1, 8), C(2, 4))])
P3 = Predicate([box(C(4, 13), C(7, 10))])
# Figure 4: p1 with its third box narrowed to b in [3, 6]
P1_PRIME = Predicate([box(C(3, 12), C(0, 5)), box(C(9, 14), C(2, 8)), box(C(0, 5), C(3, 6))])

EXACT = [name for name in MATCHERS if name.startswith("EM")]


def test_quick_check_finds_no_single_box_containing_p2():
    # section 3.2: the dashed box of p2 lies in none of p1's boxes, though it overlaps them
    assert quick_check(P1, P2.boxes[0]) == 0
    assert quick_check(P1, box(C(4, 5), C(1, 2))) == 1
    assert quick_check(P1, box(C(20, 30), C(1, 2))) == -1


@pytest.mark.parametrize("check", [False, True])
def test_simple_relaxation_appends_p2(check):
    # section 3.3: the quick check misses the match, so p2's box is added to p1
    assert match_hsr(P1, P2, quick_check=check) == (False, Predicate([*P1.boxes, *P2.boxes]))


@pytest.mark.parametrize("check", [False, True])
def test_complex_relaxation_widens_the_first_box_of_p1(check):
    # section 3.4, Figure 3: the first box needs the least relaxation, a in [3, 12] becomes [1, 12]
    relaxed = Predicate([box(C(1, 12), C(0, 5)), P1.boxes[1], P1.boxes[2]])
    assert match_hcr(P1, P2, quick_check=check) == (False, relaxed)


@pytest.mark.parametrize("check", [False, True])
def test_complex_relaxation_of_figure_4(check):
    relaxed = Predicate([box(C(1, 12), C(0, 5)), P1_PRIME.boxes[1], P1_PRIME.boxes[2]])
    assert match_hcr(P1_PRIME, P2, quick_check=check) == (False, relaxed)


@pytest.mark.parametrize("name", EXACT)
def test_exact_matching_finds_that_p2_implies_p1(name):
    # section 3.5: p2 is split at a = 3; [3, 8] lies in the first box, the rest [1, 3[ in the third
    assert MATCHERS[name](P1, P2) == (True, P1)


def test_p2_split_against_the_first_box_of_p1():
    grid = CellGrid([*P1.boxes, *P2.boxes])
    rest = split_cells(grid.encode(P2.boxes[0]), grid.constraint(P1.boxes[0]))
    assert [grid.decode(piece) for piece in rest] == [box(interval(1, 3, True, False), C(2, 4))]


@pytest.mark.parametrize("name", EXACT)
def test_exact_matching_appends_p3(name):
    # Figure 5: p3 is only partly covered, so p1 gets p3's whole box
    assert MATCHERS[name](P1, P3) == (False, Predicate([*P1.boxes, *P3.boxes]))


def test_p3_decomposition_against_the_second_box_of_p1():
    # a is split at 9, then b at 8: [4, 9[ x [7, 10] and [9, 13] x ]8, 10] are left, [9, 13] x [7, 8] is matched
    parts = P3.boxes[0].subtract(P1.boxes[1], order=["a", "b"])
    assert parts == [box(interval(4, 9, True, False), C(7, 10)), box(C(9, 13), interval(8, 10, False, True))]
    assert P3.boxes[0].intersect(P1.boxes[1]) == box(C(9, 13), C(7, 8))
    # the other boxes of p1 match nothing more
    assert P3.minus(P1) == Predicate(parts)


@pytest.mark.parametrize("name", EXACT)
def test_exact_matching_of_figure_4(name):
    assert MATCHERS[name](P1_PRIME, P2) == (False, Predicate([*P1_PRIME.boxes, *P2.boxes]))


def test_figure_4_split_parts():
    # section 3.5: [3, 8] x [2, 4] is matched by the first box, [1, 3[ x [3, 4] by the third,
    # and [1, 3[ x [2, 3[ remains unmatched
    first, _, third = P1_PRIME.boxes
    (rest,) = P2.boxes[0].subtract(first)
    assert rest == box(interval(1, 3, True, False), C(2, 4))
    assert P2.boxes[0].intersect(first) == box(C(3, 8), C(2, 4))
    assert rest.intersect(third) == box(interval(1, 3, True, False), C(3, 4))
    assert rest.subtract(third) == [box(interval(1, 3, True, False), interval(2, 3, True, False))]
    assert P2.minus(P1_PRIME) == Predicate([box(interval(1, 3, True, False), interval(2, 3, True, False))])


def test_exact_matching_with_index_on_the_examples():
    for strategy in ("bfs", "dfs", "mix"):
        assert match_em(P1, P2, strategy=strategy, index="rtree") == (True, P1)
        assert match_em(P1, P3, strategy=strategy, index="rtree", quick_check=False) == (
            False,
            Predicate([*P1.boxes, *P3.boxes]),
        )
