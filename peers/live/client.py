"""The subscription CLI against a running emulator: ``subscribe``, ``unsubscribe``, ``subscriptions``,
``traffic``.  Each is a request on ``ctl/request/<identity>`` answered by the coordinator on
``ctl/reply/<client>``; the identity is the broker user (under ``--secure``, what the coordinator authorises
by), else the thin-peer subscribing or ``cli``.  Each is an async function ``run.py`` runs and prints."""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import secrets
import signal
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from matcher import AggregateQuery, parse_query
from peers.aggregation import aggregate
from peers.live.connection import Broker, Connection, Dedup, reach
from peers.live.malformed import json_object
from peers.live.topics import Topics
from peers.live.wire import decode_message
from topologies.errors import EngineError, InputError

REPLY_TIMEOUT_S = 10.0


class Session:
    """A short-lived CLI connection (clean session) that can ask the coordinator things.  It does not
    reconnect: a lost connection ends what it waits for with an EngineError (under ``--secure`` a second
    CLI of the same login takes the connection over, peers/live/access.py)."""

    def __init__(self, broker: Broker, topics: Topics, name: str, extra: list[str] = (), on_data=None, on_event=None):
        self.topics = topics
        self.on_event = on_event  # called with the coordinator's notices (a reply with an "event")
        self.identity = broker.username or name
        self.client_id = topics.client_id(self.identity, secrets.token_hex(4))
        self.replies: asyncio.Queue[dict] = asyncio.Queue()
        self._replied = asyncio.Event()  # set while a reply waits in ``replies``
        self.on_data = on_data
        self.clock: tuple[float, float] | None = None  # (t0, speed) of the running emulator, once known
        self.connection = Connection(
            broker,
            f"cli-{self.client_id.replace('/', '-')}",
            [topics.reply(self.client_id), topics.control("clock"), *extra],
            self._on_message,
            persistent=False,
            reconnect=False,
        )
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Session:
        await reach(self.connection.broker)
        self._task = asyncio.create_task(self.connection.run())
        try:
            if not await self.wait(self.connection.connected, REPLY_TIMEOUT_S):
                broker = self.connection.broker
                raise EngineError(f"cannot reach the broker at {broker.host}:{broker.port}")
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Whether ``event`` was set within ``timeout`` seconds (None: no limit); raises the connection's
        EngineError when it was lost meanwhile."""
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({waiter, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if event.is_set():
            return True
        if self._task.done():
            error = self._task.exception() if not self._task.cancelled() else None
            raise error or EngineError("the connection to the broker ended")
        return False

    async def __aexit__(self, *exc) -> None:
        await self.connection.flush_or_give_up(2.0)
        await self.connection.close()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        parts = self.topics.parse(topic)
        if parts[:2] == ("ctl", "reply"):
            doc = json_object(payload, "coordinator")
            if "event" in doc:
                if self.on_event is not None:
                    self.on_event(doc)
            else:
                await self.replies.put(doc)
                self._replied.set()
        elif parts[:2] == ("ctl", "clock"):
            doc = json_object(payload, "coordinator")
            t0, speed = doc.get("t0"), doc.get("speed")
            if isinstance(t0, float | int) and isinstance(speed, float | int) and speed > 0:
                self.clock = (float(t0), float(speed))
        elif parts[:1] == ("down",) and self.on_data is not None:
            self.on_data(payload)

    async def ask(self, request: dict) -> dict:
        """Send ``request``; the coordinator's answer.  Raises :class:`InputError` with the coordinator's
        message when it refuses, :class:`EngineError` when nobody answers."""
        self.connection.publish(
            self.topics.request(self.identity), json.dumps({**request, "reply_to": self.client_id}).encode()
        )
        if not await self.wait(self._replied, REPLY_TIMEOUT_S):
            raise EngineError(f"no emulator answered on {self.topics.control('request')} within {REPLY_TIMEOUT_S:g} s")
        answer = self.replies.get_nowait()
        if self.replies.empty():
            self._replied.clear()
        if answer.get("ok") is not True:
            raise InputError(str(answer.get("error", "request refused")))
        return answer


def describe_decision(answer: dict) -> str:
    lines = [f"subscription {answer['id']} from t={answer['at']:.3f}s: {answer['summary']}"]
    if answer.get("reused"):
        lines.append(f"  reuses {answer['reused']}")
    if answer.get("widened"):
        lines.append(f"  widens {', '.join(answer['widened'])}")
    for op in answer.get("operators", []):
        if "delivery" in op:
            d = op["delivery"]
            lines.append(f"  delivery at {d['home']} -> {d['peer']} from {d['flow'] or 'raw'}: WHERE {d['where']}")
        elif op.get("shared"):  # under --secure: its condition is other subscriptions' too
            lines.append(f"  operator {op['id']} at {op['origin']} (shared) on {' -> '.join(op['path'])}")
        else:
            lines.append(
                f"  operator {op['id']} at {op['origin']}: WHERE {op['where']} SELECT {','.join(op['attrs'])}"
                f" on {' -> '.join(op['path'])}"
            )
    return "\n".join(lines)


async def subscribe(
    broker: Broker,
    topics: Topics,
    peer: str,
    query: str,
    *,
    count: int | None,
    timeout: float | None,
    as_json: bool,
    out: Callable[[str], None],
    info: Callable[[str], None],
    sub_id: str | None = None,
) -> int:
    """Register, print the decision, print results until ``count`` tuples, ``timeout`` or a signal, then
    unsubscribe; or until the coordinator says the subscription was removed (by someone else, or by a
    failure) or the run ended, which ``info`` tells.  Returns the number of tuples printed.

    An aggregate subscription's results are records: the input it receives is kept here and a window's
    records are printed when the window closes (:class:`Windows`), each counted as one result."""
    sub_id = sub_id or f"C{secrets.token_hex(3)}"
    done = asyncio.Event()
    printed = 0
    dedup = Dedup()
    received: list = []  # batches not printed yet: rows arrive ahead of their due time and wait for it
    offset = 0  # rows of received[0] printed
    loop = asyncio.get_running_loop()
    session: Session | None = None

    def on_data(payload: bytes) -> None:
        batches = decode_message(payload, None)
        if dedup.first_time(batches[0].sender, batches[0].seq):
            received.extend(b for b in batches if b.fate is None)  # dropped or lost copies: nothing to show
            flush()

    def flush(hold: bool = True) -> None:
        nonlocal printed, offset
        if not types:
            return  # the coordinator's answer (attribute types) first
        clock = session.clock if session is not None and hold else None
        while received and not done.is_set():
            batch = received[0]
            for k in range(offset, len(batch)):
                if count is not None and printed >= count:
                    done.set()
                    return
                wait = 0.0 if clock is None else clock[0] + float(batch.arrivals[k]) / clock[1] - time.time()
                if wait > 0:  # shown when it is due over the emulated links
                    offset = k
                    loop.call_later(wait, flush)
                    show_records()
                    return
                if windows is not None:  # an aggregate's input: its records are shown as windows close
                    windows.add(float(batch.times[k]), {a: float(v[k]) for a, v in batch.columns.items()})
                    continue
                row = {a: _shown(types.get(a), texts.get(a), v[k]) for a, v in batch.columns.items()}
                if as_json:
                    out(json.dumps(row))
                else:
                    values = " ".join(f"{a}={row[a]}" for a in row)
                    out(f"#{int(batch.indices[k])} t={float(batch.times[k]):.3f}s {values}")
                printed += 1
            received.pop(0)
            offset = 0
        show_records()
        if count is not None and printed >= count:
            done.set()

    def show_records(until: float | None = None) -> None:
        """Print the records of the windows closed by now (``until``: the subscription's end)."""
        nonlocal printed
        if windows is None:
            return
        for window, group, values in windows.closed(until):
            if count is not None and printed >= count:
                done.set()
                return
            group = {name: _shown(types.get(name), texts.get(name), value) for name, value in group.items()}
            if as_json:
                out(json.dumps({"window": window, "group": group, "values": values}))
            else:
                shown = " ".join(f"{name}={value}" for name, value in (*group.items(), *values.items()))
                out(f"window {window}: {shown}")
            printed += 1

    types: dict[str, str] = {}
    texts: dict[str, list[str]] = {}  # a string attribute's values by code
    ended: list[dict] = []
    windows: Windows | None = None

    def on_event(doc: dict) -> None:
        if doc.get("id") == sub_id and not ended:
            ended.append(doc)
            done.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    try:
        async with Session(broker, topics, peer, [topics.down(peer, sub_id)], on_data, on_event) as session:
            answer = await session.ask({"op": "subscribe", "peer": peer, "query": query, "id": sub_id})
            info(describe_decision(answer))
            parsed = parse_query(query, lambda _: answer.get("texts", {}))
            if isinstance(parsed, AggregateQuery):
                windows = Windows(parsed, float(answer["at"]))
            types.update(answer.get("types", {}))
            texts.update(answer.get("texts", {}))
            flush()
            if not await session.wait(done, timeout):
                info(f"timeout after {timeout:g} s")
            if ended:
                await asyncio.sleep(0.2)  # results sent before the notice may still be on their way
                flush(hold=False)
                notice = ended[0]
                show_records(float(notice["until"]))
                what = "was removed" if notice["event"] == "removed" else "ended with the run"
                info(f"subscription {sub_id} {what} at t={float(notice['until']):.3f}s: {notice['reason']}")
            else:
                info(unsubscribed_line(await session.ask({"op": "unsubscribe", "id": sub_id})))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return printed


async def unsubscribe(broker: Broker, topics: Topics, sub_id: str) -> dict:
    """End subscription ``sub_id``; the coordinator's answer (``id``, ``until``, ``summary``)."""
    async with Session(broker, topics, broker.username or "cli") as session:
        return await session.ask({"op": "unsubscribe", "id": sub_id})


async def subscriptions(broker: Broker, topics: Topics) -> list[dict]:
    """The running emulator's subscriptions (those of the broker user's thin-peer, under ``--secure``),
    each with its plan."""
    async with Session(broker, topics, broker.username or "cli") as session:
        return (await session.ask({"op": "subscriptions"}))["subscriptions"]


async def traffic(broker: Broker, topics: Topics) -> dict:
    """The running emulator's per-topic counters as the nodes count them now: ``now`` (emulated seconds,
    None before the clock started), ``links`` (one row per data topic) and ``complete`` (every node sent
    its counters for this request)."""
    async with Session(broker, topics, broker.username or "cli") as session:
        return await session.ask({"op": "traffic"})


def unsubscribed_line(answer: dict) -> str:
    return f"unsubscribed {answer['id']} at t={answer['until']:.3f}s: {answer['summary']}"


def subscription_lines(subs: list[dict]) -> list[str]:
    """:func:`subscriptions` as text: each subscription, then its plan."""
    lines = []
    for sub in subs:
        until = "" if sub["until"] is None else f" until {sub['until']:g}"
        lines.append(f"{sub['id']} at {sub['peer']} from {sub['at']:g}{until}: {sub['query']}")
        if sub["operators"]:
            lines.append(describe_decision(sub).split("\n", 1)[-1])
    return lines


def traffic_lines(answer: dict) -> list[str]:
    """:func:`traffic` as a table."""
    now = "t=(the clock has not started)" if answer["now"] is None else f"t={answer['now']:.2f}s"
    if answer.get("complete") is False:
        now += " (some nodes did not send their counters in time: their rows are older)"
    lines = [now, f"{'topic':32} {'messages':>9} {'tuples':>9} {'bytes':>11}"]
    lines += [f"{r['topic']:32} {r['messages']:>9} {r['tuples']:>9} {r['bytes']:>11}" for r in answer["links"]]
    return lines


class Windows:
    """An aggregate subscription's input as it arrives, and its records as their windows close.

    The input comes in emission order (its delivery is first in, first out), so a tuple emitted at ``t``
    closes every time window ending at or before ``t`` and every count window it completes: their records
    are final (:func:`peers.aggregation.aggregate` over what came so far, up to ``t``).  The rest close
    when the subscription ends.  Of a time window's input only what an open window holds is kept: a long
    run costs what its open windows hold, not its whole input (a count window's input is kept whole: its
    windows are numbered from each group's first tuple)."""

    def __init__(self, query: AggregateQuery, at: float):
        self.query, self.at = query, at
        self.times: list[float] = []
        self.rows: dict[str, list[float]] = {name: [] for name in query.select}
        self.shown: set = set()

    def add(self, emitted: float, row: dict[str, float]) -> None:
        self.times.append(emitted)
        for name, values in self.rows.items():
            values.append(row[name])

    def closed(self, until: float | None = None) -> list[tuple[int, dict[str, float], dict[str, float]]]:
        """The records of the windows closed by the input so far (or by the end ``until``) not given
        before, in window order, each as its window id, its group (attribute -> value) and its values
        (aggregate column -> value)."""
        if not self.times:
            return []
        upto = self.times[-1] if until is None else until
        times = np.asarray(self.times)
        columns = {name: np.asarray(values) for name, values in self.rows.items()}
        found = aggregate(self.query, times, columns, self.at, upto, upto)
        names = [self.query.column(a) for a in self.query.selected]
        records = []
        for key in sorted(k for k in found if k not in self.shown):
            self.shown.add(key)
            window, group = key
            values = dict(zip(names, found[key], strict=True))
            records.append((window, dict(zip(self.query.groups, group, strict=True)), values))
        if until is None:
            self._forget(upto)
        return records

    def _forget(self, upto: float) -> None:
        """Drop the input of the time windows closed by ``upto`` (their records are given), and what was
        shown of them."""
        window = self.query.window
        if window.tuples:
            return
        size, slide = window.size, window.slide  # exact (Fractions), as the windows are
        first_open = max(0, math.floor((Fraction(upto) - size) / slide) + 1)  # the first window ending after upto
        start = first_open * slide
        cut = bisect.bisect_left(self.times, start)
        if cut == 0:
            return
        del self.times[:cut]
        for values in self.rows.values():
            del values[:cut]
        # a closed window still holding kept tuples would be computed again (from part of its input): it
        # stays shown; those wholly before the kept input are forgotten
        self.shown = {key for key in self.shown if key[0] * slide + size > start}


def _shown(kind: str | None, texts: list[str] | None, value: float) -> int | float | str:
    """A value as a subscriber sees it: a whole number for an ``int`` attribute, the text of a ``string``
    one's code."""
    if kind == "int":
        return int(value)
    if kind == "string" and texts is not None:
        return texts[int(value)]
    return float(value)
