"""Many readers of one input read together (over a grid of their boxes) keep exactly what each keeps alone,
by the plain one-reader reference: open and closed bounds, values on them and between, NaN, unbounded sides,
predicates that hold everywhere, and trim readers beside them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import Box, Interval, Predicate
from peers.selection import SHARED_READERS, SelectorTable, select_batch
from peers.superpeer import Rows, Selector, flow_reader
from sharing.plan import Flow

NAMES = ("a", "b", "c")

bounds = st.tuples(st.integers(-2, 12), st.integers(-2, 12), st.booleans(), st.booleans()).map(
    lambda t: Interval(min(t[0], t[1]), max(t[0], t[1]) + 0.5 * (t[0] == t[1]), t[2], t[3])
)
sides = st.one_of(bounds, st.just(Interval(-np.inf, 3.0, False, True)), st.just(Interval(4.0, np.inf, True, False)))
boxes = st.dictionaries(st.sampled_from(NAMES), sides, max_size=3).map(Box)
predicates = st.one_of(st.lists(boxes, min_size=1, max_size=3).map(Predicate), st.just(Predicate.TRUE))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(predicates, min_size=SHARED_READERS, max_size=3 * SHARED_READERS),
    st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 4.0, 5.5, 7.0, 10.0, 12.0, -1.0, np.nan]), min_size=3 * 40,
             max_size=3 * 400).map(lambda v: np.array(v[: len(v) // 3 * 3]).reshape(3, -1)),
    st.integers(0, 3),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_readers_read_together_keep_what_each_keeps_alone(wheres, values, trims, rng):
    values = values + np.array([[0.0], [0.25], [0.0]]) * (np.arange(values.shape[1]) % 2)  # some between bounds
    table = SelectorTable({"s": NAMES}, 16)
    readers, selectors = [], []
    for k, where in enumerate(wheres):
        attrs = tuple(n for n in NAMES if rng.random() < 0.6) or ("a",)
        trim = ()
        if k < trims:  # trim readers are read alone, beside those read together
            trim = ((wheres[(k + 1) % len(wheres)], ("a",)), (where, ("b", "c")))
        flow = Flow(f"F{k}", "s", None, "SP0", ("SP0",), where, attrs, trim)
        entries = [table.entry("s", p, a) for p, a in trim]
        readers.append(table.add("s", where, attrs, entries))
        selectors.append(Selector(flow_reader(flow), 16))
    got = select_batch(table, readers, NAMES, values)
    rows = np.arange(values.shape[1])
    for selector, (positions, wire) in zip(selectors, got, strict=True):
        want, want_wire = selector.pick(Rows(NAMES, 0, values, rows))
        assert positions.tolist() == want.tolist()
        assert wire.tolist() == want_wire.tolist()
