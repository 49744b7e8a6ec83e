"""The FIFO link queues of a whole run, solved window by window and link direction by link direction.

The simulator's model (docs/ARCHITECTURE.md): time is cut into windows of emission time.  A link direction
serves the tuples of window ``w`` after those of window ``w - 1``; within a window, in exact FIFO order of
arrival (ties by channel number, then tuple index); a tuple of ``b`` bytes leaves the sender at
``max(arrival, link free) + 8 b / bandwidth`` and reaches the far end ``latency`` seconds later.

**Dependency order.**  A tuple's arrival at a link is its departure from the link before on its path (plus
that link's latency), so links are solved in an order where every link comes after the links feeding it:
the *dependency graph* has an edge ``a -> b`` when some channel crosses ``b`` right after ``a`` (along its
route, or at the node where it is read from its parent).  The graph is built once for the run from the
channels' routes.  Each link direction gets a *level* (the longest chain of links feeding it), and a
window is solved level by level: all links of one level at once, in arrays.

**Cycles.**  Streams from different sources sharing links around a ring can make the graph cyclic.  The
edges closing a cycle (the back edges of a depth-first search over sorted link ids) are cut: a tuple that
crossed ``k`` of them is in *round* ``k``.  Round 0 is served as above; round ``k > 0`` at a link is served
after the window's earlier rounds there, in the gaps they left: a tuple starts at its arrival unless the
link is busy then, and never delays a tuple already served (where tuples do not contend, that is the
per-tuple event simulation's time).  So the solve is: for each round, for each level, one sort and one
pass of the FIFO kernel.  Counts and deliveries never depend on any of this: only times do.

The same arrays (tuple, channel, link, round, level, arrival) are what a distributed engine partitions by
link direction: the solve of one level needs only the departures of lower levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numba import njit

from network.links import gap_departures
from network.meter import Direction, TrafficMeter
from topologies.errors import EmulatorError


@dataclass(frozen=True)
class Route:
    """A channel as the queues see it: the link directions it crosses, and where its tuples come from
    (``parent == -1``: emitted at the first node; else read at position ``tap`` of channel ``parent``'s
    route).  ``sink`` is the subscription receiving it at the end (``attrs``: what it receives)."""

    hops: tuple[Direction, ...]
    parent: int
    tap: int
    sink: str | None = None
    attrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    """A channel's tuples in one window: indices (ascending), emission times, their positions in the parent
    channel's block of the same window (``None`` for an upload), and wire bytes."""

    indices: np.ndarray
    emitted: np.ndarray
    parent_positions: np.ndarray | None
    wire: np.ndarray


