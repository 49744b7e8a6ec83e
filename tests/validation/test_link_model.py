"""The local engine against the plain packet simulator (tests/packet_reference.py), copy by copy: on every
designed scenario (tests/validation/scenarios.py) and strategy, whatever the batch window, each copy has
the same fate and, delivered, the same latency to the picosecond; each backbone direction drops and loses
the same number of copies."""

from __future__ import annotations

import pytest

from tests.packet_reference import play_reference
from tests.validation.harness import assert_fares_alike, fate_counts, packet_fates
from tests.validation.scenarios import SCENARIOS, STRATEGIES, WINDOWS


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_copy_fares_as_in_the_packet_simulator_whatever_the_window(designed, name, strategy):
    scenario, plan, setup = designed(name, strategy)
    played = play_reference(setup.network, setup.channels, setup.emitted)
    assert_fares_alike(scenario, plan, setup, played, WINDOWS)


def test_the_designed_scenarios_reach_what_they_are_designed_for(designed):
    """Each scenario exercises what it claims (so the comparisons above are not vacuous)."""
    counts = {}
    for name in SCENARIOS:
        for strategy in ("data-shipping", "sharing-em"):
            setup = designed(name, strategy)[2]
            played = play_reference(setup.network, setup.channels, setup.emitted)
            counts[(name, strategy)] = fate_counts(packet_fates(played, setup))
    assert counts[("full-link", "data-shipping")]["dropped"] > 0  # two copies: 200 %
    assert counts[("full-link", "sharing-em")] == {"delivered": 12000}  # one copy: exactly 100 %, nothing lost
    assert counts[("overload", "data-shipping")]["dropped"] > 0
    assert counts[("ring", "data-shipping")]["dropped"] > 0
    assert counts[("failures", "data-shipping")]["lost"] > 0 and counts[("failures", "data-shipping")]["dropped"] > 0
    assert all(c["delivered"] > 0 for c in counts.values())
