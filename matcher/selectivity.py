"""Exact selectivity and data-space volume of a predicate.

A predicate's boxes may overlap, so their probabilities do not simply add.  ``Predicate.disjoint()``
splits them into pairwise disjoint boxes (EM's Compare Dimensions split, exact about open and closed
ends); with independent attributes the probability of one box is the product of its intervals'
probabilities, and the probability of the union is the sum over the disjoint boxes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from matcher.distributions import Distribution, Uniform
from matcher.predicate import Predicate


def selectivity(pred: Predicate, dists: Mapping[str, Distribution]) -> float:
    """P(a tuple satisfies ``pred``) when attribute ``d`` follows ``dists[d]``, attributes independent.

    Attributes ``pred`` does not constrain need no distribution.  Raises KeyError naming an attribute
    that ``pred`` constrains but ``dists`` lacks.
    """
    missing = [d for d in pred.dims if d not in dists]
    if missing:
        raise KeyError(f"no distribution for attribute {missing[0]!r} (known: {', '.join(sorted(dists)) or 'none'})")
    terms = []
    for box in pred.disjoint().boxes:
        p = 1.0
        for dim, iv in box.items():
            p *= dists[dim].prob(iv)
            if p == 0.0:
                break
        terms.append(p)
    return min(1.0, math.fsum(terms))


def volume(pred: Predicate, bounds: Mapping[str, tuple[float, float]]) -> float:
    """The fraction of the data space ``prod_d [lo_d, hi_d]`` that ``pred`` covers.

    Raises KeyError naming an attribute ``pred`` constrains without bounds, ValueError for bounds that are
    not finite with ``lo < hi``.
    """
    spaces = {}
    for dim, (lo, hi) in bounds.items():
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds of {dim!r} must be finite with lo < hi, got [{lo}, {hi}]")
        spaces[dim] = Uniform(lo, hi)
    return selectivity(pred, spaces)
