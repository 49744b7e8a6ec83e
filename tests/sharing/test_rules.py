"""The rules every plan keeps (sharing/rules.py): hand-made broken plans, each rule's message, and the
incremental check against a plain one that reads every epoch whole, on plans broken at random."""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import chain

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network.routing import Network
from sharing import make_plan
from sharing.epochs import Listing, Sequence, Slots, same_ends
from sharing.plan import Delivery, Epoch, Flow, Plan
from sharing.rules import check_plan
from tests.peers.test_local_engine import LINKS, PEERS, STREAMS, SUBS, _scenario, _true, _where
from topologies.errors import PlanError
from topologies.loader import load_scenario


@pytest.fixture(scope="module")
def tree():
    return _scenario(LINKS, PEERS, STREAMS, SUBS, duration=4.0)


def _plan(scenario, *epochs) -> Plan:
    return Plan("p", scenario.name, tuple(Epoch(k * 1.0, k * 1.0 + 1.0, f, d) for k, (f, d) in enumerate(epochs)))


def _flows():
    f1 = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 5"), ("a", "b"))
    f2 = Flow("F2", "S", "F1", "SP1", ("SP1", "SP3"), _where("b >= 3"), ("a", "b"))
    return f1, f2


def test_the_plans_of_every_strategy_keep_the_rules_and_are_checked_once(tree, monkeypatch):
    plans = [make_plan(tree, name) for name in ("data-shipping", "multicast", "ideal", "sharing-em")]
    import sharing.rules

    def fail(*args):
        raise AssertionError("checked again")

    monkeypatch.setattr(sharing.rules, "check_plan", fail)
    for plan in plans:
        assert plan.check(tree) is plan  # made by make_plan: checked already, not again


