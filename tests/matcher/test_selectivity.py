"""Exact selectivity: counting for discrete distributions, unit cells for volume, Monte Carlo otherwise."""

import importlib
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import INF, Box, Choice, Empirical, Interval, Normal, Predicate, Uniform, interval, selectivity, volume
from tests.matcher.pointwise import members

DIMS = ("a", "b", "c")
GRID_VALUES = [-1.0, *(x / 2 for x in range(13)), 7.0]  # bounds, midpoints and outside values

bound = st.one_of(st.none(), st.integers(0, 6))
constraint = st.tuples(st.sampled_from(DIMS), bound, bound, st.booleans(), st.booleans())
predicates = st.lists(st.lists(constraint, max_size=3), max_size=4).map(
    lambda raw: Predicate(
        Box((d, interval(-INF if lo is None else lo, INF if hi is None else hi, lc, hc)) for d, lo, hi, lc, hc in b)
        for b in raw
    )
)


def enumerate_probability(pred: Predicate, supports) -> float:
    """P(pred) by enumerating every combination of the per-dimension (values, weights) supports."""
    values = [np.asarray(v, float) for v, _ in supports.values()]
    weights = [np.asarray(w, float) / math.fsum(w) for _, w in supports.values()]
    grids = np.meshgrid(*values, indexing="ij")
    mass = np.ones_like(grids[0])
    for axis, w in enumerate(weights):
        shape = [1] * len(weights)
        shape[axis] = len(w)
        mass = mass * w.reshape(shape)
    columns = dict(zip(supports, (g.ravel() for g in grids), strict=True))
    return math.fsum(mass.ravel()[members(pred, columns)])


def normal_integer_support(mu, sigma):
    ks = np.arange(math.floor(mu - 12 * sigma), math.ceil(mu + 12 * sigma) + 1)
    scale = sigma * math.sqrt(2)
    return ks, [0.5 * (math.erf((k + 0.5 - mu) / scale) - math.erf((k - 0.5 - mu) / scale)) for k in ks]


@st.composite
def discrete(draw):
    """A discrete distribution and its support written out independently of matcher's code."""
    kind = draw(st.sampled_from(["choice", "weighted", "empirical", "uniform-int", "normal-int"]))
    if kind in ("choice", "weighted"):
        values = draw(st.lists(st.sampled_from(GRID_VALUES), min_size=1, max_size=5, unique=True))
        if kind == "choice":
            return Choice(tuple(values)), (values, [1] * len(values))
        weights = draw(st.lists(st.integers(0, 5), min_size=len(values), max_size=len(values)).filter(any))
        return Choice(tuple(values), tuple(weights)), (values, weights)
    if kind == "empirical":
        values = draw(st.lists(st.sampled_from(GRID_VALUES), min_size=1, max_size=6))
        return Empirical.of(values), (values, [1] * len(values))
    if kind == "uniform-int":
        lo = draw(st.sampled_from([-1.5, -1, 0, 0.5, 1, 2.5]))
        hi = draw(st.sampled_from([3, 4.5, 5, 6, 7.5]))
        ks = list(range(math.ceil(lo), math.floor(hi) + 1))
        return Uniform(lo, hi, integer=True), (ks, [1] * len(ks))
    mu = draw(st.sampled_from([-0.5, 0, 2.5, 3, 6.2]))
    sigma = draw(st.sampled_from([0.3, 0.5, 1.0, 1.5]))
    return Normal(mu, sigma, integer=True), normal_integer_support(mu, sigma)


@settings(max_examples=150)
@given(predicates, st.tuples(discrete(), discrete(), discrete()))
def test_discrete_selectivity_equals_counting(pred, dists):
    expected = enumerate_probability(pred, {d: support for d, (_, support) in zip(DIMS, dists, strict=True)})
    got = selectivity(pred, {d: dist for d, (dist, _) in zip(DIMS, dists, strict=True)})
    assert got == pytest.approx(expected, abs=1e-9)


