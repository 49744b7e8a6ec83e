"""Multi-predicate batch matching: for each tuple, every labelled predicate it satisfies.

A super-peer evaluates, per incoming batch, the predicates of all the flows and deliveries that read that
batch.  ``MultiMatcher`` compiles the labelled predicates into flat arrays (one row per box) and evaluates
them with numpy, one vectorised comparison per constrained bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from matcher.predicate import Predicate


class MultiMatcher:
    """Labelled predicates evaluated together over columns of tuples.

    ``match(columns)`` returns a bool array of shape ``(n_tuples, n_labels)``.  ``to_arrays()`` gives plain
    numpy arrays from which ``from_arrays`` rebuilds an equal matcher in another process.
    """

    def __init__(self, labelled: Sequence[tuple[str, Predicate]]):
        self.labels: tuple[str, ...] = tuple(label for label, _ in labelled)
        self.dims: tuple[str, ...] = tuple(sorted({d for _, p in labelled for d in p.dims}))
        rows = [(j, box) for j, (_, p) in enumerate(labelled) for box in p.boxes]
        n, d = len(rows), len(self.dims)
        self.owner = np.array([j for j, _ in rows], dtype=np.int64)
        self.lo = np.full((n, d), -np.inf)
        self.hi = np.full((n, d), np.inf)
        self.lo_closed = np.zeros((n, d), dtype=bool)
        self.hi_closed = np.zeros((n, d), dtype=bool)
        index = {dim: k for k, dim in enumerate(self.dims)}
        for r, (_, box) in enumerate(rows):
            for dim, iv in box.items():
                k = index[dim]
                self.lo[r, k], self.hi[r, k] = iv.lo, iv.hi
                self.lo_closed[r, k], self.hi_closed[r, k] = iv.lo_closed, iv.hi_closed

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "labels": np.array(self.labels, dtype=object),
            "dims": np.array(self.dims, dtype=object),
            "owner": self.owner,
            "lo": self.lo,
            "hi": self.hi,
            "lo_closed": self.lo_closed,
            "hi_closed": self.hi_closed,
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> MultiMatcher:
        self = cls.__new__(cls)
        self.labels = tuple(str(x) for x in arrays["labels"])
        self.dims = tuple(str(x) for x in arrays["dims"])
        for key in ("owner", "lo", "hi", "lo_closed", "hi_closed"):
            setattr(self, key, np.asarray(arrays[key]))
        return self

    def match(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(columns.values()))) if columns else 0
        out = np.zeros((n, len(self.labels)), dtype=bool)
        for r in range(len(self.owner)):
            inside = np.ones(n, dtype=bool)
            for k, dim in enumerate(self.dims):
                values = columns[dim]
                lo, hi = self.lo[r, k], self.hi[r, k]
                if lo != -np.inf:
                    inside &= values >= lo if self.lo_closed[r, k] else values > lo
                if hi != np.inf:
                    inside &= values <= hi if self.hi_closed[r, k] else values < hi
            out[:, self.owner[r]] |= inside
        return out