BROKEN = {
    "a flow object listed twice": (
        lambda f1, f2: (((f1, f2), ()), ((f1, f2, f1), ())),
        "flow F1 is defined twice in the epoch starting at 1",
    ),
    "a flow id kept and listed again": (
        lambda f1, f2: (((f1, f2), ()), ((f1, f2, replace(f1, predicate=_where("a < 7"))), ())),
        "flow F1 is defined twice in the epoch starting at 1",
    ),
    "a parent replaced after its child": (
        lambda f1, f2: (((f1, f2), ()), ((f2, replace(f1)), ())),
        "flow F2: parent F1 is not an earlier flow of the epoch",
    ),
    "the same objects, a child moved before its parent": (
        lambda f1, f2: (((f1, f2), ()), ((f2, f1), ())),
        "flow F2: parent F1 is not an earlier flow of the epoch",
    ),
    "a delivery whose flow went": (
        lambda f1, f2: (
            ((f1, f2), (Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",)),)),
            ((f1,), (Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",)),)),
        ),
        "delivery of QB: flow F2 is not available at SP3",
    ),
    "a child filtering on an attribute projected away": (
        lambda f1, f2: (((replace(f1, attrs=("a",)), replace(f2, predicate=_where("b >= 3"))), ()),),
        "flow F2 at SP1 needs attribute 'b', which flow F1 does not carry there",
    ),
    "a path over a pair that is not a link": (
        lambda f1, f2: (((Flow("F", "S", None, "SP0", ("SP0", "SP2"), _true(), ("a",)),), ()),),
        r"flow F: path \('SP0', 'SP2'\) crosses SP0 -> SP2, which is not a link",
    ),
    "a raw read away from the source": (
        lambda f1, f2: (((Flow("F", "S", None, "SP1", ("SP1", "SP2"), _true(), ("a",)),), ()),),
        "flow F reads raw S at SP1, not at SP0",
    ),
    "a delivery to another super-peer than its subscriber's": (
        lambda f1, f2: (((f1,), (Delivery("QA", "PA", "SP1", "F1", _where("a < 5"), ("a",)),)),),
        "delivery of QA: PA at SP1, but the subscriber is PA at SP2",
    ),
    "a delivery of an attribute the flow lacks": (
        lambda f1, f2: (((f1,), (Delivery("QA", "PA", "SP2", "F1", _where("a < 5"), ("a", "c")),)),),
        "delivery of QA at SP2 needs attribute 'c', which flow F1 does not carry there",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_rule_is_a_plan_error_naming_it(tree, case):
    epochs, message = BROKEN[case]
    plan = _plan(tree, *epochs(*_flows()))
    with pytest.raises(PlanError, match=message):
        plan.check(tree)


def test_epochs_out_of_order_are_a_plan_error(tree):
    f1, _ = _flows()
    plan = Plan("p", tree.name, (Epoch(1.0, 2.0, (f1,), ()), Epoch(0.5, 1.5, (f1,), ())))
    with pytest.raises(PlanError, match=r"plan p: epoch \[0.5, 1.5\) is empty or overlaps an earlier one"):
        check_plan(plan, tree)


def _plain_problem(plan: Plan, scenario) -> bool:
    """Whether any epoch (read whole) breaks a rule: the reference the incremental check must agree with."""
    links = set(Network.of(scenario).directions)
    streams, subs, homes = scenario.streams_by_id, scenario.subscriptions_by_id, scenario.homes
    previous = float("-inf")
    for epoch in plan.epochs:
        if not epoch.start < epoch.end or epoch.start < previous:
            return True
        previous = epoch.end
        if max(epoch.start, 0.0) >= min(epoch.end, float(scenario.duration)):
            continue
        seen: dict[str, tuple[Flow, frozenset]] = {}
        for flow in epoch.flows:
            if flow.id in seen or flow.stream not in streams or not flow.path or flow.path[0] != flow.origin:
                return True
            stream = streams[flow.stream]
            if flow.parent is None:
                if flow.origin != homes[stream.source]:
                    return True
                above = frozenset(stream.attribute_names)
            else:
                if flow.parent not in seen or flow.origin not in seen[flow.parent][0].path:
                    return True
                above = seen[flow.parent][1]
            if any((a, b) not in links for a, b in zip(flow.path, flow.path[1:], strict=False)):
                return True
            needs = {*flow.predicate.dims, *flow.attrs, *(d for p, _ in flow.trim for d in p.dims)}
            if not needs <= above:
                return True
            seen[flow.id] = (flow, above if flow.trim else frozenset(flow.attrs))
        for d in epoch.deliveries:
            sub = subs.get(d.subscription)
            if sub is None or d.peer != sub.peer or d.home != homes.get(d.peer):
                return True
            stream = streams[sub.stream]
            if d.flow is None:
                if d.home != homes[stream.source]:
                    return True
                above = frozenset(stream.attribute_names)
            else:
                if d.flow not in seen or d.home not in seen[d.flow][0].path:
                    return True
                above = seen[d.flow][1]
            if not {*d.predicate.dims, *d.attrs} <= above:
                return True
    return False


def _broken(rng: random.Random, plan: Plan, scenario) -> Plan:
    """``plan`` with one epoch changed at random: a flow dropped, moved, listed twice or re-pathed, a
    delivery re-homed or pointed elsewhere, an attribute taken away (new objects, as a planner makes)."""
    epochs = list(plan.epochs)
    k = rng.randrange(len(epochs))
    flows, deliveries = list(epochs[k].flows), list(epochs[k].deliveries)
    kind = rng.randrange(8)
    if flows and kind == 0:
        del flows[rng.randrange(len(flows))]
    elif len(flows) > 1 and kind == 1:
        i, j = rng.sample(range(len(flows)), 2)
        flows[i], flows[j] = flows[j], flows[i]
    elif flows and kind == 2:
        flows.insert(rng.randrange(len(flows) + 1), rng.choice(flows))
    elif flows and kind == 3:
        i = rng.randrange(len(flows))
        flows[i] = replace(flows[i], path=(*flows[i].path, rng.choice(scenario.super_peers)))
    elif flows and kind == 4:
        i = rng.randrange(len(flows))
        flows[i] = replace(flows[i], attrs=flows[i].attrs[1:])
    elif deliveries and kind == 5:
        i = rng.randrange(len(deliveries))
        deliveries[i] = replace(deliveries[i], home=rng.choice(scenario.super_peers))
    elif deliveries and kind == 6:
        i = rng.randrange(len(deliveries))
        deliveries[i] = replace(deliveries[i], flow=rng.choice([None, "nowhere", *(f.id for f in flows)]))
    elif flows and kind == 7:
        i = rng.randrange(len(flows))
        origin = rng.choice(scenario.super_peers)
        flows[i] = replace(flows[i], origin=origin, path=(origin, *flows[i].path[1:]))
    epochs[k] = replace(epochs[k], flows=tuple(flows), deliveries=tuple(deliveries))
    return plan.with_epochs(tuple(epochs))


@pytest.fixture(scope="module")
def shipped():
    found = []
    for path in ("topologies/figure1.yaml", "topologies/sky-survey.yaml", "topologies/sensor-grid.yaml"):
        scenario = load_scenario(path)
        for name in ("data-shipping", "multicast", "ideal", "sharing-em", "sharing-hcr"):
            found.append((scenario, make_plan(scenario, name)))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_the_incremental_check_rejects_exactly_what_a_plain_one_does(shipped, seed, changes):
    rng = random.Random(seed)
    scenario, plan = rng.choice(shipped)
    for _ in range(changes):
        plan = _broken(rng, plan, scenario)
    plain = _plain_problem(plan, scenario)
    try:
        check_plan(plan, scenario)
        incremental = False
    except PlanError:
        incremental = True
    assert incremental == plain


def _diff_by_sets(previous: tuple, items: tuple) -> tuple[set[int], list[int]]:
    before = {id(x) for x in previous}
    first: dict[int, int] = {}
    for p, x in enumerate(items):
        first.setdefault(id(x), p)
    return before - set(first), sorted(p for i, p in first.items() if i not in before)


def _advance(listing: Listing, order: Sequence, items: tuple, parts: tuple[tuple, ...] | None = None):
    """``items`` as ``listing`` finds its change and ``order`` applies it: what ``order`` says."""
    before = list(order.items)
    edit = listing.change(items, parts)
    assert [p for p, _ in edit.came] == sorted({p for p, _ in edit.came})  # ascending, each place once
    applied = edit.applied(before)
    assert len(applied) == len(items) and all(a is b for a, b in zip(applied, items, strict=True))
    found = order.apply(edit)
    assert len(order.items) == len(items) and all(a is b for a, b in zip(order.items, items, strict=True))
    return found


@pytest.mark.parametrize("walk_from", [0, Listing.WALK_FROM], ids=["walked", "default"])
def test_changes_found_by_identity_equal_full_set_differences(walk_from):
    """A list's change (:class:`Listing`), applied (:class:`Sequence`), makes the next list, and what went
    and came are the set differences by identity, whatever changed."""
    rng = random.Random(7)
    pool = [object() for _ in range(60)]
    for ranked in (True, False):
        listing, order = Listing(), Sequence(ranked)
        listing.WALK_FROM = walk_from  # 0: every middle is walked first (diffed by sets where a walk fails)
        items: tuple = ()
        was_twice = False
        for _ in range(400):
            change = list(items)
            for _ in range(rng.choice([0, 1, 1, 2, 5])):
                kind = rng.random()
                if kind < 0.35 or not change:  # an object of the pool (maybe listed already) or a new one
                    change.insert(rng.randrange(len(change) + 1), rng.choice(pool) if rng.random() < 0.5 else object())
                elif kind < 0.7:
                    del change[rng.randrange(len(change))]
                elif kind < 0.9:
                    change[rng.randrange(len(change))] = rng.choice(pool)
                else:
                    rng.shuffle(change)
            if rng.random() < 0.05:
                change = list(dict.fromkeys(change))  # sometimes drop every object listed twice
            gone, fresh, twice = _advance(listing, order, tuple(change))
            expect_gone, expect_fresh = _diff_by_sets(items, tuple(change))
            assert set(gone) == expect_gone and fresh == expect_fresh
            assert twice == (len({id(x) for x in change}) < len(change))
            first = {}
            for p, x in enumerate(change):
                first.setdefault(id(x), p)
            # the objects not among the shifted ones kept their order
            kept = set(map(id, change)) - set(order.shifted)
            if not (twice or was_twice):
                assert [id(x) for x in change if id(x) in kept] == [id(x) for x in items if id(x) in kept]
            if ranked:  # ranks follow each object's first listing
                assert sorted(first, key=order.rank.__getitem__) == sorted(first, key=first.__getitem__)
            else:
                assert order.positions() == first
            was_twice = twice
            items = tuple(change)


@pytest.mark.parametrize("walk_from", [0, Listing.WALK_FROM], ids=["walked", "default"])
@pytest.mark.parametrize("ranked", [True, False], ids=["ranked", "listed"])
def test_lists_given_in_parts_change_as_the_plain_sets_do(ranked, walk_from):
    """A planner's parts (kept tuples where nothing changed: a stream's tree, a flow's subtree) only skip
    objects: the change is the plain one, whatever changed where, the middle between the parts both lists
    start and end with walked (0) or diffed by sets."""
    rng = random.Random(11)
    pool = [object() for _ in range(40)]
    listing, order = Listing(), Sequence(ranked)
    plain, plain_order = Listing(), Sequence(ranked)
    listing.WALK_FROM = walk_from
    parts: list[tuple] = [tuple(object() for _ in range(rng.randrange(4))) for _ in range(6)]
    items: tuple = ()
    before_parts = None
    for _ in range(500):
        parts = list(parts)
        for _ in range(rng.choice([0, 1, 1, 2, 4])):
            kind, k = rng.random(), rng.randrange(len(parts))
            if kind < 0.5:  # a part changed: a new tuple, an object put in, taken out or replaced
                change = list(parts[k])
                if change and rng.random() < 0.5:
                    del change[rng.randrange(len(change))]
                new = rng.choice(pool) if rng.random() < 0.2 else object()
                change.insert(rng.randrange(len(change) + 1), new)
                parts[k] = tuple(change)
            elif kind < 0.7:
                parts.insert(k, tuple(object() for _ in range(rng.randrange(3))))
            elif kind < 0.9 and len(parts) > 1:
                del parts[k]
            else:
                parts[k] = tuple(parts[k])  # the same objects in a new tuple: nothing the parts can tell
        change = tuple(chain.from_iterable(parts))
        head, tail = same_ends(before_parts, tuple(parts))
        if before_parts is not None:  # the parts never claim more than is the same
            assert all(a is b for a, b in zip(items[:head], change[:head], strict=True))
            assert all(a is b for a, b in zip(items[len(items) - tail :], change[len(change) - tail :], strict=True))
        gone, fresh, twice = _advance(listing, order, change, tuple(parts))
        plain_gone, plain_fresh, plain_twice = _advance(plain, plain_order, change)
        assert (set(gone), fresh, twice) == (set(plain_gone), plain_fresh, plain_twice)  # gone: in no set order
        expect_gone, expect_fresh = _diff_by_sets(items, change)
        assert set(gone) == expect_gone and fresh == expect_fresh
        if ranked:
            first = {}
            for p, x in enumerate(change):
                first.setdefault(id(x), p)
            assert sorted(first, key=order.rank.__getitem__) == sorted(first, key=first.__getitem__)
        items, before_parts = change, tuple(parts)


def test_slots_give_the_change_of_their_listing_from_the_slots_set():
    """Whatever slots are set, emptied or set back, the edit turns the last listing into the slots now,
    with the objects of the slots that changed leaving and coming, and no other."""
    rng = random.Random(5)
    slots = Slots(300)
    listed: list = []
    for _ in range(300):
        before = [slots[p] for p in range(300)]
        for _ in range(rng.choice([0, 1, 3, 20, 150])):
            p = rng.randrange(300)
            slots[p] = rng.choice([None, object(), before[p]])
        now = [slots[p] for p in range(300)]
        changed = [p for p in range(300) if now[p] is not before[p]]
        assert slots.pending() == [(before[p], now[p]) for p in changed]
        edit = slots.edit()
        listed = edit.applied(listed)
        assert len(listed) == len([x for x in now if x is not None])
        assert all(a is b for a, b in zip(listed, (x for x in now if x is not None), strict=True))
        assert len(edit.gone) == sum(before[p] is not None for p in changed)
        assert [x for _, x in edit.came] == [now[p] for p in changed if now[p] is not None]
        assert slots.pending() == []
