"""The sharing planners never carry an attribute past the last place anything downstream selects it: on
every link a tuple crosses, each value it carries is selected by a subscription downstream that it
satisfies (checked tuple by tuple by the plain reference of tests/surplus_reference.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sharing_checker import scenarios
from test_sharing_dynamics import with_events

from network.routing import Network
from sharing import make_plan
from tests.surplus_reference import reference_surplus

SHARING = ("sharing-hsr", "sharing-hcr", "sharing-em")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(scenarios(), with_events()), st.sampled_from(SHARING))
def test_sharing_carries_no_attribute_past_the_last_place_anything_downstream_selects_it(scenario, strategy):
    """The need classes: on every link a tuple crosses, each value it carries is selected by a subscription
    downstream that it satisfies (arrivals, departures, failures and recoveries included)."""
    plan = make_plan(scenario, strategy, Network.of(scenario))
    assert set(reference_surplus(scenario, plan).values()) <= {0}
