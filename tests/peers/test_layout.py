"""The incremental layout (each epoch changed from the one before) against the full rebuild per epoch.

The rebuild is the plain reference: every flow, delivery, operator and channel laid out from nothing.  The
incremental layout must give the same channels in the same order, with the same taps (position, readers,
feeds), on plans that change in every way a planner changes them and on every strategy's plans of
generated scenarios with churn; and it must keep an unchanged channel as the same object.
"""

from __future__ import annotations

import pytest

from network.routing import Network
from peers.layout import Layouts
from sharing import STRATEGIES, make_plan
from sharing.plan import Delivery, Epoch, Flow, Plan
from tests.peers.test_local_engine import LINKS, PEERS, STREAMS, SUBS, _scenario, _true, _where
from tests.peers.test_local_windows import _changing_plan
from topologies.errors import EmulatorError
from topologies.scale import scale_scenario


def _shape(layout) -> tuple:
    channels = [
        (
            key,
            channel.stream,
            channel.hops,
            channel.sink,
            channel.attrs,
            {
                pos: (tap.operator.node, tap.operator.source, tap.operator.readers, tap.feeds)
                for pos, tap in channel.taps.items()
            },
        )
        for key, channel in layout.channels.items()
    ]
    return channels, dict(layout.sources)


def _assert_same_layouts(scenario, plan) -> int:
    """Both layouts of every epoch are equal; returns how many channels the incremental one kept as the
    same object from one epoch to the next."""
    network = Network.of(scenario)
    incremental, full = Layouts(scenario, network), Layouts(scenario, network)
    kept = 0
    before = None
    for epoch in plan.epochs:
        got, want = incremental.update(epoch), full.rebuild(epoch)
        assert _shape(got) == _shape(want), f"{plan.strategy}: epoch at {epoch.start:g}"
        if before is not None:
            for key, channel in got.channels.items():
                old = before.channels.get(key)
                if old is not None and _shape_of(old) == _shape_of(channel):
                    assert old is channel, f"{plan.strategy}: unchanged channel {key!r} is a new object"
                    kept += 1
        before = got
    return kept


def _shape_of(channel) -> tuple:
    return (channel.key, {pos: (id(tap.operator), tap.feeds) for pos, tap in channel.taps.items()})


def test_every_kind_of_change_lays_out_as_the_rebuild():
    scenario = _scenario(LINKS, PEERS, STREAMS, SUBS, duration=6.0)
    assert _assert_same_layouts(scenario, _changing_plan(scenario)) > 0


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_with_churn_lays_out_as_the_rebuild(seed, strategy):
    scenario = scale_scenario(
        seed,
        transit=3,
        stubs_per_transit=3,
        nodes_per_stub=3,
        subscriptions=60,
        subscriber_peers=20,
        churn=0.5,
        duration=20,
        rate=20,
    )
    plan = make_plan(scenario, strategy)
    assert len(plan.epochs) > 50
    assert _assert_same_layouts(scenario, plan) > 0


def _two_epochs(first: tuple, second: tuple) -> tuple:
    scenario = _scenario(LINKS, PEERS, STREAMS, SUBS, duration=4.0)
    plan = Plan("bad", scenario.name, (Epoch(0.0, 2.0, *first), Epoch(2.0, 4.0, *second)))
    return scenario, plan


F1 = Flow("F1", "S", None, "SP0", ("SP0", "SP1", "SP2"), _where("a < 5"), ("a", "b"))
F2 = Flow("F2", "S", "F1", "SP1", ("SP1", "SP3"), _where("b >= 3"), ("a", "b"))
QB = Delivery("QB", "PB", "SP3", "F2", _where("a <= 4"), ("a",))


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (((F2,), (QB,)), "flow F2: parent F1 is not an earlier flow of the epoch"),  # parent gone, child stays
        (((F2, F1), (QB,)), "flow F2: parent F1 is not an earlier flow of the epoch"),  # parent moved after it
        (((F1, F1), ()), "flow F1 is defined twice"),
        (((F1,), (QB,)), "delivery of QB: flow F2 is not available at SP3"),  # its flow gone
        (
            ((Flow("F1", "S", None, "SP0", ("SP0",), _true(), ("a", "b")), F2), (QB,)),  # F1 cut short
            "flow F2: parent F1 does not pass through SP1",
        ),
    ],
)
def test_a_later_epoch_that_breaks_the_plan_is_an_error_in_both_layouts(second, message):
    scenario, plan = _two_epochs(((F1, F2), (QB,)), second)
    network = Network.of(scenario)
    for lay in (Layouts(scenario, network).update, Layouts(scenario, network).rebuild):
        lay(plan.epochs[0])
        with pytest.raises(EmulatorError, match=message):
            lay(plan.epochs[1])
