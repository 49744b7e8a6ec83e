"""Disjunctive predicates: algebra, query parser, matching (QC, HSR, HCR, EM) and evaluation.

Kuntschke & Kemper, "Matching and Evaluation of Disjunctive Predicates for Data Stream Sharing"
(TUM-I0615).  The runtime shared-filter engines a super-peer runs over many subscriptions' predicates
live in :mod:`matcher.filters`, which this package does not import: loading a scenario or parsing a query
pays for no engine, no numba kernel and no reading of the machine's load.  This package imports nothing
from the other top-level packages.
"""

from matcher.aggregate import Aggregate, AggregateQuery, Window
from matcher.distributions import Choice, Distribution, Empirical, Normal, Uniform
from matcher.matching import MATCHERS, match_em, match_hcr, match_hsr, quick_check
from matcher.parser import MAX_BOXES, parse_condition, parse_query
from matcher.predicate import INF, UNBOUNDED, Box, Interval, Predicate, interval
from matcher.query import Query, QueryError
from matcher.selectivity import selectivity, volume

__all__ = [
    "INF",
    "MATCHERS",
    "MAX_BOXES",
    "UNBOUNDED",
    "Aggregate",
    "AggregateQuery",
    "Box",
    "Choice",
    "Distribution",
    "Empirical",
    "Interval",
    "Normal",
    "Predicate",
    "Query",
    "QueryError",
    "Uniform",
    "Window",
    "interval",
    "match_em",
    "match_hcr",
    "match_hsr",
    "parse_condition",
    "parse_query",
    "quick_check",
    "selectivity",
    "volume",
]
