"""The store-and-forward model of tests/packet_reference.py, played on ns-3 (3.44, cppyy bindings).

``play_ns3(network, channels, emitted)`` takes the same input as ``play_reference`` and returns the same
``Fates``; the self-check tests compare the two exactly.

What ns-3 does natively
-----------------------
* Time: ``Time::SetResolution(Time::PS)`` before anything else, so every time is an integer number of
  picoseconds, like the model's.
* One ns-3 node per named node. One ``PointToPointHelper`` link per node pair serves both directions
  (a full-duplex ``PointToPointChannel``: each device has its own wire), each device with the
  ``DataRate`` of its own direction. The channel's ``Delay`` is shared by the pair, so a pair whose two
  directions have different latencies gets one link per direction instead (the reverse device of each
  stays unused).
* No IP stack and no queue disc: a copy is a ``Packet`` handed to ``PointToPointNetDevice::Send``, which
  adds the 2-byte PPP header; the payload is ``bytes - 2`` so that the frame is exactly the copy's bytes.
  The device serialises it for ``DataRate::CalculateBytesTxTime(bytes)`` and the channel delivers it
  ``Delay`` later to the far device, whose receive callback forwards it.
* FIFO and tail drop: the device's transmit queue is a ``DropTailQueue<Packet>`` with ``MaxSize`` in
  bytes equal to the buffer (unlimited: 2**32 - 1 bytes). The packet on the wire has left the queue, so
  the queue holds exactly the copies that wait, and ``DropTailQueue`` admits a packet iff its size plus
  the bytes queued is at most ``MaxSize``, the model's test. Drops are read from the queue's ``Drop``
  trace.
* Serialisation time: ns-3 computes ``bits / rate`` in 64.64 fixed point, converts to ps and rounds to the
  nearest ps. That is ``service_ps`` except when the exact quotient ends in exactly half a picosecond and
  ``8 / rate`` is not a binary fraction (e.g. 1 byte at 128 Gbit/s: 62.5 ps, ns-3 62, the model 63): the
  fixed-point quotient then falls just short of the half and rounds down. ``play_ns3`` checks every
  (direction, size) it will send and raises ``ValueError`` on such a pair rather than give other
  results.
* Which copy a packet is: a table from the packet's uid (kept by the copies ns-3 makes of it) to
  (channel, key position, hop, up period).

Simultaneous events: ns-3's default scheduler (``MapScheduler``) orders events by (time, uid), the uid
being a counter incremented at every ``Schedule``: events at the same picosecond run in the order they
were *scheduled*. A packet's arrival at the far node is scheduled when its transmission starts, a
transmission's end when it starts, an emission when the run is set up. Left alone, two copies reaching
the same queue at the same picosecond would be enqueued in the order of those scheduling moments (the
copy whose last transmission started earlier first), not in the model's (channel, key position) order,
and whether a transmission ending at that picosecond frees its place in the queue first would depend on
the same accident. So arrivals are not forwarded when ns-3 delivers them: each is put in a pending set
and a single settling event, scheduled with ``ScheduleNow`` by the first arrival of the picosecond, hands
them all to their devices in (channel, key position) order (children spawned at that instant join the
set in their place). ``ScheduleNow`` gives that event a uid larger than every event scheduled before the
current picosecond, so it runs after all arrivals of the picosecond (scheduled at least one service time
earlier) and after all transmission ends of the picosecond (ditto): a copy that starts on the wire at
that picosecond no longer counts in the queue, as in the model. This needs every service time to be at
least 1 ps, which ``play_ns3`` checks. ``settle_ties=False`` forwards each arrival inside ns-3's own
receive event instead, to show ns-3's native order.

Failures (emulated: ``PointToPointNetDevice`` has no way to take a link down and bring it up again)
-------------------------------------------------------------------------------------------------------
* A direction's up periods are ``[0, fail_1)``, ``[recover_1, fail_2)``, ...; each up period has its own
  device (the first one on the pair's link, each later one on a fresh link between the two nodes), so a
  recovered direction starts with an empty queue and an idle wire, as the model's failure empties the
  queue and frees the wire. (One device for all periods would not do: ns-3 cannot cut a transmission
  short, so the wire would stay busy after the failure until the frame interrupted by it had been
  fully serialised, delaying copies after a quick recovery.)
* A copy reaching the queue while the direction is down is lost without touching ns-3.
* At the failure time the device's queue is emptied (``Dequeue``, not the ``Drop`` trace) and its copies
  are lost; a copy of that period that the far node receives at or after the failure time (on the wire
  or propagating at the failure) is lost on receipt. The old device may still serialise the frame the
  failure interrupted, but nothing it sends is delivered.

So the failure semantics are the model's exactly; what ns-3 really simulates is only the up periods.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile

from tests.packet_reference import Fates, check_channels, resolve, service_ps

UNLIMITED_BYTES = 2**32 - 1  # QueueSize holds a uint32_t
PPP_HEADER = 2  # bytes PointToPointNetDevice::Send adds to every packet

_KIND = {1: "delivered", 2: "dropped", 3: "lost"}

_ENGINE = r"""
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