@settings(max_examples=150)
@given(predicates)
def test_volume_equals_the_unit_cells_covered(pred):
    # Bounds are integers, so each unit cell of [-1, 7]^3 is inside or outside as a whole (up to measure zero)
    mids = np.arange(-1, 7) + 0.5
    grids = np.meshgrid(mids, mids, mids, indexing="ij")
    covered = members(pred, dict(zip(DIMS, (g.ravel() for g in grids), strict=True))).sum()
    expected = covered / 8**3
    assert volume(pred, dict.fromkeys(DIMS, (-1.0, 7.0))) == pytest.approx(expected, abs=1e-12)
    assert selectivity(pred, dict.fromkeys(DIMS, Uniform(-1, 7))) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(predicates, st.sampled_from(["normal", "uniform", "mixed"]))
def test_continuous_selectivity_agrees_with_monte_carlo(pred, family):
    dists = {
        "normal": dict.fromkeys(DIMS, Normal(3.0, 1.5)),
        "uniform": dict.fromkeys(DIMS, Uniform(-0.5, 6.5)),
        "mixed": {"a": Normal(2.0, 0.7), "b": Uniform(1.0, 5.0), "c": Normal(5.5, 2.0)},
    }[family]
    n = 100_000
    rng = np.random.default_rng(12345)
    sample = {d: dist.sample(rng, n) for d, dist in dists.items()}
    estimate = members(pred, sample).mean()
    p = selectivity(pred, dists)
    assert abs(estimate - p) <= 6 * math.sqrt(p * (1 - p) / n) + 1e-9


def selectivity_by_whole_decomposition(pred: Predicate, dists) -> float:
    """The algorithm the selectivity kernel replaced: ``Predicate.disjoint()`` splits the whole predicate
    into pairwise disjoint boxes on one grid, and their probabilities add."""
    terms = []
    for box in pred.disjoint().boxes:
        p = 1.0
        for dim, iv in box.items():
            p *= dists[dim].prob(iv)
        terms.append(p)
    return min(1.0, math.fsum(terms))


continuous = st.sampled_from([Normal(3.0, 1.5), Uniform(-0.5, 6.5), Normal(2.0, 0.7), Uniform(1.0, 5.0)])


@settings(max_examples=300, deadline=None)
@given(predicates, st.tuples(*[st.one_of(continuous, discrete().map(lambda d: d[0]))] * 3))
def test_the_kernel_agrees_with_a_whole_predicate_decomposition(pred, dists):
    # box by box against the boxes before it, or the whole predicate at once: the same disjoint union,
    # cut into different pieces, so the sums may differ by rounding only
    by_dim = dict(zip(DIMS, dists, strict=True))
    expected = selectivity_by_whole_decomposition(pred, by_dim)
    assert selectivity(pred, by_dim) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    "dist",
    [
        Uniform(0, 5, integer=True),
        Uniform(-0.5, 3.5, integer=True),
        Normal(2.5, 1.0, integer=True),
        Normal(0.0, 0.5, integer=True),
        Choice((1.0, 2.0, 4.0), (1.0, 0.0, 3.0)),
        Empirical.of([3, 1, 1, 2, 5]),
    ],
    ids=repr,
)
def test_discrete_sampling_matches_prob(dist):
    n = 100_000
    values = dist.sample(np.random.default_rng(7), n)
    for k in np.unique(values):
        p = dist.prob(Interval.point(float(k)))
        assert abs((values == k).mean() - p) <= 6 * math.sqrt(p * (1 - p) / n) + 1e-9
    assert dist.prob(Interval()) == pytest.approx(1.0)


