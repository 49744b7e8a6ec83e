"""The ``events`` list of a scenario file: failures and recoveries of backbone elements (docs/SCENARIOS.md,
docs/DYNAMICS.md), checked and frozen into :class:`NetworkEvent` values for the loader.

An entry is written out, ``{at: 20, fail: link, link: [SP1, SP2]}`` or ``{at: 40, recover: super_peer,
id: SP3}``, or a generator, ``{generate: {seed, links: {mtbf, mttr}, super_peers: {mtbf, mttr}}}``.

Written events are checked one by one (keys, element, target, time), then walked in time order, those at
one instant in the order written: a failure of an element already down, or a recovery of one that is not
down, is an error naming the entry.

A generator gives every element of a class (each link, each super-peer; on a generated transit-stub
backbone also per tier: ``transit_links``, ``gateway_links``, ``stub_links``, ``transit_super_peers``,
``stub_super_peers``, a tier's class taking its elements from the class of all) an alternating renewal
process: up times exponential with mean ``mtbf``, down times exponential with mean ``mttr``, from time 0
until the run ends; a recovery due after the end is not emitted (the element stays down).  Times are whole
milliseconds, so they print short and load back exactly.  The draws come from
``np.random.default_rng([seed, 3, position, class])`` (``seed`` the generator's or the scenario's, 3 the
kind of entry after thin-peers' 1 and subscriptions' 2, ``position`` the entry's index in ``events``,
``class`` its index in :data:`CLASSES`), element after element in the backbone's order, so the same file
and seed give the same events whatever the rest of the list holds.

Written events take precedence: an outage a generator draws (its failure and its recovery) is left out
whole when it overlaps or touches an outage of the same element already in the list (a written one, or
one an earlier generator kept).  The draws themselves do not change, so adding a written event removes
at most the generated outages it meets.  Every event kept is in a valid sequence by construction.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from topologies.errors import shown
from topologies.model import LinkSpec, NetworkEvent
from topologies.workload_generators import Reader, is_generator

EVENTS_KIND = 3  # the kind of entry in a generator's seed (thin-peers 1, subscriptions 2)
ACTIONS = ("fail", "recover")
ELEMENTS = ("link", "super_peer")
TARGET_KEY = {"link": "link", "super_peer": "id"}  # the key naming an event's element, by element kind
EVENT_KEYS = {"at": True, "fail": False, "recover": False, "link": False, "id": False}
# a generator's element classes, in the order they are drawn: every link, every super-peer, and on a
# generated transit-stub backbone the tiers, each taking its elements from the class of all of them
CLASSES = ("links", "super_peers", "transit_links", "gateway_links", "stub_links")
CLASSES += ("transit_super_peers", "stub_super_peers")
TIER_OF = {name: name.split("_", 1)[1] for name in CLASSES[2:]}  # a tier's class of all elements
GENERATOR_KEYS = {"seed": False} | {name: False for name in CLASSES}
CLASS_KEYS = {"mtbf": True, "mttr": True}
MAX_GENERATED_EVENTS = 1_000_000  # events one generator may make: a typo in mtbf is an error, not a stall
MILLISECOND = 1000  # generated times are whole milliseconds

Key = tuple[str, ...]  # an element: (a, b) sorted for a link, (id,) for a super-peer (NetworkEvent.key)
Outage = tuple[float, float]  # [fail, recover]; recover math.inf when the element stays down


def _what(event: NetworkEvent) -> str:
    """``link SP1-SP2`` or ``super-peer SP3``."""
    return f"{'link' if event.element == 'link' else 'super-peer'} {'-'.join(event.target)}"


def _t(seconds: float) -> str:
    """A time as a message prints it: short (``20``, ``20.5``) yet exact (``1234.567``, not ``1234.57``)."""
    short = f"{seconds:g}"
    return short if float(short) == seconds else repr(seconds)


def event_entry(event: NetworkEvent) -> dict[str, Any]:
    """``event`` as a scenario file writes it (what ``run.py expand`` prints)."""
    at = int(event.at) if float(event.at).is_integer() else event.at
    target = list(event.target) if event.element == "link" else event.target[0]
    return {"at": at, event.action: event.element, TARGET_KEY[event.element]: target}


def read_events(
    reader: Reader,
    value: object,
    *,
    super_peers: tuple[str, ...],
    links: tuple[LinkSpec, ...],
    duration: float,
    seed: int,
    transit: int | None = None,
) -> tuple[tuple[NetworkEvent, ...], list[str]]:
    """The events of the ``events`` list ``value``, in time order (stable: at one instant, written events
    in the order written, then each generator's), and one line per generator saying what it made.
    ``transit`` is the number of transit super-peers of a generated transit-stub backbone (listed first),
    which lets a generator draw per tier; None for any other backbone.

    Raises ScenarioError (through ``reader.fail``) naming the entry's key path and value."""
    known_links = {(min(link.a, link.b), max(link.a, link.b)) for link in links}
    known_super_peers = set(super_peers)
    written: list[tuple[NetworkEvent, str]] = []
    generators: list[tuple[int, object]] = []
    for i, item in enumerate(reader.sequence(value, "events")):
        if is_generator(item):
            generators.append((i, item["generate"]))
        else:
            path = f"events[{i}]"
            written.append((_event(reader, item, path, known_super_peers, known_links, duration), path))
    outages = _walk(reader, written)
    events = [event for event, _ in written]
    told: list[str] = []
    classes = _classes(super_peers, links, transit)
    for position, spec in generators:
        made, line = _generate(
            reader, spec, f"events[{position}].generate", seed=seed, position=position, duration=duration,
            classes=classes, outages=outages, written=len(written),
        )  # fmt: skip
        events += made
        told.append(line)
    return tuple(sorted(events, key=lambda e: e.at)), told


def _event(
    reader: Reader,
    item: object,
    path: str,
    super_peers: set[str],
    links: set[tuple[str, str]],
    duration: float,
) -> NetworkEvent:
    """One written entry, checked on its own (its place in the sequence is :func:`_walk`'s)."""
    item = reader.mapping(item, path, EVENT_KEYS)
    actions = [action for action in ACTIONS if action in item]
    if not actions:
        reader.fail(path, "missing required key 'fail' (or 'recover')")
    if len(actions) > 1:
        reader.fail(path, "expected exactly one of 'fail' and 'recover', got both")
    (action,) = actions
    element = item[action]
    if not isinstance(element, str) or element not in ELEMENTS:
        reader.fail(f"{path}.{action}", f"unknown element {shown(element)} (expected one of: {', '.join(ELEMENTS)})")
    key = TARGET_KEY[element]
    reader.mapping(item, path, {"at": True, action: True, key: True})
    at = reader.number(item["at"], f"{path}.at")
    if not 0 <= at < duration:
        reader.fail(f"{path}.at", f"must lie in [0, duration) = [0, {duration:g}), got {shown(item['at'])}")
    if element == "super_peer":
        super_peer = reader.reference(item["id"], super_peers, f"{path}.id", "super-peer")
        return NetworkEvent(at, action, element, (super_peer,))
    ends = item["link"]
    if not isinstance(ends, list) or len(ends) != 2:
        reader.fail(f"{path}.link", f"expected [a, b], the two super-peers of a backbone link, got {shown(ends)}")
    a, b = (reader.reference(end, super_peers, f"{path}.link[{k}]", "super-peer") for k, end in enumerate(ends))
    if (min(a, b), max(a, b)) not in links:
        reader.fail(f"{path}.link", f"no link {a}-{b} in the backbone")
    return NetworkEvent(at, action, element, (a, b))


def _walk(reader: Reader, written: Sequence[tuple[NetworkEvent, str]]) -> dict[Key, list[Outage]]:
    """Check that ``written`` fails only elements that are up and recovers only elements that are down,
    in time order (at one instant, in the order written), and return each element's outages."""
    down: dict[Key, tuple[NetworkEvent, str]] = {}
    outages: dict[Key, list[Outage]] = {}
    for event, path in sorted(written, key=lambda pair: pair[0].at):
        key = event.key
        if event.action == "fail":
            if key in down:
                failed, where = down[key]
                reader.fail(
                    f"{path}.fail",
                    f"{_what(event)} is already down at t={_t(event.at)} (failed by {where} at t={_t(failed.at)})",
                )
            down[key] = (event, path)
            continue
        if key not in down:
            reader.fail(f"{path}.recover", f"{_what(event)} is not down at t={_t(event.at)}")
        failed, where = down.pop(key)
        if failed.at == event.at:
            reader.fail(
                f"{path}.recover",
                f"{_what(event)} fails at the same instant (by {where}, t={_t(event.at)}): an outage must last",
            )
        outages.setdefault(key, []).append((failed.at, event.at))
    for key, (failed, _) in down.items():
        outages.setdefault(key, []).append((failed.at, math.inf))
    return outages


def _classes(super_peers: tuple[str, ...], links: tuple[LinkSpec, ...], transit: int | None) -> dict[str, list[Key]]:
    """The elements of each class (as events name them), by class name; the tiers only for a transit-stub
    backbone: transit links join two transit super-peers, gateway links a transit and a stub one, stub
    links two stub ones."""
    classes = {"links": [(link.a, link.b) for link in links], "super_peers": [(sp,) for sp in super_peers]}
    if transit is None:
        return classes
    in_transit = set(super_peers[:transit])
    classes["transit_super_peers"] = [(sp,) for sp in super_peers[:transit]]
    classes["stub_super_peers"] = [(sp,) for sp in super_peers[transit:]]
    tiers = ("stub_links", "gateway_links", "transit_links")  # by the number of transit ends
    for name in tiers:
        classes[name] = []
    for link in links:
        classes[tiers[(link.a in in_transit) + (link.b in in_transit)]].append((link.a, link.b))
    return classes


def _generate(
    reader: Reader,
    value: object,
    path: str,
    *,
    seed: int,
    position: int,
    duration: float,
    classes: dict[str, list[Key]],
    outages: dict[Key, list[Outage]],
    written: int,
) -> tuple[list[NetworkEvent], str]:
    """The events one generator makes, and one line saying what; ``outages`` (by element) are those
    already in the list, which its own outages avoid, and to which they are added."""
    spec = reader.mapping(value, path, GENERATOR_KEYS)
    seed = reader.integer(spec["seed"], f"{path}.seed") if "seed" in spec else seed
    if not any(name in spec for name in CLASSES):
        reader.fail(path, f"expected at least one element class ({', '.join(CLASSES)}), got {shown(spec)}")
    for name in CLASSES:
        if name in spec and name not in classes:
            reader.fail(f"{path}.{name}", "tiers need a transit-stub backbone (network.generate)")
    # an element is drawn by its tier's class when the generator has one, else by the class of all
    tiered = {element for name in CLASSES[2:] if name in spec for element in classes[name]}
    events: list[NetworkEvent] = []
    skipped = 0
    parts = []
    for k, name in enumerate(CLASSES):
        if name not in spec:
            continue
        class_path = f"{path}.{name}"
        params = reader.mapping(spec[name], class_path, CLASS_KEYS)
        mtbf = reader.number(params["mtbf"], f"{class_path}.mtbf", positive=True)
        mttr = reader.number(params["mttr"], f"{class_path}.mttr", positive=True)
        elements = classes[name] if name in TIER_OF else [e for e in classes[name] if e not in tiered]
        expected = 2 * len(elements) * duration / (mtbf + mttr)
        if expected > MAX_GENERATED_EVENTS:
            reader.fail(
                class_path,
                f"{f'about {expected:,.0f}' if math.isfinite(expected) else 'countless'} events over {duration:g} s,"
                f" over the cap of {MAX_GENERATED_EVENTS:,}"
                f" (mtbf and mttr are seconds), got {shown(spec[name])}",
            )
        element = "link" if name.endswith("links") else "super_peer"
        rng = np.random.default_rng([seed, EVENTS_KIND, position, k])
        for target in elements:
            key = tuple(sorted(target)) if element == "link" else target
            blocked = outages.setdefault(key, [])  # disjoint, by start: so by end too
            for fail_ms, recover_ms in _alternation(rng, mtbf, mttr, duration):
                fail, recover = fail_ms / MILLISECOND, (math.inf if recover_ms is None else recover_ms / MILLISECOND)
                before = bisect.bisect_right(blocked, recover, key=_start)  # the outages starting by `recover`
                if before and blocked[before - 1][1] >= fail:  # the last of them ends at `fail` or later
                    skipped += 1
                    continue
                blocked.insert(before, (fail, recover))
                events.append(NetworkEvent(fail, "fail", element, target))
                if recover_ms is not None:
                    events.append(NetworkEvent(recover, "recover", element, target))
            if len(events) > MAX_GENERATED_EVENTS:
                reader.fail(path, f"makes more than {MAX_GENERATED_EVENTS:,} events over {duration:g} s")
        noun = name.replace("super_peers", "super-peers").replace("_", " ")
        parts.append(f"{len(elements)} {noun[:-1] if len(elements) == 1 else noun} (mtbf {mtbf:g} s, mttr {mttr:g} s)")
    failures = sum(e.action == "fail" for e in events)
    told = (
        f"{path}: {len(events)} event{'s' * (len(events) != 1)} ({failures} failures,"
        f" {len(events) - failures} recoveries) beside {written} written, over {' and '.join(parts)}"
    )
    if skipped:
        told += f"; {skipped} drawn outage{'s' * (skipped > 1)} left out, meeting one already listed"
    return events, told


def _start(outage: Outage) -> float:
    return outage[0]


def _alternation(rng: np.random.Generator, mtbf: float, mttr: float, duration: float):
    """One element's outages as ``(fail, recover)`` milliseconds, ``recover`` None when due at or after the
    end of the run: up times ~ Exp(mtbf), down times ~ Exp(mttr), each at least a millisecond but the first
    up time, so no two events of the element share an instant."""
    end_ms = duration * MILLISECOND
    now = 0
    while True:
        up = float(rng.exponential(mtbf))
        if up >= duration:  # past the end whenever it starts (and too long to count in milliseconds)
            return
        fail = now + (round(up * MILLISECOND) if now == 0 else max(round(up * MILLISECOND), 1))
        if not fail < end_ms:
            return
        down = float(rng.exponential(mttr))
        recover = None if down >= duration else fail + max(round(down * MILLISECOND), 1)
        if recover is None or not recover < end_ms:
            yield fail, None
            return
        yield fail, recover
        now = recover
