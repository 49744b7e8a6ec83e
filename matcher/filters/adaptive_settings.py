"""The tunables of the adaptive engine choice, as one frozen value that travels with the matcher."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, dataclass, fields

import numpy as np

from matcher.filters.candidates import ENGINES, WARM_ROWS


@dataclass(frozen=True)
class AdaptiveSettings:
    """How :class:`~matcher.filters.adaptive.AdaptiveMultiMatcher` probes, decides and re-probes.

    Raises ValueError for an unknown engine name, non-positive sizes or factors, or a ``chunk`` below
    ``sample``.
    """

    engines: tuple[str, ...] = ENGINES
    """The candidates, the first one the choice before any probe."""
    sample: int = 256
    """Rows of the longer probe slice (the shorter has a quarter); smaller batches are never probed."""
    repeats: int = 2
    """Probe rounds at most."""
    period: int = 250_000
    """Tuples between scheduled re-probes, doubled while re-probes confirm the choice."""
    max_backoff: int = 8
    """The most periods between scheduled re-probes, and the most re-probes a clear loser sits out."""
    drift: float = 0.15
    """How far the drop ratio (or the choice's evaluations per tuple, relatively) must move to re-probe."""
    margin: float = 0.05
    """Hysteresis: a new winner must be this fraction cheaper than the current choice."""
    eliminate: float = 1.5
    """After a round, engines more than this many times the best drop out (and become clear losers)."""
    chunk: int = 65_536
    """Rows per serial engine call at most: a batch up to this size is one call."""
    budget: float = 0.03
    """Probing may cost this fraction of the time spent matching."""
    close: float = 1.3
    """Engines within this factor of the fitted winner are timed beside it on live-size calls."""
    short_slices: float = 1.25
    """A fit from slices shorter than the live calls is scaled up by this until verified: in practice it is
    a lower bound, as an engine's working set outgrows the caches on longer calls."""
    whole_samples: int = 3
    """Whole batches timed before the whole-batch engine may win on their median (under load a single batch
    may catch both cores free)."""
    slower: float = 1.5
    """A choice whose live batches cost this much more than measured, on data of unchanged statistics
    (the machine's load changed), is probed again."""
    statistics_window: int = 32_768
    """Tuples over which the drift statistics are averaged before they are compared."""
    verify_rows: int = 4_096
    """Rows of a verification call at most: a losing engine's call costs the difference on these rows."""

    def __post_init__(self) -> None:
        for field in fields(self)[1:]:  # as numbers of the defaults' types (a count given as 64.0 is 64)
            object.__setattr__(self, field.name, type(field.default)(getattr(self, field.name)))
        object.__setattr__(self, "engines", tuple(self.engines))
        unknown = [e for e in self.engines if e not in ENGINES]
        if unknown or not self.engines:
            raise ValueError(f"engines {list(self.engines)}: expected names from {', '.join(ENGINES)}")
        if self.sample < 4 * WARM_ROWS or min(self.repeats, self.period, self.max_backoff) <= 0:
            raise ValueError(
                f"sample {self.sample}, repeats {self.repeats}, period {self.period}, max_backoff {self.max_backoff}:"
                f" sample must be at least {4 * WARM_ROWS}, the others positive"
            )
        if not self.budget >= 0:
            raise ValueError(f"budget {self.budget}: must be a fraction of the matching time, 0 or more")
        if self.chunk < self.sample:
            raise ValueError(
                f"chunk {self.chunk}: must be at least sample {self.sample} (probe slices are engine calls)"
            )
        positive = ("close", "short_slices", "whole_samples", "slower", "statistics_window", "verify_rows")
        bad = [f"{name} {getattr(self, name)}" for name in positive if not getattr(self, name) > 0]
        if bad:
            raise ValueError(f"{', '.join(bad)}: must be positive")

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain numpy arrays, from which :meth:`from_arrays` rebuilds equal settings in another process."""
        values = astuple(self)
        return {
            "adaptive_engines": np.array(values[0], dtype=object),
            "adaptive_settings": np.array(values[1:], dtype=object),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AdaptiveSettings:
        engines = tuple(str(e) for e in arrays["adaptive_engines"])
        return cls(engines, *arrays["adaptive_settings"])
