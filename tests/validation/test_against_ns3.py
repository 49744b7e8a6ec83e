"""The local engine against ns-3 (point-to-point links, drop-tail byte queues, packets of exactly the
tuples' wire sizes; tests/validation/packets.py), copy by copy, on every designed scenario and strategy:
the same fate for every tuple copy and, delivered, the same latency to the picosecond, with the default
batch window and a short one; the same drops and losses per backbone direction.  Slow (ns-3 takes seconds
to load) and only where the ``ns3`` package is installed (``make test-ns3``)."""

from __future__ import annotations

import pytest

from tests.validation.harness import assert_fares_alike
from tests.validation.packets import load_ns, play_ns3
from tests.validation.scenarios import SCENARIOS, STRATEGIES

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def ns():
    try:
        if load_ns() is None:
            pytest.skip("the ns3 package is not installed")
    except ImportError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_copy_fares_as_in_ns3(designed, name, strategy):
    scenario, plan, setup = designed(name, strategy)
    played = play_ns3(setup.network, setup.channels, setup.emitted)
    assert_fares_alike(scenario, plan, setup, played, (None, 0.35))
