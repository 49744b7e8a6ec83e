"""Per-attribute value distributions: exact probabilities of intervals, and seeded sampling.

The planner's cost model multiplies these per dimension over a predicate's disjoint decomposition
(attributes are independent), which gives the exact selectivity of a predicate.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from matcher.predicate import Interval


class Distribution(ABC):
    """A distribution of one attribute's values."""

    @abstractmethod
    def prob(self, iv: Interval) -> float:
        """P(value in iv), exact up to float rounding."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` float64 values drawn with ``rng``."""

    @abstractmethod
    def to_json(self) -> dict:
        """The scenario-file form, e.g. ``{"uniform": [0, 360]}``."""


def _integers_in(iv: Interval, lo: float, hi: float) -> int:
    """How many integers lie in ``iv`` and in ``[lo, hi]``."""
    first = math.ceil(max(iv.lo, lo))
    if iv.lo > lo and first == iv.lo and not iv.lo_closed:
        first += 1
    last = math.floor(min(iv.hi, hi))
    if iv.hi < hi and last == iv.hi and not iv.hi_closed:
        last -= 1
    return max(0, last - first + 1)


@dataclass(frozen=True)
class Uniform(Distribution):
    """Uniform on ``[lo, hi]``; with ``integer`` uniform on the integers of ``[lo, hi]``."""

    lo: float
    hi: float
    integer: bool = False

    def prob(self, iv: Interval) -> float:
        if self.integer:
            total = _integers_in(Interval(-math.inf, math.inf), self.lo, self.hi)
            return _integers_in(iv, self.lo, self.hi) / total if total else 0.0
        if self.hi == self.lo:
            return 1.0 if iv.contains_value(self.lo) else 0.0
        width = min(iv.hi, self.hi) - max(iv.lo, self.lo)
        return max(0.0, width) / (self.hi - self.lo)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.integer:
            return rng.integers(math.ceil(self.lo), math.floor(self.hi) + 1, size=n).astype(np.float64)
        return rng.uniform(self.lo, self.hi, size=n)

    def to_json(self) -> dict:
        return {"uniform": [self.lo, self.hi]}


@dataclass(frozen=True)
class Normal(Distribution):
    """Normal with mean ``mu`` and standard deviation ``sigma``; with ``integer`` rounded to integers."""

    mu: float
    sigma: float
    integer: bool = False

    def _cdf(self, x: float) -> float:
        if x == math.inf:
            return 1.0
        if x == -math.inf:
            return 0.0
        return 0.5 * (1.0 + math.erf((x - self.mu) / (self.sigma * math.sqrt(2.0))))

    def prob(self, iv: Interval) -> float:
        if iv.is_empty():
            return 0.0
        if self.integer:  # P(round(X) = k) = P(k - 0.5 <= X < k + 0.5): count the integers of iv
            first = math.ceil(iv.lo) if iv.lo_closed or not float(iv.lo).is_integer() else iv.lo + 1
            last = math.floor(iv.hi) if iv.hi_closed or not float(iv.hi).is_integer() else iv.hi - 1
            if first > last:
                return 0.0
            return max(0.0, self._cdf(last + 0.5) - self._cdf(first - 0.5))
        return max(0.0, self._cdf(iv.hi) - self._cdf(iv.lo))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = rng.normal(self.mu, self.sigma, size=n)
        # np.rint rounds half to even; floor(x + 0.5) matches prob()'s [k - 0.5, k + 0.5) cells
        return np.floor(values + 0.5) if self.integer else values

    def to_json(self) -> dict:
        return {"normal": [self.mu, self.sigma]}


@dataclass(frozen=True)
class Choice(Distribution):
    """One of ``values``, with probabilities ``weights`` (uniform when not given)."""

    values: tuple[float, ...]
    weights: tuple[float, ...] | None = None

    def _probs(self) -> tuple[float, ...]:
        if self.weights is None:
            return tuple(1.0 / len(self.values) for _ in self.values)
        total = math.fsum(self.weights)
        return tuple(w / total for w in self.weights)

    def prob(self, iv: Interval) -> float:
        return math.fsum(p for v, p in zip(self.values, self._probs(), strict=True) if iv.contains_value(v))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        idx = rng.choice(len(self.values), size=n, p=np.asarray(self._probs()))
        return np.asarray(self.values, dtype=np.float64)[idx]

    def to_json(self) -> dict:
        if self.weights is None:
            return {"choice": list(self.values)}
        return {"choice": {"values": list(self.values), "weights": list(self.weights)}}


@dataclass(frozen=True, eq=False)
class Empirical(Distribution):
    """The distribution of a finite sample (e.g. a replayed CSV column); sampling draws with replacement."""

    values: np.ndarray  # sorted float64

    @staticmethod
    def of(values) -> Empirical:
        return Empirical(np.sort(np.asarray(values, dtype=np.float64)))

    def prob(self, iv: Interval) -> float:
        n = len(self.values)
        if n == 0 or iv.is_empty():
            return 0.0
        lo = np.searchsorted(self.values, iv.lo, side="left" if iv.lo_closed else "right")
        hi = np.searchsorted(self.values, iv.hi, side="right" if iv.hi_closed else "left")
        return max(0, int(hi) - int(lo)) / n

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.values[rng.integers(0, len(self.values), size=n)]

    def to_json(self) -> dict:
        return {"empirical": len(self.values)}
