"""The report as objects: what ``report.json`` holds (docs/REPORT.md), typed, for the Python API.

:meth:`Report.of` reads the document a run returns or wrote; every figure keeps its report.json name, and
:meth:`Report.table` prints the console table.
"""

from __future__ import annotations

from dataclasses import dataclass

from reports.report import console_table
from topologies.errors import InputError, shown


@dataclass(frozen=True)
class Latency:
    """Seconds from emission to arrival at the subscriber (None without deliveries)."""

    p50: float | None
    p99: float | None
    mean: float | None

    @staticmethod
    def of(doc: dict) -> Latency:
        return Latency(doc["p50"], doc["p99"], doc["mean"])


@dataclass(frozen=True)
class LinkTraffic:
    """One link direction: ``kind`` is ``backbone`` (between super-peers) or ``access`` (a thin-peer's)."""

    source: str  # report.json's "from"
    target: str  # report.json's "to"
    bytes: int
    tuples: int
    kind: str


@dataclass(frozen=True)
class SubscriptionResult:
    id: str
    delivered: int
    expected: int
    missing: int
    extra: int
    latency: Latency
    dropped: int = 0  # copies a full link buffer dropped on the way (accounted for, not missing)
    rejected: str | None = None  # why the planner rejected it, if it did

    @property
    def exact(self) -> bool:
        if self.rejected is not None:  # refused, not served wrongly
            return self.delivered == 0 and self.extra == 0
        return self.missing == 0 and self.extra == 0


@dataclass(frozen=True)
class StrategyResult:
    """One strategy's figures: traffic, per link and per subscription, latency, savings and the bound."""

    name: str
    backbone_bytes: int
    backbone_tuples: int
    access_bytes: int
    links: tuple[LinkTraffic, ...]
    access_links: tuple[LinkTraffic, ...]
    subscriptions: dict[str, SubscriptionResult]
    latency: Latency
    saving_vs: dict[str, float | None]  # per baseline run alongside: 1 - bytes / baseline's
    vs_ideal: dict[str, float | None]  # "bytes" and "tuple_hops" over ideal's, when ideal ran

    @property
    def exact(self) -> bool:
        """Every subscription received exactly its centralized result."""
        return all(s.exact for s in self.subscriptions.values())

    @staticmethod
    def of(name: str, doc: dict) -> StrategyResult:
        def links(key: str, kind: str) -> tuple[LinkTraffic, ...]:
            return tuple(LinkTraffic(x["from"], x["to"], x["bytes"], x["tuples"], kind) for x in doc.get(key, ()))

        subscriptions = {
            s["id"]: SubscriptionResult(
                s["id"],
                s["delivered"],
                s["expected"],
                s["missing"],
                s["extra"],
                Latency.of(s["latency_s"]),
                s.get("dropped", 0),
                s.get("rejected"),
            )
            for s in doc["subscriptions"]
        }
        return StrategyResult(
            name,
            doc["backbone_bytes"],
            doc["backbone_tuples"],
            doc["access_bytes"],
            links("links", "backbone"),
            links("access_links", "access"),
            subscriptions,
            Latency.of(doc["latency_s"]),
            dict(doc.get("saving_vs", {})),
            dict(doc.get("vs_ideal", {})),
        )


@dataclass(frozen=True)
class Report:
    """A run's report: per strategy its figures, in the order run; ``doc`` is report.json's content."""

    scenario: str
    engine: str
    duration: float
    seed: int
    exact: bool
    warnings: tuple[str, ...]
    strategies: dict[str, StrategyResult]
    doc: dict

    @staticmethod
    def of(doc: dict) -> Report:
        """The report of a report.json document."""
        return Report(
            doc["scenario"],
            doc["engine"],
            doc["duration"],
            doc["seed"],
            doc["exact"],
            tuple(doc.get("warnings", ())),
            {name: StrategyResult.of(name, entry) for name, entry in doc["strategies"].items()},
            doc,
        )

    def __getitem__(self, strategy: str) -> StrategyResult:
        """The figures of ``strategy``; InputError naming the strategies the report holds for another name."""
        if not isinstance(strategy, str) or strategy not in self.strategies:
            raise InputError(f"no strategy {shown(strategy)} in this report (it has: {', '.join(self.strategies)})")
        return self.strategies[strategy]

    def table(self) -> str:
        """The console table ``run.py run`` prints."""
        return console_table(self.doc)