@njit(cache=True)
def fifo_serve(link: np.ndarray, arrival: np.ndarray, service: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Departures of tuples sorted by (link, serving order): ``d = max(arrival, previous d) + service`` from
    ``busy[link]`` on; ``busy`` is updated to each link's last departure."""
    out = np.empty(len(arrival))
    current = -1
    free = 0.0
    for i in range(len(arrival)):
        if link[i] != current:
            if current >= 0:
                busy[current] = free
            current = link[i]
            free = busy[current]
        start = arrival[i] if arrival[i] > free else free
        free = start + service[i]
        out[i] = free
    if current >= 0:
        busy[current] = free
    return out


class Queues:
    """Every link direction's FIFO over the run, for the channels ``routes`` (numbered by position, each
    parent before its children); :meth:`serve` solves one window and records it in ``meter``.

    ``links`` maps every direction a channel may cross (backbone and access) to (bandwidth bit/s, latency s).
    Raises EmulatorError naming the direction when a channel crosses one that is not a link.
    """

    def __init__(self, links: Mapping[Direction, tuple[float, float]], routes: Sequence[Route], meter: TrafficMeter):
        self.directions = sorted(links)
        ids = {d: i for i, d in enumerate(self.directions)}
        self.bandwidth = np.array([links[d][0] for d in self.directions], dtype=np.float64)
        self.latency = np.array([links[d][1] for d in self.directions], dtype=np.float64)
        self.meter = meter
        self.routes = list(routes)
        self.busy = np.zeros(len(self.directions))
        n = len(self.routes)
        self.hop_start = np.zeros(n + 1, dtype=np.int64)
        hop_link: list[int] = []
        inbound = np.full(n, -1, dtype=np.int64)  # the link a channel's tuples reach its first node over
        edges: set[tuple[int, int]] = set()
        for c, route in enumerate(self.routes):
            try:
                links_c = [ids[d] for d in route.hops]
            except KeyError as err:
                a, b = err.args[0]
                raise EmulatorError(f"a channel crosses {a} -> {b}, which is not a link") from None
            if route.parent >= 0:
                p = route.parent
                inbound[c] = hop_link[self.hop_start[p] + route.tap - 1] if route.tap >= 1 else inbound[p]
            chain = [int(inbound[c]), *links_c]
            edges.update((a, b) for a, b in pairwise(chain) if a >= 0)
            hop_link.extend(links_c)
            self.hop_start[c + 1] = len(hop_link)
        self.hop_link = np.array(hop_link, dtype=np.int64)
        self.n_hops = np.diff(self.hop_start)
        back = cycle_closing_edges(edges)
        self.level = _levels(len(self.directions), edges - back)
        # the round of each (channel, hop): cycle-closing edges crossed up to it
        hop_round = np.zeros(len(hop_link), dtype=np.int64)
        round_in = np.zeros(n, dtype=np.int64)
        for c, route in enumerate(self.routes):
            if route.parent >= 0:
                p = route.parent
                round_in[c] = hop_round[self.hop_start[p] + route.tap - 1] if route.tap >= 1 else round_in[p]
            previous, r = int(inbound[c]), int(round_in[c])
            for h in range(self.hop_start[c], self.hop_start[c + 1]):
                r += (previous, int(self.hop_link[h])) in back
                hop_round[h] = r
                previous = int(self.hop_link[h])
        self.hop_round = hop_round
        self.levels = int(self.level.max()) + 1 if len(self.level) else 1

    def serve(self, window: int, blocks: Mapping[int, Block]) -> None:
        """Move the window's tuples (per channel, ``blocks[channel]``; a parent's block present whenever a
        child's is) over their links and record traffic and deliveries in the meter."""
        chans = np.array(sorted(c for c, b in blocks.items() if len(b.indices)), dtype=np.int64)
        if not len(chans):
            return
        slot = {int(c): i for i, c in enumerate(chans)}
        count = np.array([len(blocks[c].indices) for c in chans.tolist()], dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(count)])  # each channel's tuples in the flat arrays
        indices = np.concatenate([blocks[c].indices for c in chans.tolist()])
        emitted = np.concatenate([blocks[c].emitted for c in chans.tolist()])
        wire = np.concatenate([blocks[c].wire for c in chans.tolist()])
        rows_of = count * self.n_hops[chans]
        base = np.concatenate([[0], np.cumsum(rows_of)])  # channel i's row (hop k, tuple j): base + k n + j
        # per tuple, the row whose departure (plus its link's latency) is the tuple's arrival at the
        # channel's first node; -1: the emission time
        start = np.full(len(indices), -1, dtype=np.int64)
        for i, c in enumerate(chans.tolist()):
            route = self.routes[c]
            if route.parent < 0:
                continue
            p = slot.get(route.parent)
            positions = blocks[c].parent_positions
            if p is None or positions is None:
                raise EmulatorError(f"channel {c} has tuples in window {window} but its parent has none")
            if route.tap >= 1:
                start[first[i] : first[i + 1]] = base[p] + (route.tap - 1) * count[p] + positions
            else:
                start[first[i] : first[i + 1]] = start[first[p] + positions]
        total = int(base[-1])
        row_slot = np.repeat(np.arange(len(chans)), rows_of)
        within = np.arange(total) - base[row_slot]
        n_row = count[row_slot]
        hop = within // n_row
        tuple_of = first[row_slot] + (within - hop * n_row)
        hop_index = self.hop_start[chans][row_slot] + hop
        link = self.hop_link[hop_index]
        source = np.where(hop == 0, start[tuple_of], np.arange(total) - n_row)
        rounds = self.hop_round[hop_index]
        departures = np.empty(total)
        group = rounds * self.levels + self.level[link]
        order = np.argsort(group, kind="stable")
        bounds = np.flatnonzero(np.diff(group[order])) + 1
        later = np.unique(link[rounds > 0]) if rounds.any() else np.zeros(0, np.int64)
        window_busy = self.busy.copy() if len(later) else None
        served: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {int(k): [] for k in later}
        for rows in np.split(order, bounds):
            src = source[rows]
            safe = np.maximum(src, 0)
            arrival = np.where(src >= 0, departures[safe] + self.latency[link[safe]], emitted[tuple_of[rows]])
            lanes = chans[row_slot[rows]]
            sort = np.lexsort((indices[tuple_of[rows]], lanes, arrival, link[rows]))
            rows, arrival = rows[sort], arrival[sort]
            links = link[rows]
            service = wire[tuple_of[rows]] * 8.0 / self.bandwidth[links]
            if rounds[rows[0]] == 0:
                out = fifo_serve(links, arrival, service, self.busy)
            else:
                out = self._gaps(links, arrival, service, window_busy, served)
            departures[rows] = out
            if served:
                for k in np.intersect1d(np.unique(links), later).tolist():
                    at = links == k
                    served[k].append((out[at] - service[at], out[at]))
        self.meter.cross_links(self.directions, link, wire[tuple_of], departures)
        for i, c in enumerate(chans.tolist()):
            route = self.routes[c]
            if route.sink is None:
                continue
            rows = np.arange(base[i], base[i] + count[i])  # a delivery crosses one access link
            arrival = departures[rows] + self.latency[link[rows]]
            self.meter.deliver(
                route.sink,
                route.attrs,
                (window, c),
                indices[first[i] : first[i + 1]],
                arrival - emitted[first[i] : first[i + 1]],
            )

    def _gaps(self, links, arrival, service, window_busy, served) -> np.ndarray:
        """A later round: per link, in the gaps the window's earlier rounds left there."""
        out = np.empty(len(arrival))
        cuts = np.flatnonzero(np.diff(links)) + 1
        for part in np.split(np.arange(len(links)), cuts):
            k = int(links[part[0]])
            intervals = served[k]
            if intervals:
                starts = np.concatenate([s for s, _ in intervals])
                ends = np.concatenate([e for _, e in intervals])
                by_start = np.argsort(starts, kind="stable")
                starts, ends = starts[by_start], ends[by_start]
            else:
                starts = ends = np.zeros(0)
            out[part] = gap_departures(arrival[part], service[part], float(window_busy[k]), starts, ends)
            self.busy[k] = max(self.busy[k], float(out[part].max()))
        return out


def _levels(n: int, edges: set[tuple[int, int]]) -> np.ndarray:
    """Per node of an acyclic graph, the length of the longest path reaching it."""
    successors: dict[int, list[int]] = {}
    indegree = np.zeros(n, dtype=np.int64)
    for a, b in edges:
        successors.setdefault(a, []).append(b)
        indegree[b] += 1
    level = np.zeros(n, dtype=np.int64)
    ready = list(np.flatnonzero(indegree == 0))
    while ready:
        a = int(ready.pop())
        for b in successors.get(a, ()):
            level[b] = max(level[b], level[a] + 1)
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    if indegree.any():
        raise AssertionError("the dependency graph without its cycle-closing edges is acyclic")
    return level


def cycle_closing_edges(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The back edges of a depth-first search over the nodes (sorted, so deterministic)."""
    succ: dict[int, list[int]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    for targets in succ.values():
        targets.sort()
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    back: set[tuple[int, int]] = set()
    for root in sorted(succ):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(succ.get(root, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ.get(nxt, ()))))
    return back
