"""The adaptive matcher's cost model: seconds per tuple of each engine at the live call size, from probe times.

Pure arithmetic over the times a probe measured (no clock, no I/O), so that it can be checked with
made-up timings.  A sliced engine's calls are fitted to ``seconds = per_call + rows * per_tuple`` from the
least time of each slice size; the whole-batch engine's prediction is the median per tuple of its batches,
as its spread is the machine's load itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Timings = Mapping[str, Mapping[int, list[float]]]
"""Per engine, per call size in rows, the seconds of each timed call."""

Fit = tuple[float, float]
"""``(per_call, per_tuple)`` seconds."""


def predict(
    timings: Timings, fits: Mapping[str, Fit], batch: int, whole: str, short_slices: float
) -> tuple[dict[str, float], dict[str, Fit]]:
    """Seconds per tuple at the live call size ``batch`` for each engine timed, and the new fits.

    Two slice sizes or more fit ``per_call`` and ``per_tuple`` (returned as the engine's new fit).  A single
    size (a screened loser) scales the engine's last fit in ``fits`` by its slice time over the time that fit
    gives for the slice: the per-call cost is most of a short slice and varies from call to call, so reading
    the slice with the old ``per_call`` alone predicts far too little.  Without a previous fit, the slice's
    time per tuple.  A prediction from slices shorter than ``batch`` is multiplied by ``short_slices``.
    The ``whole`` engine's prediction is the median time per tuple of its calls.
    """
    predicted: dict[str, float] = {}
    fitted: dict[str, Fit] = {}
    for name, by_size in timings.items():
        if not by_size:
            continue  # a whole-batch engine that met no batch wide enough in this probe
        if name == whole:
            predicted[name] = float(np.median([t / rows for rows, times in by_size.items() for t in times]))
            continue
        sizes = sorted(by_size)
        least = [min(by_size[s]) for s in sizes]
        if len(sizes) >= 2:
            per_tuple = max((least[-1] - least[0]) / (sizes[-1] - sizes[0]), 0.0)
            per_call = max(least[0] - sizes[0] * per_tuple, 0.0)
            fitted[name] = (per_call, per_tuple)
        elif name in fits:
            per_call, per_tuple = fits[name]
            scale = least[0] / max(per_call + sizes[0] * per_tuple, 1e-12)
            per_call, per_tuple = per_call * scale, per_tuple * scale
        else:
            per_call, per_tuple = 0.0, least[0] / sizes[0]
        predicted[name] = per_tuple + per_call / max(batch, 1)
        if sizes[-1] < batch:
            predicted[name] *= short_slices
    return predicted, fitted


def probe_overhead(timings: Timings, choice: str, chosen_cost: float) -> float:
    """What a probe cost beyond running the choice: its timed calls of the other engines, less the time the
    choice would have taken for the same rows at ``chosen_cost`` seconds per tuple (never below 0 a call)."""
    return sum(
        max(t - chosen_cost * rows, 0.0)
        for name, by_size in timings.items()
        if name != choice
        for rows, times in by_size.items()
        for t in times
    )