namespace sgpackets {
using namespace ns3;

enum Kind { NONE = 0, DELIVERED = 1, DROPPED = 2, LOST = 3 };

struct Direction {
    uint64_t bandwidth;
    uint32_t buffer;
    std::vector<long long> fail, recover;            // down intervals; recover -1: never
    std::vector<Ptr<PointToPointNetDevice>> device;  // the sending device of each up period
};

struct Child {
    int channel;
    int tap;
    std::vector<int> position;  // parent key position -> child key position, -1 if not carried
};

struct Channel {
    std::vector<int> hops;         // direction indices
    std::vector<uint32_t> bytes;   // per key position
    std::vector<Child> children;   // in channel order
    size_t first;                  // index of key position 0 in the fate arrays
};

struct Flight {
    int channel, key, hop, period;
};

using Pending = std::tuple<int, int, int>;  // (channel, key position, position on the route)

struct State {
    NodeContainer nodes;
    std::vector<NetDeviceContainer> links;
    std::vector<Direction> directions;
    std::vector<Channel> channels;
    std::vector<int> kind;           // per copy (channel, key position)
    std::vector<long long> value;    // arrival ps if delivered, else the direction index
    std::unordered_map<uint64_t, Flight> flights;  // packet uid -> copy
    std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending;
    bool settle = true;
    bool settling = false;
};

static State* g = nullptr;

long long TxPs(unsigned long long bandwidth, unsigned bytes) {
    return DataRate(bandwidth).CalculateBytesTxTime(bytes).GetPicoSeconds();
}

static void Stop(int c, int k, int kind, long long value) {
    size_t i = g->channels[c].first + k;
    if (g->kind[i] != NONE) {
        NS_FATAL_ERROR("copy " << c << "/" << k << " stopped twice");
    }
    g->kind[i] = kind;
    g->value[i] = value;
}

static void Reach(int c, int k, int pos) {
    long long t = Simulator::Now().GetPicoSeconds();
    const Channel& ch = g->channels[c];
    for (const Child& child : ch.children) {
        if (child.tap == pos && child.position[k] >= 0) {
            g->pending.emplace(child.channel, child.position[k], 0);
        }
    }
    if (pos == (int)ch.hops.size()) {
        Stop(c, k, DELIVERED, t);
        return;
    }
    int d = ch.hops[pos];
    const Direction& dir = g->directions[d];
    size_t period = 0;  // how many failures happened by t
    while (period < dir.fail.size() && dir.fail[period] <= t) {
        ++period;
    }
    if (period > 0 && (dir.recover[period - 1] < 0 || t < dir.recover[period - 1])) {
        Stop(c, k, LOST, d);  // the direction is down
        return;
    }
    Ptr<PointToPointNetDevice> dev = dir.device[period];
    Ptr<Packet> p = Create<Packet>(ch.bytes[k] - 2);
    g->flights[p->GetUid()] = Flight{c, k, pos, (int)period};
    // 0x0800 (IPv4) is a protocol number the PPP header can carry; nothing reads it. A full queue
    // fires Dropped before Send returns.
    dev->Send(p, dev->GetBroadcast(), 0x0800);
}

static void Settle() {
    g->settling = false;
    while (!g->pending.empty()) {
        auto [c, k, pos] = g->pending.top();
        g->pending.pop();
        Reach(c, k, pos);
    }
}

static void Arrive(int c, int k, int pos) {
    g->pending.emplace(c, k, pos);
    if (!g->settle) {
        Settle();
    } else if (!g->settling) {
        g->settling = true;
        Simulator::ScheduleNow(&Settle);
    }
}

static Flight Take(uint64_t uid) {
    auto it = g->flights.find(uid);
    if (it == g->flights.end()) {
        NS_FATAL_ERROR("unknown packet uid " << uid);
    }
    Flight f = it->second;
    g->flights.erase(it);
    return f;
}

static void Dropped(Ptr<const Packet> p) {
    Flight f = Take(p->GetUid());
    Stop(f.channel, f.key, DROPPED, g->channels[f.channel].hops[f.hop]);
}

static bool Received(Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address&) {
    Flight f = Take(p->GetUid());
    int d = g->channels[f.channel].hops[f.hop];
    const Direction& dir = g->directions[d];
    if ((size_t)f.period < dir.fail.size() && Simulator::Now().GetPicoSeconds() >= dir.fail[f.period]) {
        Stop(f.channel, f.key, LOST, d);  // a failure came while it was on its way
    } else {
        Arrive(f.channel, f.key, f.hop + 1);
    }
    return true;
}

static void Fail(int d, int period) {
    Ptr<Queue<Packet>> queue = g->directions[d].device[period]->GetQueue();
    while (Ptr<Packet> p = queue->Dequeue()) {
        Flight f = Take(p->GetUid());
        Stop(f.channel, f.key, LOST, d);
    }
}

void Begin(int nodes, bool settle) {
    delete g;
    g = new State();
    g->settle = settle;
    g->nodes.Create(nodes);
}

int AddLink(int a, int b, long long latency) {
    PointToPointHelper helper;
    helper.SetQueue("ns3::DropTailQueue<Packet>");  // its MaxSize is set per device by AddPeriod
    helper.DisableFlowControl();                     // no queue disc above the device to tell
    helper.SetChannelAttribute("Delay", TimeValue(PicoSeconds(latency)));
    NetDeviceContainer devices = helper.Install(g->nodes.Get(a), g->nodes.Get(b));
    for (uint32_t i = 0; i < devices.GetN(); ++i) {
        devices.Get(i)->SetReceiveCallback(MakeCallback(&Received));
    }
    g->links.push_back(devices);
    return (int)g->links.size() - 1;
}

int AddDirection(unsigned long long bandwidth, unsigned buffer, const std::vector<long long>& fail,
                 const std::vector<long long>& recover) {
    Direction dir;
    dir.bandwidth = bandwidth;
    dir.buffer = buffer;
    dir.fail = fail;
    dir.recover = recover;
    g->directions.push_back(dir);
    return (int)g->directions.size() - 1;
}

void AddPeriod(int d, int link, int side) {
    Direction& dir = g->directions[d];
    Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(g->links[link].Get(side));
    dev->SetDataRate(DataRate(dir.bandwidth));
    dev->GetQueue()->SetMaxSize(QueueSize(QueueSizeUnit::BYTES, dir.buffer));
    dev->GetQueue()->TraceConnectWithoutContext("Drop", MakeCallback(&Dropped));
    int period = (int)dir.device.size();
    dir.device.push_back(dev);
    if ((size_t)period < dir.fail.size()) {
        Simulator::Schedule(PicoSeconds(dir.fail[period]), &Fail, d, period);
    }
}

int AddChannel(const std::vector<int>& hops, const std::vector<unsigned>& bytes) {
    Channel ch;
    ch.hops = hops;
    ch.bytes.assign(bytes.begin(), bytes.end());
    ch.first = g->kind.size();
    g->kind.resize(g->kind.size() + bytes.size(), NONE);
    g->value.resize(g->kind.size(), -1);
    g->channels.push_back(ch);
    return (int)g->channels.size() - 1;
}

void AddChild(int parent, int child, int tap, const std::vector<int>& position) {
    g->channels[parent].children.push_back(Child{child, tap, position});
}

void Emit(const std::vector<int>& channel, const std::vector<int>& key, const std::vector<long long>& t) {
    for (size_t i = 0; i < channel.size(); ++i) {
        Simulator::Schedule(PicoSeconds(t[i]), &Arrive, channel[i], key[i], 0);
    }
}

void Run() {
    Simulator::Run();
}

std::vector<int> Kinds() { return g->kind; }
std::vector<long long> Values() { return g->value; }
size_t InFlight() { return g->flights.size(); }

void End() {
    Simulator::Destroy();
    delete g;
    g = nullptr;
}
}  // namespace sgpackets
"""


def load_ns():
    """The ns-3 bindings module (``from ns import ns`` afterwards works), or ``None`` if the ``ns3``
    package is not installed.  The bindings look for ns-3 libraries below the working directory as well
    (a build there would be taken instead of the package's), so they are imported from an empty temporary
    directory."""
    if importlib.util.find_spec("ns") is None:
        return None
    here = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as empty:
            os.chdir(empty)
            try:
                import ns
            finally:
                os.chdir(here)
    except (Exception, SystemExit) as error:
        raise ImportError(f"the ns-3 bindings failed to load: {error!r}") from None
    return ns


def _engine():
    """The ns-3 namespace, with the C++ engine defined and the time resolution set to picoseconds."""
    module = load_ns()
    if module is None:
        raise ImportError("the ns3 package is not installed")
    ns = module.ns
    if ns.Time.GetResolution() != ns.Time.PS:
        # allowed once per process, before any simulation has run (Simulator::Run forgets the times
        # it would have to convert)
        ns.Time.SetResolution(ns.Time.PS)
    cppyy = ns.cppyy
    if not hasattr(cppyy.gbl, "sgpackets"):
        cppyy.cppdef(_ENGINE)
    return cppyy.gbl.sgpackets


def _check_times(network: dict, channels: list[dict], engine) -> None:
    """Raise ``ValueError`` for a copy ns-3 cannot send exactly as the model does."""
    sizes = {}
    for ch in channels:
        for d in ch["hops"]:
            sizes.setdefault(tuple(d), set()).update(ch["wire"].values())
    for d, spec in network.items():
        if spec["latency"] < 0 or any(f < 0 for f, _ in spec.get("down", ())):
            raise ValueError(f"{d}: negative times")
    for d, found in sizes.items():
        bandwidth = network[d]["bandwidth"]
        for size in sorted(found):
            if size < PPP_HEADER:
                raise ValueError(f"{d}: a {size}-byte copy is smaller than the {PPP_HEADER}-byte PPP header")
            model, ns3 = service_ps(size, bandwidth), engine.TxPs(bandwidth, size)
            if model < 1:
                raise ValueError(f"{d}: a {size}-byte copy takes no time at {bandwidth} bit/s")
            if ns3 != model:
                raise ValueError(
                    f"{d}: ns-3 serialises {size} bytes at {bandwidth} bit/s in {ns3} ps, the model in {model} ps"
                )


def _periods(spec: dict) -> int:
    """How many up periods a direction has: one, and one more after each recovery."""
    return 1 + sum(recover is not None for _, recover in spec.get("down", ()))


def play_ns3(network: dict, channels: list[dict], emitted: dict, *, settle_ties: bool = True) -> Fates:
    """Play every copy of every channel on ns-3 and report their fates, as ``play_reference`` does.

    ``settle_ties=False`` leaves simultaneous arrivals in ns-3's own order (see the module docstring);
    it exists to show that order, and its results need not match the model's tie rule.
    """
    check_channels(network, channels)
    engine = _engine()
    _check_times(network, channels, engine)
    if any(t < 0 for t in emitted.values()):
        raise ValueError("negative emission times")

    names = sorted({node for d in network for node in d})
    index = {name: i for i, name in enumerate(names)}
    directions = list(network)
    number = {tuple(d): i for i, d in enumerate(directions)}

    engine.Begin(len(names), settle_ties)
    try:
        for d in directions:
            spec = network[d]
            buffer = UNLIMITED_BYTES if spec["buffer"] is None else spec["buffer"]
            if not 0 <= buffer <= UNLIMITED_BYTES:
                raise ValueError(f"{d}: buffer {buffer} does not fit a QueueSize")
            down = list(spec.get("down", ()))
            engine.AddDirection(
                spec["bandwidth"],
                buffer,
                [fail for fail, _ in down],
                [-1 if recover is None else recover for _, recover in down],
            )
        # the first up period of a pair's two directions shares one link if their latencies agree
        for i, (a, b) in enumerate(directions):
            spec = network[(a, b)]
            back = network.get((b, a))
            if back is not None and back["latency"] == spec["latency"]:
                if a < b:  # the pair's link is made once, by its first-named node's direction
                    link = engine.AddLink(index[a], index[b], spec["latency"])
                    engine.AddPeriod(i, link, 0)
                    engine.AddPeriod(number[(b, a)], link, 1)
            else:
                engine.AddPeriod(i, engine.AddLink(index[a], index[b], spec["latency"]), 0)
        for i, (a, b) in enumerate(directions):
            for _ in range(1, _periods(network[(a, b)])):
                engine.AddPeriod(i, engine.AddLink(index[a], index[b], network[(a, b)]["latency"]), 0)

        keys = [list(ch["wire"]) for ch in channels]
        for ch in channels:
            engine.AddChannel([number[tuple(d)] for d in ch["hops"]], list(ch["wire"].values()))
        for c, ch in enumerate(channels):
            if ch["parent"] != -1:
                mine = {key: k for k, key in enumerate(keys[c])}
                engine.AddChild(ch["parent"], c, ch["tap"], [mine.get(key, -1) for key in keys[ch["parent"]]])
        roots = [
            (c, k, emitted[key]) for c, ch in enumerate(channels) if ch["parent"] == -1 for k, key in enumerate(keys[c])
        ]
        engine.Emit([c for c, _, _ in roots], [k for _, k, _ in roots], [t for _, _, t in roots])

        engine.Run()
        if engine.InFlight():
            raise AssertionError(f"{engine.InFlight()} packets neither arrived, dropped nor lost")
        kinds, values = list(engine.Kinds()), list(engine.Values())
    finally:
        engine.End()

    stops, dropped, lost = {}, {}, {}
    i = 0
    for c, ks in enumerate(keys):
        for key in ks:
            kind, value = _KIND.get(kinds[i]), values[i]
            i += 1
            if kind is None:
                continue  # never started: its parent stopped before the tap
            if kind == "delivered":
                stops[(c, key)] = (kind, value)
            else:
                d = tuple(directions[value])
                stops[(c, key)] = (kind, d)
                counts = dropped if kind == "dropped" else lost
                counts[d] = counts.get(d, 0) + 1
    return resolve(channels, stops, dropped, lost)
