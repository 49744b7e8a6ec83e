"""The delivery check of many subscriptions at once against the plain one-subscription check."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies.expected import differences_by_owner, multiset_difference


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30)), max_size=80),
    st.lists(st.sets(st.integers(0, 30), max_size=20), min_size=5, max_size=5),
)
def test_differences_by_owner_equal_the_multiset_difference_per_owner(copies, wanted):
    owners = np.array([o for o, _ in copies], np.int32)
    delivered = np.array([t for _, t in copies], np.int64)
    expected = [np.array(sorted(w), np.int64) for w in wanted]
    missing, extra = differences_by_owner(owners, delivered, expected)
    for k in range(5):
        assert (missing[k], extra[k]) == multiset_difference(delivered[owners == k], expected[k])
