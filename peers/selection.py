"""Every reader of a window in one compiled pass: which tuples each channel carries and what they weigh.

:class:`SelectorTable` turns the readers of a whole run (each a :class:`~peers.superpeer.Selector`, or a
stand-in holding the tuples a channel got elsewhere) into flat arrays once; :func:`select_window` then
walks a window's phases in channel order inside one numba kernel, so the cost of a window is the tuples it
moves, not a Python call per reader.  A parent channel precedes its children, so when a phase is reached
its parent's block for the window is complete: the phase keeps, of the parent's tuples emitted within the
phase's interval, those its reader selects.

Readers come in three kinds, ``kind[s]``:

- ``BOXES``: the reader's predicate as boxes over the stream's attributes (NaN lies in no box), a fixed
  wire width, or for a ``trim`` reader a width made of the attributes of the ``trim`` entries each tuple
  satisfies (each entry its own boxes);
- ``SET``: a stand-in that keeps exactly the tuple indices it holds (sorted, each with its wire bytes),
  and fails the window if any of them is not among its input's tuples of the phase;
- uploads (no reader, ``-1``): every tuple of the stream, at the full upload width.

The plain reference is :meth:`peers.superpeer.Selector.pick`, one reader over the rows asked about (tests
compare the two); both test boxes with :func:`in_boxes`, which the end-to-end tests check against a plain
numpy evaluation of each subscription.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numba import njit

BOXES, SET = 0, 1


class SelectorTable:
    """The readers of a run as arrays (register each with :meth:`add`, which returns its number).

    ``attributes[stream]`` is the order of a stream's attributes in the window values :func:`select_window`
    gets; a box on an attribute the stream lacks never holds (the timetable's checks reject such a plan
    before any window)."""

    def __init__(self, attributes: Mapping[str, Sequence[str]]):
        self.position = {s: {a: k for k, a in enumerate(names)} for s, names in attributes.items()}
        self._numbers: dict[int, int] = {}
        self._keep: list[object] = []  # the registered objects, so their ids stay theirs
        self.kind: list[int] = []
        self.boxes_at: list[int] = []  # per reader: its boxes (BOXES) or its tuples (SET) from ... to
        self.boxes_end: list[int] = []
        self.width: list[int] = []  # wire bytes of each tuple kept (BOXES without trim entries)
        self.trim_at: list[int] = []  # its trim entries from ... to (none: equal)
        self.trim_end: list[int] = []
        self.entry_boxes: list[tuple[int, int]] = []  # per trim entry: its boxes
        self.entry_attrs: list[tuple[int, int]] = []  # per trim entry: its attributes in ``attrs``
        self.attrs: list[int] = []
        self._pos: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self._lo_closed: list[np.ndarray] = []
        self._hi_closed: list[np.ndarray] = []
        self._set_indices: list[np.ndarray] = []
        self._set_wire: list[np.ndarray] = []
        self._boxes = 0
        self._ranges: dict[tuple[int, str], tuple[object, int, int]] = {}  # (id(scan), stream) -> (scan, at, end)
        self._set_size = 0
        self._frozen: tuple | None = None

    def add(self, selector, stream: str) -> int:
        """The number of ``selector`` (a Selector, or a stand-in with ``indices``/``wire`` arrays)."""
        number = self._numbers.get(id(selector))
        if number is not None:
            return number
        number = self._numbers[id(selector)] = len(self.kind)
        self._keep.append(selector)
        self._frozen = None
        if hasattr(selector, "indices"):
            self.kind.append(SET)
            self.boxes_at.append(self._set_size)
            self._set_size += len(selector.indices)
            self.boxes_end.append(self._set_size)
            self._set_indices.append(np.asarray(selector.indices, dtype=np.int64))
            self._set_wire.append(np.asarray(selector.wire, dtype=np.int64))
            self.width.append(0)
            self.trim_at.append(len(self.entry_boxes))
            self.trim_end.append(len(self.entry_boxes))
            return number
        self.kind.append(BOXES)
        at, end = self._add_boxes(selector._keep, stream)
        self.boxes_at.append(at)
        self.boxes_end.append(end)
        self.width.append(selector.width)
        self.trim_at.append(len(self.entry_boxes))
        if selector._trim is not None:
            scans, carries = selector._trim
            for scan, row in zip(scans, carries.tolist(), strict=True):
                self.entry_boxes.append(self._add_boxes(scan, stream))
                first = len(self.attrs)
                self.attrs.extend(k for k, carried in enumerate(row) if carried)
                self.entry_attrs.append((first, len(self.attrs)))
        self.trim_end.append(len(self.entry_boxes))
        return number

    def _add_boxes(self, scan, stream: str) -> tuple[int, int]:
        """Where ``scan``'s boxes (a :class:`~peers.superpeer._BoxScan`) are in the table, added once per
        scan and stream (readers of one predicate share their scan)."""
        hit = self._ranges.get((id(scan), stream))
        if hit is None:
            at = self._boxes
            hit = self._ranges[(id(scan), stream)] = (scan, at, self._append_boxes(scan, stream))
        return hit[1], hit[2]

    def _append_boxes(self, scan, stream: str) -> int:
        if scan.everything:  # one box constraining nothing
            shape = (1, 1)
            pos = np.full(shape, -1, np.int64)
            lo, hi = np.full(shape, -np.inf), np.full(shape, np.inf)
            closed = np.zeros(shape, np.bool_)
            self._append(pos, lo, hi, closed, closed)
            return self._boxes
        index = self.position[stream]
        # an attribute the stream lacks gets a position past its attributes: the box never holds
        self._append(scan.positions(index, len(index)), scan.lo, scan.hi, scan.lo_closed, scan.hi_closed)
        return self._boxes

    def _append(self, pos, lo, hi, lo_closed, hi_closed) -> None:
        self._pos.append(pos)
        self._lo.append(lo)
        self._hi.append(hi)
        self._lo_closed.append(lo_closed)
        self._hi_closed.append(hi_closed)
        self._boxes += len(pos)

    def arrays(self) -> tuple:
        """Everything :func:`select_window` needs of the readers, built once after the last :meth:`add`."""
        if self._frozen is None:
            width = max([p.shape[1] for p in self._pos], default=1)

            def padded(parts, fill, dtype):
                out = np.full((self._boxes, width), fill, dtype=dtype)
                row = 0
                for part in parts:
                    out[row : row + len(part), : part.shape[1]] = part
                    row += len(part)
                return out

            def flat(parts, dtype):
                return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

            entries = np.array(self.entry_boxes, np.int64).reshape(-1, 2)
            attrs_of = np.array(self.entry_attrs, np.int64).reshape(-1, 2)
            self._frozen = (
                np.array(self.kind, np.int64),
                np.array(self.boxes_at, np.int64),
                np.array(self.boxes_end, np.int64),
                np.array(self.width, np.int64),
                np.array(self.trim_at, np.int64),
                np.array(self.trim_end, np.int64),
                np.ascontiguousarray(entries[:, 0]),
                np.ascontiguousarray(entries[:, 1]),
                np.ascontiguousarray(attrs_of[:, 0]),
                np.ascontiguousarray(attrs_of[:, 1]),
                np.array(self.attrs, np.int64),
                padded(self._pos, -1, np.int64),
                padded(self._lo, -np.inf, np.float64),
                padded(self._hi, np.inf, np.float64),
                padded(self._lo_closed, False, np.bool_),
                padded(self._hi_closed, False, np.bool_),
                flat(self._set_indices, np.int64),
                flat(self._set_wire, np.int64),
            )
        return self._frozen

    def selector(self, number: int):
        return self._keep[number]


@njit(cache=True)
def in_boxes(values, base, stride, col, at, end, pos, lo, hi, lo_closed, hi_closed, n_attrs):
    """Whether tuple ``col`` of a stream (attribute ``a`` at ``values[base + a * stride + col]``) lies in
    one of boxes ``at..end-1``: each box a row of ``pos`` (attribute positions, -1 pads; one at or past
    ``n_attrs`` never holds) and its bounds.  NaN lies in no box (every comparison with it is false).
    The one box test of the engine: the compiled selection and the reference scan both call it."""
    for b in range(at, end):
        inside = True
        for k in range(pos.shape[1]):
            a = pos[b, k]
            if a < 0:
                break
            if a >= n_attrs:
                inside = False
                break
            v = values[base + a * stride + col]
            if not ((v >= lo[b, k]) if lo_closed[b, k] else (v > lo[b, k])):
                inside = False
                break
            if not ((v <= hi[b, k]) if hi_closed[b, k] else (v < hi[b, k])):
                inside = False
                break
        if inside:
            return True
    return False


@njit(cache=True)
def _grow(a, size):
    out = np.empty(max(size, 2 * len(a)), a.dtype)
    out[: len(a)] = a
    return out


@njit(cache=True)
def select_window(
    ph_channel,
    ph_lo,
    ph_hi,
    ph_reader,
    ch_parent,
    ch_stream,
    ch_upload_wire,
    st_first,
    st_count,
    st_times,
    st_values,
    st_attrs,
    times,
    values,
    readers,
    header,
    ch_first,
    ch_count,
):
    """The blocks of one window: per channel (``ch_first``/``ch_count``, set here; -1/0 where none) a run
    of the flat outputs ``(indices, emitted, parent positions, wire)``, indices ascending.

    Phases ``ph_*`` are the window's, sorted by (channel, start), each clipped to the window; a phase with
    reader -1 is an upload.  Stream ``s`` has tuples ``st_first[s] ..`` (``st_count[s]`` of them) in the
    window: the ``j``-th emitted at ``times[st_times[s] + j]``, its attribute ``a`` (of ``st_attrs[s]``)
    at ``values[st_values[s] + a * st_count[s] + j]``.  Returns the
    outputs and the number of the first stand-in reader that named a tuple its input lacks (-1: none).
    """
    (
        kind,
        boxes_at,
        boxes_end,
        width,
        trim_at,
        trim_end,
        entry_at,
        entry_end,
        entry_attrs_at,
        entry_attrs_end,
        entry_attrs,
        pos,
        lo,
        hi,
        lo_closed,
        hi_closed,
        set_indices,
        set_wire,
    ) = readers
    capacity = 16
    for s in range(len(st_count)):
        capacity += 2 * st_count[s]
    indices = np.empty(capacity, np.int64)
    emitted = np.empty(capacity, np.float64)
    parents = np.empty(capacity, np.int64)
    wire = np.empty(capacity, np.int64)
    mark = np.zeros(max(1, len(entry_attrs)) + 64, np.int64)  # stamp per attribute position, for trim widths
    stamp = 0
    ch_first[:] = -1
    ch_count[:] = 0
    n = 0
    bad = -1
    for p in range(len(ph_channel)):
        c = ph_channel[p]
        s = ch_stream[c]
        if ch_first[c] < 0:
            ch_first[c] = n
        r = ph_reader[p]
        parent = ch_parent[c]
        if parent < 0:  # an upload: every tuple of the stream emitted within the phase
            t0 = st_times[s]
            own = times[t0 : t0 + st_count[s]]
            a = np.searchsorted(own, ph_lo[p], side="left")
            b = np.searchsorted(own, ph_hi[p], side="left")
            if n + (b - a) > len(indices):
                indices, emitted = _grow(indices, n + b - a), _grow(emitted, n + b - a)
                parents, wire = _grow(parents, n + b - a), _grow(wire, n + b - a)
            for j in range(a, b):
                indices[n] = st_first[s] + j
                emitted[n] = own[j]
                parents[n] = -1
                wire[n] = ch_upload_wire[c]
                n += 1
            ch_count[c] = n - ch_first[c]
            continue
        f = ch_first[parent]
        if f < 0:
            continue
        m = ch_count[parent]
        a = f + np.searchsorted(emitted[f : f + m], ph_lo[p], side="left")
        b = f + np.searchsorted(emitted[f : f + m], ph_hi[p], side="left")
        if a == b:
            continue
        if n + (b - a) > len(indices):
            indices, emitted = _grow(indices, n + b - a), _grow(emitted, n + b - a)
            parents, wire = _grow(parents, n + b - a), _grow(wire, n + b - a)
        if kind[r] == 1:  # SET: the stand-in's tuples among the parent's a..b-1
            i0, i1 = boxes_at[r], boxes_end[r]
            k = i0 + np.searchsorted(set_indices[i0:i1], indices[a], side="left")
            j = a
            while k < i1 and set_indices[k] <= indices[b - 1]:
                while j < b and indices[j] < set_indices[k]:
                    j += 1
                if j == b or indices[j] != set_indices[k]:
                    if bad < 0:
                        bad = r
                    break
                indices[n] = indices[j]
                emitted[n] = emitted[j]
                parents[n] = j - f
                wire[n] = set_wire[k]
                n += 1
                j += 1
                k += 1
            ch_count[c] = n - ch_first[c]
            continue
        base, stride, n_attrs = st_values[s], st_count[s], st_attrs[s]
        for j in range(a, b):
            col = indices[j] - st_first[s]
            if not in_boxes(
                values, base, stride, col, boxes_at[r], boxes_end[r], pos, lo, hi, lo_closed, hi_closed, n_attrs
            ):
                continue
            w = width[r]
            if trim_at[r] < trim_end[r]:
                stamp += 1
                carried = 0
                for e in range(trim_at[r], trim_end[r]):
                    if in_boxes(
                        values, base, stride, col, entry_at[e], entry_end[e], pos, lo, hi, lo_closed, hi_closed, n_attrs
                    ):
                        for q in range(entry_attrs_at[e], entry_attrs_end[e]):
                            attr = entry_attrs[q]
                            if mark[attr] != stamp:
                                mark[attr] = stamp
                                carried += 1
                w = header + 8 * carried
            indices[n] = indices[j]
            emitted[n] = emitted[j]
            parents[n] = j - f
            wire[n] = w
            n += 1
        ch_count[c] = n - ch_first[c]
    return indices[:n], emitted[:n], parents[:n], wire[:n], bad


def select_rows(selector, names: tuple[str, ...], first: int, values: np.ndarray, rows: np.ndarray, header: int):
    """What ``selector`` keeps of tuples ``first + rows`` (ascending) of one stream whose attributes
    ``names`` are the rows of ``values`` (a column per tuple from ``first`` on): positions into ``rows`` and
    wire bytes, as :meth:`peers.superpeer.Selector.pick` gives them.

    The single-reader use of :func:`select_window`: channel 0 uploads every tuple of ``values``, channel 1
    keeps ``rows`` of it (a stand-in), channel 2 is ``selector`` reading channel 1."""

    class _Rows:  # a stand-in keeping exactly the rows asked about
        def __init__(self):
            self.indices = first + np.asarray(rows, np.int64)
            self.wire = np.zeros(len(rows), np.int64)

    table = SelectorTable({"s": names})
    asked, reader = table.add(_Rows(), "s"), table.add(selector, "s")
    n = values.shape[1]
    ch_first, ch_count = np.empty(3, np.int64), np.empty(3, np.int64)
    _, _, parents, wire, bad = select_window(
        np.array([0, 1, 2], np.int64),
        np.full(3, -1.0),
        np.full(3, float(n)),
        np.array([-1, asked, reader], np.int64),
        np.array([-1, 0, 1], np.int64),
        np.zeros(3, np.int64),
        np.zeros(3, np.int64),
        np.array([first], np.int64),
        np.array([n], np.int64),
        np.zeros(1, np.int64),
        np.zeros(1, np.int64),
        np.array([len(names)], np.int64),
        np.arange(n, dtype=np.float64),
        np.ascontiguousarray(values, np.float64).ravel(),
        table.arrays(),
        header,
        ch_first,
        ch_count,
    )
    if bad >= 0:
        table.selector(int(bad)).fail()
    kept = slice(ch_first[2], ch_first[2] + ch_count[2]) if ch_first[2] >= 0 else slice(0, 0)
    return parents[kept], wire[kept]