def test_fixed_bugs_and_tails():
    # an open lower end on the support's first integer excludes it: (0, 3] holds 1, 2, 3 of 0..5
    assert Uniform(0, 5, integer=True).prob(Interval(0.0, 3.0, False, True)) == 3 / 6
    assert Uniform(0, 5, integer=True).prob(Interval(-INF, 5.0, False, False)) == 5 / 6
    # rays under an integer normal used to raise OverflowError (ceil of -inf)
    below = Normal(0, 1, integer=True).prob(Interval.below(0.0))  # P(round(X) <= -1) = P(X < -0.5)
    assert below == pytest.approx(0.5 * math.erfc(0.5 / math.sqrt(2)), rel=1e-12)
    assert Normal(0, 1, integer=True).prob(Interval.above(0.0, inclusive=True)) == pytest.approx(1 - below)
    # far tails keep their relative precision (1 - cdf would give 0)
    assert Normal(0, 1).prob(Interval.above(8.0)) == pytest.approx(6.220960574271785e-16, rel=1e-12)
    assert Normal(0, 1).prob(Interval.below(-8.0)) == pytest.approx(6.220960574271785e-16, rel=1e-12)
    assert Normal(0, 1).prob(Interval.point(0.0)) == 0.0
    assert Empirical(np.array([3.0, 1.0, 2.0])).prob(Interval.below(2.0, inclusive=True)) == 2 / 3


def test_trivial_predicates_need_no_distribution():
    assert selectivity(Predicate.TRUE, {}) == 1.0
    assert selectivity(Predicate.FALSE, {}) == 0.0
    assert volume(Predicate.TRUE, {}) == 1.0


def test_overlapping_boxes_are_not_counted_twice():
    a = Box({"a": Interval.closed(0, 4)})
    b = Box({"a": Interval.closed(2, 6)})
    assert volume(Predicate([a, b, a]), {"a": (0, 10)}) == pytest.approx(0.6)
    p1 = [
        Box({"a": Interval.closed(3, 12), "b": Interval.closed(0, 5)}),
        Box({"a": Interval.closed(9, 14), "b": Interval.closed(2, 8)}),
        Box({"a": Interval.closed(0, 5), "b": Interval.closed(1, 6)}),
    ]
    assert volume(Predicate(p1), {"a": (0, 20), "b": (0, 10)}) == pytest.approx((45 + 30 + 25 - 9 - 8) / 200)


def test_missing_distribution_and_bad_bounds_are_reported():
    pred = Predicate([Box({"a": Interval.point(1), "b": Interval.below(2)})])
    with pytest.raises(KeyError, match="no distribution for attribute 'b'"):
        selectivity(pred, {"a": Uniform(0, 1)})
    with pytest.raises(ValueError, match="bounds of 'a'"):
        volume(pred, {"a": (1, 1), "b": (0, 1)})
    with pytest.raises(ValueError, match="bounds of 'b'"):
        volume(pred, {"a": (0, 1), "b": (0, math.inf)})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Uniform(2, 1), "above"),
        (lambda: Uniform(0.2, 0.8, integer=True), "no integer"),
        (lambda: Uniform(0, math.inf), "finite"),
        (lambda: Normal(0, 0), "sigma"),
        (lambda: Normal(math.nan, 1), "finite"),
        (lambda: Choice(()), "no values"),
        (lambda: Choice((1, 2), (1,)), "weights"),
        (lambda: Choice((1, 2), (-1, 2)), "non-negative"),
        (lambda: Choice((1, 2), (0, 0)), "positive sum"),
        (lambda: Empirical.of([]), "no values"),
        (lambda: Empirical.of([1, math.nan]), "NaN"),
    ],
)
def test_distributions_reject_unusable_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_independent_dimensions_multiply():
    dists = {"a": Uniform(0, 4), "b": Choice((1.0, 2.0, 3.0)), "c": Normal(0, 1)}
    pred = Predicate([Box({"a": Interval.closed(1, 2), "b": Interval.above(1), "c": Interval.above(0)})])
    assert selectivity(pred, dists) == pytest.approx(0.25 * (2 / 3) * 0.5, rel=1e-12)
    for order in itertools.permutations(pred.boxes[0].items()):
        assert selectivity(Predicate([Box(order)]), dists) == selectivity(pred, dists)


