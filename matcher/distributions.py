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


def _integer_range(iv: Interval) -> tuple[float, float]:
    """The smallest and largest integer in ``iv`` (infinite for an unbounded end; first > last if none)."""
    if iv.lo == -math.inf:
        first = -math.inf
    else:
        first = math.ceil(iv.lo)
        if first == iv.lo and not iv.lo_closed:
            first += 1
    if iv.hi == math.inf:
        last = math.inf
    else:
        last = math.floor(iv.hi)
        if last == iv.hi and not iv.hi_closed:
            last -= 1
    return first, last


def _check_finite(name: str, *values: float) -> None:
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name}: parameters must be finite numbers, got {values}")


@dataclass(frozen=True)
class Uniform(Distribution):
    """Uniform on ``[lo, hi]``; with ``integer`` uniform on the integers of ``[lo, hi]``."""

    lo: float
    hi: float
    integer: bool = False

    def __post_init__(self):
        _check_finite("uniform", self.lo, self.hi)
        if self.hi < self.lo:
            raise ValueError(f"uniform: lo {self.lo} is above hi {self.hi}")
        if self.integer and math.ceil(self.lo) > math.floor(self.hi):
            raise ValueError(f"uniform: no integer in [{self.lo}, {self.hi}]")

    def prob(self, iv: Interval) -> float:
        if iv.is_empty():
            return 0.0
        if self.integer:
            lo, hi = math.ceil(self.lo), math.floor(self.hi)
            first, last = _integer_range(iv)
            inside = min(last, hi) - max(first, lo) + 1
            return max(0, inside) / (hi - lo + 1)
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

    def __post_init__(self):
        _check_finite("normal", self.mu, self.sigma)
        if self.sigma <= 0:
            raise ValueError(f"normal: sigma must be positive, got {self.sigma}")

    def _mass(self, lo: float, hi: float) -> float:
        """P(lo < X < hi), computed in the tail where it is small so that no digits cancel."""
        scale = self.sigma * math.sqrt(2.0)
        if lo >= self.mu:  # upper tail: difference of survival functions
            return max(0.0, 0.5 * (math.erfc((lo - self.mu) / scale) - math.erfc((hi - self.mu) / scale)))
        if hi <= self.mu:  # lower tail: difference of distribution functions
            return max(0.0, 0.5 * (math.erfc((self.mu - hi) / scale) - math.erfc((self.mu - lo) / scale)))
        # straddles the mean: one minus both tails
        return max(0.0, 1.0 - 0.5 * (math.erfc((self.mu - lo) / scale) + math.erfc((hi - self.mu) / scale)))

    def prob(self, iv: Interval) -> float:
        if iv.is_empty():
            return 0.0
        if self.integer:  # P(round(X) = k) = P(k - 0.5 <= X < k + 0.5): count the integers of iv
            first, last = _integer_range(iv)
            return self._mass(first - 0.5, last + 0.5) if first <= last else 0.0
        return self._mass(iv.lo, iv.hi)

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

    def __post_init__(self):
        object.__setattr__(self, "values", tuple(float(v) for v in self.values))
        if not self.values:
            raise ValueError("choice: no values")
        _check_finite("choice", *self.values)
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
            if len(self.weights) != len(self.values):
                raise ValueError(f"choice: {len(self.weights)} weights for {len(self.values)} values")
            _check_finite("choice", *self.weights)
            if min(self.weights) < 0 or math.fsum(self.weights) <= 0:
                raise ValueError(f"choice: weights must be non-negative with a positive sum, got {self.weights}")

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

    values: np.ndarray  # sorted float64 (sorted on construction)

    def __post_init__(self):
        values = np.sort(np.asarray(self.values, dtype=np.float64).ravel())
        if len(values) == 0:
            raise ValueError("empirical: no values")
        if np.isnan(values).any():
            raise ValueError("empirical: values must not be NaN")
        object.__setattr__(self, "values", values)

    @staticmethod
    def of(values) -> Empirical:
        return Empirical(values)

    def prob(self, iv: Interval) -> float:
        n = len(self.values)
        if iv.is_empty():
            return 0.0
        lo = np.searchsorted(self.values, iv.lo, side="left" if iv.lo_closed else "right")
        hi = np.searchsorted(self.values, iv.hi, side="right" if iv.hi_closed else "left")
        return max(0, int(hi) - int(lo)) / n

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.values[rng.integers(0, len(self.values), size=n)]

    def to_json(self) -> dict:
        return {"empirical": len(self.values)}
