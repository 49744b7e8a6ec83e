"""Disjunctive predicates: algebra, query parser, matching (QC, HSR, HCR, EM) and evaluation.

Seed 004 (Kuntschke & Kemper, "Matching and Evaluation of Disjunctive Predicates for Data Stream
Sharing").  This package imports nothing from the other top-level packages.
"""

from matcher.distributions import Choice, Distribution, Empirical, Normal, Uniform
from matcher.multi import MultiMatcher
from matcher.predicate import INF, UNBOUNDED, Box, Interval, Predicate, interval
from matcher.query import Query, QueryError

__all__ = [
    "INF",
    "UNBOUNDED",
    "Box",
    "Choice",
    "Distribution",
    "Empirical",
    "Interval",
    "MultiMatcher",
    "Normal",
    "Predicate",
    "Query",
    "QueryError",
    "Uniform",
    "interval",
]
