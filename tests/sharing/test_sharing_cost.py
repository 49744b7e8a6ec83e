"""The cost model's incremental selectivities against plain full decompositions, and the overlap filters."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sharing_checker import boxes

from matcher import Choice, Normal, Predicate, Uniform, match_em, match_hsr
from matcher.parser import parse_condition
from matcher.selectivity import selectivity
from sharing.cost import BoxBounds, CostModel
from topologies.model import AttributeSpec, Scenario, StreamSpec, ThinPeerSpec

DISTS = {"a": Uniform(0, 100), "b": Normal(50, 20), "c": Choice((10, 20, 30, 40))}


def _model() -> CostModel:
    schema = tuple(AttributeSpec(d, "float", dist) for d, dist in DISTS.items())
    stream = StreamSpec("s", "P0", 10.0, schema)
    return CostModel(Scenario("cost", 1, 10, 16, ("SP0",), (), (ThinPeerSpec("P0", "SP0"),), (stream,), ()))


predicates = st.lists(boxes(), min_size=0, max_size=6).map(Predicate)


@settings(max_examples=150, deadline=None)
@given(before=predicates, added=st.lists(boxes(), min_size=1, max_size=3).map(Predicate))
def test_added_selectivity_equals_the_difference_of_full_decompositions(before, added):
    model = _model()
    got = model.added_selectivity("s", added, BoxBounds(before).overlapping)
    expected = selectivity(before.or_(added), DISTS) - selectivity(before, DISTS)
    assert got == pytest.approx(expected, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(pred=predicates)
def test_the_cost_model_caches_the_matcher_kernel(pred):
    # the same pieces, summed the same way: equal to the last bit (the matcher clamps its sum to 1)
    model = _model()
    assert min(1.0, model.selectivity("s", pred)) == selectivity(pred, DISTS)
    assert model.selectivity("s", pred) == model.selectivity("s", Predicate(pred.boxes))  # from the cache


@settings(max_examples=150, deadline=None)
@given(before=predicates, box=boxes())
def test_outside_bound_and_hull_filter_never_overstate(before, box):
    model = _model()
    bounds = BoxBounds(before)
    near = bounds.overlapping(box)
    assert [b for b in before.boxes if b.overlaps(box)] == [b for b in near if b.overlaps(box)]
    if not bounds.may_overlap(box):
        assert not near
    exact = selectivity(Predicate([box]).minus(before), DISTS) if before.boxes else model.box_probability("s", box)
    assert model.outside_lower_bound("s", box, near) <= exact + 1e-12
    assert model.box_probability("s", box) == pytest.approx(selectivity(Predicate([box]), DISTS), abs=1e-15)


@pytest.mark.parametrize("match", [match_em, match_hsr])
@settings(max_examples=100, deadline=None)
@given(p=predicates, q=st.lists(boxes(), min_size=1, max_size=2).map(Predicate))
def test_matching_the_overlapping_boxes_alone_gives_the_same_relaxation(match, p, q):
    # what the planner relies on to match EM and HSR against the boxes near the query only
    bounds = BoxBounds(p)
    near = Predicate({b: None for box in q.boxes for b in bounds.overlapping(box)})
    matched, relaxed = match(near, q)
    assert (matched, Predicate(p.boxes + relaxed.boxes[len(near.boxes) :])) == match(p, q)


def test_added_selectivity_of_a_covered_box_is_zero_and_of_a_fresh_one_its_probability():
    model = _model()
    before = parse_condition("a BETWEEN 0 AND 50")
    inside = parse_condition("a BETWEEN 10 AND 20 AND b < 30")
    apart = parse_condition("a > 60 AND c = 20")
    assert model.added_selectivity("s", inside, BoxBounds(before).overlapping) == 0.0
    assert math.isclose(model.added_selectivity("s", apart, BoxBounds(before).overlapping), 0.4 * 0.25)
