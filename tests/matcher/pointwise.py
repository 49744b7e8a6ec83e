"""The plain pointwise membership test the matcher's tests compare against (one comparison per bound)."""

from __future__ import annotations

import numpy as np

from matcher import Predicate


def members(pred: Predicate, columns) -> np.ndarray:
    """Which rows of ``columns`` (name -> array) satisfy ``pred``."""
    result = np.zeros(len(next(iter(columns.values()))), bool)
    for box in pred.boxes:
        inside = np.ones_like(result)
        for dim, iv in box.items():
            x = columns[dim]
            inside &= ((x > iv.lo) | ((x == iv.lo) & iv.lo_closed)) & ((x < iv.hi) | ((x == iv.hi) & iv.hi_closed))
        result |= inside
    return result
