"""Which matcher a super-peer runs over the predicates read from one input stream."""

from __future__ import annotations

from collections.abc import Sequence

from matcher.filters.adaptive import AdaptiveMultiMatcher
from matcher.filters.candidates import SCAN_FIRST_TUPLES
from matcher.filters.multi import MultiMatcher
from matcher.predicate import Predicate

ADAPTIVE_MIN_BOXES = 32
"""From this many boxes (conjuncts) a super-peer runs the adaptive matcher.  Set when the grouped filter and
ASC were numpy code, whose per-call cost made one probe cost more than the whole stream of most operators
in the shipped scenarios; kept, not re-tuned, for their numba kernels (below it ASC can be cheaper per tuple
than the serial region-bitmap kernel, which a lower threshold could exploit on long streams)."""


def matcher_for(labelled: Sequence[tuple[str, Predicate]]) -> MultiMatcher | AdaptiveMultiMatcher:
    """:class:`AdaptiveMultiMatcher` from ``ADAPTIVE_MIN_BOXES`` boxes on, :class:`MultiMatcher` below.

    Either builds its region bitmap only after its first ``SCAN_FIRST_TUPLES`` tuples (matched by a scan):
    an operator that lives for one short epoch of a plan never pays for it.
    """
    boxes = sum(len(predicate.boxes) for _, predicate in labelled)
    if boxes >= ADAPTIVE_MIN_BOXES:
        return AdaptiveMultiMatcher(labelled)
    return MultiMatcher(labelled, scan_first=SCAN_FIRST_TUPLES)
