"""The planner's working records: installed flows and active subscriptions, mutable while it plans.

The frozen :class:`sharing.plan.Flow` and :class:`sharing.plan.Delivery` are what a plan holds; these are
what the planner edits between two snapshots.  Attribute sets are bit masks over the stream's schema
(bit ``i``: the schema's ``i``-th attribute), so that unions and comparisons cost one integer operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from matcher import Predicate
from sharing.cost import BoxBounds
from sharing.needs import NeedUnion
from sharing.plan import Delivery, Flow
from topologies.model import Scenario, SubscriptionSpec

RELATIVE_SLACK = 1e-9
"""Float slack when comparing estimated costs and selectivities."""


class AttributeMasks:
    """Each stream's attribute names as bit masks over its schema, and back."""

    def __init__(self, scenario: Scenario):
        self._schema = {s.id: s.attribute_names for s in scenario.streams}

    def schema(self, stream: str) -> tuple[str, ...]:
        return self._schema[stream]

    def mask(self, stream: str, names) -> int:
        schema = self._schema[stream]
        wanted = set(names)
        return sum(1 << i for i, a in enumerate(schema) if a in wanted)

    def names(self, stream: str, mask: int) -> tuple[str, ...]:
        return tuple(a for i, a in enumerate(self._schema[stream]) if mask >> i & 1)


@dataclass(eq=False)
class InstalledFlow:
    """A flow as the planner edits it; ``id`` None is the raw stream at its source (selectivity 1, cost 0).

    Its consumers (child flows and deliveries) all read it at the last super-peer of its path.  ``below``
    holds the subscriptions served through it, ``unions`` per attribute (bit number) the need class of
    the tuples carrying that attribute (:mod:`sharing.needs`), and ``attrs`` the attributes with one.

    It keeps the snapshots of the epoch before (``frozen``, ``subtree``) until something changes it, and
    derived values of its current predicate (``bounds``) until the predicate changes.
    """

    id: str | None
    stream: str
    parent: InstalledFlow | None
    origin: str
    path: tuple[str, ...]
    predicate: Predicate
    sel: float
    attrs: int  # bit mask over the stream's schema: the attributes some subscription below selects
    seq: int  # creation order, the last tie-breaker
    children: list[InstalledFlow] = field(default_factory=list)
    deliveries: list[ActiveSubscription] = field(default_factory=list)
    below: dict[ActiveSubscription, None] = field(default_factory=dict)  # served through it, in arrival order
    unions: dict[int, NeedUnion] = field(default_factory=dict)  # attribute bit -> its need class
    frozen: Flow | None = None
    subtree: tuple[Flow, ...] | None = None  # the frozen flows of this flow's tree, see sharing.snapshots
    bounds: BoxBounds | None = None  # of ``predicate``, refreshed lazily when the predicate changes

    @property
    def hops(self) -> int:
        return len(self.path) - 1

    @property
    def end(self) -> str:
        """The super-peer where its consumers read it."""
        return self.path[-1]

    def attribute_sel(self) -> float:
        """The sum over attributes of the selectivity of their need classes: the expected number of
        attributes a tuple of the stream takes on this flow."""
        return sum(u.sel for u in self.unions.values())

    def box_bounds(self) -> BoxBounds:
        """The bounds of the current predicate's boxes; rows are reused when the predicate only appended."""
        if self.bounds is None:
            self.bounds = BoxBounds(self.predicate)
        elif self.bounds.predicate is not self.predicate:
            self.bounds = self.bounds.widened(self.predicate)
        return self.bounds


@dataclass(eq=False)
class ActiveSubscription:
    """A subscription between its arrival and its departure, and the flow that serves it."""

    spec: SubscriptionSpec
    home: str  # its peer's super-peer
    where: Predicate
    sel: float
    select: int  # bit mask of SELECT attributes
    arrival: int  # arrival order, for re-planning a stream
    position: int  # in the scenario's subscriptions: the order of an epoch's deliveries
    flow: InstalledFlow | None = None
    delivery: Delivery | None = None  # last snapshot, valid while read from the same flow and predicate
    delivery_of: Predicate | None = None

    @property
    def stream(self) -> str:
        return self.spec.stream


def bits_of(mask: int) -> list[int]:
    """The bit numbers set in ``mask``, ascending (attributes in schema order)."""
    bits = []
    while mask:
        low = mask & -mask
        bits.append(low.bit_length() - 1)
        mask ^= low
    return bits


def holds_exactly(pred: Predicate, sel: float, target: Predicate, target_sel: float) -> bool:
    """``pred`` (known to cover ``target``) equals it, so a consumer of ``target`` needs no filter.

    A larger selectivity settles it without the (costlier) exact implication test.
    """
    if sel > target_sel * (1 + RELATIVE_SLACK) + 1e-300:
        return False
    return pred.implies(target)
