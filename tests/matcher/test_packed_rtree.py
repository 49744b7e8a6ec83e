"""The packed R-trees are libspatialindex's trees, whole and well formed, and the compiled walks over them
answer what the plain walks and libspatialindex answer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rtree import index

from matcher._rtree_kernels import rectangle_query
from matcher.packed_rtree import MAX_ENTRIES, VARIANTS, build


def rectangles(rng, n, dims):
    lo = rng.integers(0, 40, (n, dims)).astype(float)
    return lo, lo + rng.integers(0, 12, (n, dims))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dims", [1, 2, 3, 6])
def test_the_tree_holds_every_box_once_in_well_formed_nodes(variant, dims):
    lo, hi = rectangles(np.random.default_rng(dims), 300, dims)
    tree = build(lo, hi, variant)
    assert sorted(tree.ids().tolist()) == list(range(300))
    assert tree.count.max() <= MAX_ENTRIES and tree.count[1:].min() >= 2
    depth = {0: 0}
    for v in range(tree.n_nodes):
        entries = range(tree.first[v], tree.first[v] + tree.count[v])
        if tree.leaf[v]:
            assert depth[v] == tree.height - 1  # every leaf on the same level
            for e in entries:
                np.testing.assert_array_equal(tree.lo[e], lo[tree.ref[e]])
                np.testing.assert_array_equal(tree.hi[e], hi[tree.ref[e]])
            continue
        for e in entries:
            child = tree.ref[e]
            depth[child] = depth[v] + 1
            inner = range(tree.first[child], tree.first[child] + tree.count[child])
            # an inner entry's rectangle is its child's bounding rectangle
            np.testing.assert_array_equal(tree.lo[e], tree.lo[list(inner)].min(axis=0))
            np.testing.assert_array_equal(tree.hi[e], tree.hi[list(inner)].max(axis=0))


def test_the_variants_build_different_trees():
    lo, hi = rectangles(np.random.default_rng(1), 400, 3)
    quadratic, star = build(lo, hi, "rtree"), build(lo, hi, "rstar")
    assert quadratic.n_nodes != star.n_nodes or not np.array_equal(quadratic.ref, star.ref)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(0, 120), dims=st.integers(1, 4), containing=st.booleans())
def test_compiled_and_plain_walks_agree_with_libspatialindex_and_brute_force(variant, seed, n, dims, containing):
    rng = np.random.default_rng(seed)
    lo, hi = rectangles(rng, n, dims)
    tree = build(lo, hi, variant)
    reference = None
    if n and not containing:
        properties = index.Property()
        properties.dimension = max(2, dims)
        reference = index.Index(properties=properties)
        pad = [0.0] * (max(2, dims) - dims)
        for i in range(n):
            reference.insert(i, (*lo[i], *pad, *hi[i], *pad))
    found = np.empty(max(1, n), dtype=np.int64)
    for _ in range(10):
        qlo = rng.integers(-5, 50, dims).astype(float)
        qhi = qlo + rng.integers(0, 15, dims)
        plain = tree.query(qlo, qhi, containing)
        count = rectangle_query(tree.arrays(), qlo, qhi, containing, found)
        assert found[:count].tolist() == plain  # same walk, same order
        if containing:
            truth = [i for i in range(n) if np.all(lo[i] <= qlo) and np.all(qhi <= hi[i])]
        else:
            truth = [i for i in range(n) if np.all(lo[i] <= qhi) and np.all(qlo <= hi[i])]
        assert sorted(plain) == truth
        if reference is not None:
            pad = [0.0] * (max(2, dims) - dims)
            assert sorted(reference.intersection((*qlo, *pad, *qhi, *pad))) == truth


def test_bad_input_is_refused():
    lo = np.zeros((2, 2))
    with pytest.raises(ValueError, match="variant"):
        build(lo, lo + 1, "kd")
    with pytest.raises(ValueError, match="finite"):
        build(lo, np.full((2, 2), np.inf))
    empty = build(np.zeros((0, 3)), np.zeros((0, 3)))
    assert empty.n_nodes == 0 and empty.query(np.zeros(3), np.ones(3)) == []
    assert rectangle_query(empty.arrays(), np.zeros(3), np.ones(3), False, np.empty(1, np.int64)) == 0
