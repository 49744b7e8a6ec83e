"""The MQTT topic layout of a live emulator (documented in docs/LIVE.md).

Every topic starts with a prefix (default ``streamglobe``) so several emulators can share a broker.  Data
topics, one per emulated link direction:

* ``<prefix>/up/<thin-peer>``: a source thin-peer's uploads to its super-peer (access link, upward);
* ``<prefix>/link/<from>/<to>``: one backbone link direction between two super-peers;
* ``<prefix>/down/<thin-peer>/<subscription>``: a subscription's results, from the thin-peer's super-peer
  (access link, downward; one topic per subscription so a client can read just its own results).

Control topics (JSON, QoS 1), all under ``<prefix>/ctl/``:

* ``plan`` (retained): the plan version in force and the run-time subscriptions it includes;
* ``clock`` (retained): the emulated clock (wall time of emulated 0, speed) and the planning horizon;
* ``request/<identity>``: requests of the subscription CLI to the coordinator, answered on
  ``reply/<client id>`` (the client id starts with the identity; under ``--secure`` the identity is the
  broker user, and the ACL lets each user write only its own request topic);
* ``stats/<node>``: a node's counters, answering a ``collect`` broadcast;
* ``alive/<node>`` (retained): ``1`` while a node is connected, its last will ``0`` when it dies;
* ``ready/<super-peer>``: the plan versions a super-peer has decoded (the clock starts when all have version 0);
* ``load/<node>``: ``1`` when a super-peer's or thin-peer's incoming queue passed the high-water mark or its
  messages arrive late (connection.Pressure), ``0`` when it caught up again;
* ``done/<thin-peer>``: a source has emitted its last tuple before the end time.

Topics for plain MQTT clients (JSON, so that ``mosquitto_sub`` and ``mosquitto_pub`` can take part):

* ``<prefix>/results/<thin-peer>/<subscription>``: with ``serve --json-results``, a subscription's results,
  one JSON object per tuple and line;
* ``<prefix>/in/<stream>``: with ``serve --input STREAM``, the tuples of that stream, published by any
  client as JSON objects (one, an array of them, or one per line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_PREFIX = "streamglobe"


class DataTopic(NamedTuple):
    """A data topic by its levels after the prefix: ``link/<from>/<to>``, ``up/<thin-peer>`` or
    ``down/<thin-peer>/<subscription>``."""

    kind: str  # "link", "up" or "down"
    node: str  # link: the super-peer sending; up, down: the thin-peer
    other: str = ""  # link: the super-peer receiving; down: the subscription

    def direction(self, homes: Mapping[str, str]) -> tuple[str, str]:
        """The emulated link direction it stands for: a backbone direction, or a thin-peer's access link
        to (up) or from (down) its super-peer, ``homes`` mapping thin-peers to their super-peers."""
        if self.kind == "link":
            return (self.node, self.other)
        home = homes[self.node]
        return (self.node, home) if self.kind == "up" else (home, self.node)

    def receiver(self, homes: Mapping[str, str]) -> str:
        """The node that reads it (and counts what crossed it)."""
        return self.direction(homes)[1]


@dataclass(frozen=True)
class Topics:
    prefix: str = DEFAULT_PREFIX

    def up(self, thin_peer: str) -> str:
        return f"{self.prefix}/up/{thin_peer}"

    def link(self, a: str, b: str) -> str:
        return f"{self.prefix}/link/{a}/{b}"

    def down(self, thin_peer: str, subscription: str) -> str:
        return f"{self.prefix}/down/{thin_peer}/{subscription}"

    def results(self, thin_peer: str, subscription: str) -> str:
        return f"{self.prefix}/results/{thin_peer}/{subscription}"

    def input(self, stream: str) -> str:
        return f"{self.prefix}/in/{stream}"

    def downs(self, thin_peer: str) -> str:
        """The filter matching every delivery topic of ``thin_peer``."""
        return f"{self.prefix}/down/{thin_peer}/+"

    def into(self, super_peer: str) -> str:
        """The filter matching every backbone direction ending at ``super_peer``."""
        return f"{self.prefix}/link/+/{super_peer}"

    def control(self, name: str) -> str:
        return f"{self.prefix}/ctl/{name}"

    def request(self, identity: str) -> str:
        return f"{self.prefix}/ctl/request/{identity}"

    def reply(self, client_id: str) -> str:
        return f"{self.prefix}/ctl/reply/{client_id}"

    def stats(self, node: str) -> str:
        return f"{self.prefix}/ctl/stats/{node}"

    def alive(self, node: str) -> str:
        return f"{self.prefix}/ctl/alive/{node}"

    def ready(self, node: str) -> str:
        return f"{self.prefix}/ctl/ready/{node}"

    def load(self, node: str) -> str:
        return f"{self.prefix}/ctl/load/{node}"

    def done(self, thin_peer: str) -> str:
        return f"{self.prefix}/ctl/done/{thin_peer}"

    def parse(self, topic: str) -> tuple[str, ...]:
        """The parts after the prefix: ``("link", a, b)``, ``("up", peer)``, ``("down", peer, sub)``,
        ``("ctl", name, ...)``; ``()`` for a topic outside this emulator."""
        head = self.prefix + "/"
        if not topic.startswith(head):
            return ()
        return tuple(topic[len(head) :].split("/"))

    @staticmethod
    def key(parts: tuple[str, ...]) -> str:
        """The name of a topic without the prefix, from its :meth:`parse` parts (``link/SP1/SP2``): how the
        nodes' counters and malformed-message counts name topics."""
        return "/".join(parts)

    def key_of(self, topic: str) -> str:
        """:meth:`key` of a whole topic (``""`` for a topic outside this emulator)."""
        return self.key(self.parse(topic))

    @staticmethod
    def data(key: str) -> DataTopic | None:
        """The data topic a :meth:`key` names, or None when it names none (another kind, a wrong number of
        levels, an empty level)."""
        parts = key.split("/")
        if not all(parts) or (parts[0], len(parts)) not in (("link", 3), ("up", 2), ("down", 3)):
            return None
        return DataTopic(*parts)

    @staticmethod
    def client_id(identity: str, token: str) -> str:
        """A subscription CLI's client id, the last levels of its reply topic: its identity, then a token
        (under ``--secure`` the ACL lets a user read only the replies under its own identity)."""
        return f"{identity}/{token}"

    @staticmethod
    def identity_of(client_id: str) -> str:
        """The identity a :meth:`client_id` belongs to."""
        return client_id.split("/", 1)[0]

    def writer(self, parts: tuple[str, ...]) -> str:
        """Who publishes the topic of these :meth:`parse` parts, as the layout says (under ``--secure`` the
        broker's ACL makes it so): a link direction's first super-peer, an upload's thin-peer, a node's own
        control topics' node, the coordinator for ``plan``, ``clock``, ``collect`` and replies; a delivery's
        super-peer is named after its thin-peer."""
        kind = parts[:1]
        if (kind == ("link",) and len(parts) == 3) or (kind == ("up",) and len(parts) == 2):
            return parts[1]
        if kind == ("down",) and len(parts) >= 2:
            return f"super-peer of {parts[1]}"
        if kind == ("in",):
            return "an input client"
        if kind == ("ctl",) and len(parts) == 3 and parts[1] != "reply":
            return parts[2]
        return "coordinator" if kind == ("ctl",) else "?"
