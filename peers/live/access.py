"""``serve --secure``: per-node passwords (mosquitto_passwd format) and an ACL for Mosquitto.

Every node is a broker user: ``coordinator``, each super-peer and each thin-peer under its own id.  The ACL
lets a thin-peer publish only its own upload topic and its own request topic and read only its own
deliveries (and its own CLI replies), a super-peer read and write only the link directions at it and its
thin-peers' topics, and only the coordinator write the plan, the clock and the collect broadcasts;
anonymous clients are refused.  The coordinator authorises each request by the identity its request topic
names (peers/live/coordinator.py): a thin-peer subscribes only for itself and sees and ends only its own
subscriptions; the ``coordinator`` user (the operator's CLI) may do everything.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from dataclasses import dataclass

from network.routing import Network
from peers.live.broker import broker_config, mosquitto_binary
from peers.live.connection import Broker
from peers.live.topics import Topics
from topologies.model import Scenario

PBKDF2_ITERATIONS = 101  # what mosquitto_passwd writes for its "$7$" (PBKDF2-SHA512) entries


@dataclass(frozen=True)
class SecureSetup:
    credentials: dict[str, str]  # user -> password
    config_path: str
    instructions: str


def password_line(user: str, password: str, salt: bytes | None = None) -> str:
    """One mosquitto password-file line: ``user:$7$iterations$salt$hash`` (PBKDF2-SHA512, base64)."""
    salt = salt or secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ITERATIONS)
    return f"{user}:$7${PBKDF2_ITERATIONS}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def acl_text(scenario: Scenario, topics: Topics) -> str:
    network = Network.of(scenario)
    blocks = [["user coordinator", f"topic readwrite {topics.control('#')}"]]
    for node in scenario.super_peers:
        lines = [f"user {node}"]
        for a, b in sorted(network.directions):
            if b == node:
                lines.append(f"topic read {topics.link(a, b)}")
            if a == node:
                lines.append(f"topic write {topics.link(a, b)}")
        for peer in scenario.thin_peers:
            if peer.attach == node:
                lines += [f"topic read {topics.up(peer.id)}", f"topic write {topics.down(peer.id, '#')}"]
        lines += [f"topic read {topics.control(n)}" for n in ("plan", "clock", "collect")]
        lines += [f"topic write {topics.stats(node)}", f"topic readwrite {topics.alive(node)}"]
        lines += [f"topic write {topics.ready(node)}", f"topic write {topics.load(node)}"]
        blocks.append(lines)
    for peer in scenario.thin_peers:
        lines = [f"user {peer.id}", f"topic write {topics.up(peer.id)}", f"topic read {topics.downs(peer.id)}"]
        lines += [f"topic read {topics.control(n)}" for n in ("clock", "collect")]
        lines += [f"topic write {topics.stats(peer.id)}", f"topic write {topics.done(peer.id)}"]
        lines.append(f"topic write {topics.load(peer.id)}")
        lines += [f"topic write {topics.request(peer.id)}", f"topic read {topics.reply(peer.id)}/#"]
        # plain clients logging in as the thin-peer: its JSON results, and the JSON input of its streams
        lines.append(f"topic readwrite {topics.results(peer.id, '#')}")
        lines += [f"topic readwrite {topics.input(s.id)}" for s in scenario.streams if s.source == peer.id]
        blocks.append(lines)
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def secure_setup(scenario: Scenario, directory: str, broker: Broker, prefix: str) -> SecureSetup:
    """Write (or reuse, if ``directory`` has them) the password file, ACL, broker config and the nodes'
    credentials (``credentials.json``, readable by the owner only)."""
    os.makedirs(directory, exist_ok=True)
    directory = os.path.abspath(directory)
    cred_path = os.path.join(directory, "credentials.json")
    if os.path.exists(cred_path):
        with open(cred_path, encoding="utf-8") as fh:
            credentials = json.load(fh)
    else:
        users = ["coordinator", *scenario.super_peers, *(p.id for p in scenario.thin_peers)]
        credentials = {u: secrets.token_urlsafe(16) for u in users}
        fd = os.open(cred_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(credentials, fh, indent=1)
    passwd, acl = os.path.join(directory, "passwd"), os.path.join(directory, "acl")
    for path, text in [
        (passwd, "\n".join(password_line(u, p) for u, p in credentials.items()) + "\n"),
        (acl, acl_text(scenario, Topics(prefix))),
    ]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    config = os.path.join(directory, "mosquitto.conf")
    with open(config, "w", encoding="utf-8") as fh:
        fh.write(broker_config(directory, broker.port, passwd, acl))
    binary = mosquitto_binary() or "mosquitto"
    instructions = (
        f"secure broker files in {directory} (passwords in credentials.json); start the broker with:\n"
        f"  {binary} -c {config}\n"
        f"a thin-peer's CLI then connects as mqtt://<peer>:<password>@{broker.host}:{broker.port}"
    )
    return SecureSetup(credentials, config, instructions)