# The compiled cuts (many boxes) against the plain loop: the same pieces, so the same probabilities.

many_boxes = (
    st.lists(st.lists(constraint, max_size=3), min_size=1, max_size=14)
    .map(
        lambda raw: [
            b
            for b in (
                Box(
                    (d, interval(-INF if lo is None else lo, INF if hi is None else hi, lc, hc))
                    for d, lo, hi, lc, hc in c
                )
                for c in raw
            )
            if not b.is_empty()
        ]
    )
    .filter(bool)
)


@settings(max_examples=300, deadline=None)
@given(many_boxes)
def test_compiled_cuts_leave_the_pieces_the_plain_split_leaves(boxes):
    from matcher._cut_kernels import uncovered_cells
    from matcher.predicate import CellGrid, uncovered_breadth_first

    if len(boxes) < 2:
        return
    box, others = boxes[0], boxes[1:]
    grid = CellGrid(boxes)
    constraints = [grid.constraint(b) for b in others]
    plain = uncovered_breadth_first(grid.encode(box), constraints)
    flat = np.array([entry for c in constraints for entry in c] or np.zeros((0, 3)), dtype=np.int64).reshape(-1, 3)
    starts = np.concatenate([[0], np.cumsum([len(c) for c in constraints])]).astype(np.int64)
    compiled = uncovered_cells(
        np.array(grid.encode(box), dtype=np.int64), flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2].copy(), starts
    )
    assert sorted(plain) == sorted(tuple(int(x) for x in row) for row in compiled)


@settings(max_examples=300, deadline=None)
@given(many_boxes, st.sampled_from([(0.0, 6.0), (-1.0, 3.5), (2.0, 2.5)]))
def test_uniform_kernel_gives_the_plain_probabilities_float_for_float(boxes, support):
    from matcher.selectivity import UniformSpace, outside_probabilities

    dists = {d: Uniform(*support) for d in DIMS}
    box, others = boxes[0], boxes[1:]
    plain = outside_probabilities(box, others, dists)
    space = UniformSpace.of(dists)
    compiled = space.outside_probabilities(box, others)
    assert sorted(plain) == sorted(compiled)
    # the kernel's own exact sum: the rows before, then the boxes ahead
    half = len(others) // 2
    before = np.stack([space.row(b) for b in others[:half]]) if half else space.none
    partials = space.outside_partials(box, before, others[half:])
    assert math.fsum(partials.tolist()) == math.fsum(plain)


@settings(max_examples=200, deadline=None)
@given(many_boxes)
def test_many_boxes_take_the_compiled_cuts_with_the_same_probabilities(boxes):
    module = importlib.import_module("matcher.selectivity")  # the package's ``selectivity`` is the function

    dists = {"a": Normal(3.0, 2.0), "b": Choice((0.0, 1.5, 2.0, 6.0)), "c": Uniform(0.0, 6.0, integer=True)}
    box, others = boxes[0], boxes[1:]
    saved = module.KERNEL_FROM
    try:
        module.KERNEL_FROM = 1
        compiled = module.outside_probabilities(box, others, dists)
        module.KERNEL_FROM = 10**9
        plain = module.outside_probabilities(box, others, dists)
    finally:
        module.KERNEL_FROM = saved
    assert sorted(plain) == sorted(compiled)


def test_only_continuous_uniform_attributes_take_the_uniform_kernel():
    from matcher.selectivity import UniformSpace

    assert UniformSpace.of({"a": Uniform(0, 1), "b": Uniform(-5, 5)}) is not None
    assert UniformSpace.of({"a": Uniform(0, 1), "b": Uniform(0, 5, integer=True)}) is None
    assert UniformSpace.of({"a": Uniform(2, 2)}) is None
    assert UniformSpace.of({"a": Normal(0, 1)}) is None
    assert UniformSpace.of({}) is None
