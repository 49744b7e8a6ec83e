"""Disjunctive predicates: algebra, query parser, matching (QC, HSR, HCR, EM) and evaluation.

Seed 004 (Kuntschke & Kemper, "Matching and Evaluation of Disjunctive Predicates for Data Stream
Sharing").  This package imports nothing from the other top-level packages.
"""

from matcher.adaptive import AdaptiveMultiMatcher
from matcher.agreedy import AGreedy, PipelinedFilter
from matcher.asc import ASCMatcher
from matcher.distributions import Choice, Distribution, Empirical, Normal, Uniform
from matcher.grouped import GroupedFilter
from matcher.matching import MATCHERS, match_em, match_hcr, match_hsr, quick_check
from matcher.multi import MultiMatcher
from matcher.parser import MAX_BOXES, parse_condition, parse_query
from matcher.predicate import INF, UNBOUNDED, Box, Interval, Predicate, interval
from matcher.query import Query, QueryError
from matcher.selectivity import selectivity, volume

__all__ = [
    "INF",
    "MATCHERS",
    "MAX_BOXES",
    "UNBOUNDED",
    "AGreedy",
    "ASCMatcher",
    "AdaptiveMultiMatcher",
    "Box",
    "Choice",
    "Distribution",
    "Empirical",
    "GroupedFilter",
    "Interval",
    "MultiMatcher",
    "Normal",
    "PipelinedFilter",
    "Predicate",
    "Query",
    "QueryError",
    "Uniform",
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
