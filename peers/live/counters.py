"""What a live node counts: messages, tuples and emulated bytes per data topic, in and out.

Backbone and access traffic are counted by the RECEIVER of each topic (what actually crossed the emulated
link); senders count messages only, so the coordinator can tell when nothing is in flight any more
(sent == received on every topic, twice in a row) and, after a failure, how much was lost.
"""

from __future__ import annotations

import numpy as np

from network.meter import MAX_TIMELINE_BINS


class Counters:
    def __init__(self, bin_s: float):
        self.bin_s = bin_s
        self.received: dict[str, list[int]] = {}  # topic -> [messages, tuples, bytes]
        self.sent: dict[str, int] = {}  # topic -> messages
        self.bins: dict[str, np.ndarray] = {}  # topic -> bytes per bin of emulated arrival time
        self.duplicates = 0

    def count_received(
        self, topic: str, tuples: int, wire_bytes: int, arrival: float, departures: np.ndarray | None = None,
        sizes: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        """One message of ``tuples`` tuples and ``wire_bytes`` bytes, in the timeline bin of ``arrival`` (emulated
        seconds), or with ``departures`` and ``sizes``, each tuple's bytes in the bin of its departure from the
        sender (the simulator's timeline)."""
        entry = self.received.setdefault(topic, [0, 0, 0])
        entry[0] += 1
        entry[1] += tuples
        entry[2] += wire_bytes
        if departures is None:
            departures, sizes = np.array([arrival]), np.array([wire_bytes])
        if not len(departures):
            return
        b = np.maximum(0, np.floor(departures / self.bin_s)).astype(np.int64)
        b = np.minimum(b, MAX_TIMELINE_BINS - 1)
        bins = self.bins.get(topic)
        top = int(b.max())
        if bins is None or len(bins) <= top:
            grown = np.zeros(top + 1, dtype=np.int64)
            if bins is not None:
                grown[: len(bins)] = bins
            self.bins[topic] = bins = grown
        np.add.at(bins, b, np.asarray(sizes, dtype=np.int64))

    def count_sent(self, topic: str) -> None:
        self.sent[topic] = self.sent.get(topic, 0) + 1

    def to_json(self) -> dict:
        return {
            "received": {t: list(v) for t, v in sorted(self.received.items())},
            "sent": dict(sorted(self.sent.items())),
            "bins": {t: b.tolist() for t, b in sorted(self.bins.items())},
            "duplicates": self.duplicates,
        }
