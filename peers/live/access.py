"""``serve --secure``: per-identity passwords (mosquitto_passwd format), an ACL, and a broker that binds
every connection to its login.

Every connection logs in as an identity of its own, and acts only as that identity:

* the emulator's nodes, which ``serve`` runs: ``coordinator``, each super-peer as ``sp@<id>`` and each
  thin-peer as ``tp@<id>`` (``@`` is in no scenario id, so no node can be named like another's login);
* the subscription CLI: each thin-peer's user under the thin-peer's own id (what the operator hands out),
  and ``operator``, who may do everything.  ``coordinator`` and ``operator`` are reserved: the loader
  refuses them as ids (topologies/loader.py).

The broker replaces each client id by the login (``use_username_as_clientid``): nobody can connect under
another's client id and take its session over.  The ACL lets each login write only its own topics: a
super-peer the link directions out of it, its thin-peers' deliveries and its own control topics; a
thin-peer node its uploads, its own control topics and its subscriptions' JSON results; a thin-peer's CLI
(or a plain MQTT client under its login) only its request topic and the JSON input of its own streams
(never ``ctl/load``, which holds the clock for everyone), and it reads only its own results; only the
coordinator the plan, the clock and the collect broadcasts.  The coordinator authorises each request by
the identity its request topic names (peers/live/coordinator.py): a thin-peer subscribes only for itself
and sees and ends only its own subscriptions, and sees only the parts of the plan that are its own.
Anonymous clients are refused.
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
from topologies.errors import InputError
from topologies.loader import RESERVED_IDS
from topologies.model import Scenario

PBKDF2_ITERATIONS = 101  # what mosquitto_passwd writes for its "$7$" (PBKDF2-SHA512) entries
COORDINATOR, OPERATOR = RESERVED_IDS  # the coordinator node's login; the operator's CLI, which may do all


def super_peer_user(node: str) -> str:
    """The login of super-peer ``node``'s service."""
    return f"sp@{node}"


def thin_peer_user(peer: str) -> str:
    """The login of thin-peer ``peer``'s service (its CLI logs in as ``peer`` itself)."""
    return f"tp@{peer}"


def users(scenario: Scenario) -> list[str]:
    """Every login of ``scenario`` under ``--secure``: the nodes', then the CLI's."""
    nodes = [COORDINATOR, *map(super_peer_user, scenario.super_peers)]
    nodes += [thin_peer_user(p.id) for p in scenario.thin_peers]
    return nodes + [p.id for p in scenario.thin_peers] + [OPERATOR]


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
    """The ACL: per login, the topics it may read and write (anything else is denied)."""
    network = Network.of(scenario)
    blocks = [[f"user {COORDINATOR}", f"topic readwrite {topics.control('#')}"]]
    for node in scenario.super_peers:
        lines = [f"user {super_peer_user(node)}"]
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
        lines = [f"user {thin_peer_user(peer.id)}", f"topic write {topics.up(peer.id)}"]
        lines += [f"topic read {topics.downs(peer.id)}"]
        lines += [f"topic read {topics.control(n)}" for n in ("clock", "collect")]
        lines += [f"topic write {topics.stats(peer.id)}", f"topic write {topics.done(peer.id)}"]
        lines.append(f"topic write {topics.load(peer.id)}")
        # with --json-results and --input: the node publishes its subscriptions' JSON results and takes the
        # JSON input of its own streams, which plain clients logged in as the thin-peer read and publish
        lines.append(f"topic write {topics.results(peer.id, '#')}")
        lines += [f"topic read {topics.input(s.id)}" for s in scenario.streams if s.source == peer.id]
        blocks.append(lines)
    for identity, results in [*((p.id, topics.downs(p.id)) for p in scenario.thin_peers), (OPERATOR, None)]:
        lines = [f"user {identity}", f"topic write {topics.request(identity)}"]
        lines += [f"topic read {topics.reply(identity)}/#", f"topic read {topics.control('clock')}"]
        lines.append(f"topic read {results or topics.downs('+')}")  # the operator may watch anyone's results
        lines.append(f"topic read {topics.results(identity if results else '+', '#')}")
        lines += [f"topic write {topics.input(s.id)}" for s in scenario.streams if s.source == identity]
        blocks.append(lines)
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def secure_setup(scenario: Scenario, directory: str, broker: Broker, prefix: str) -> SecureSetup:
    """Write (or reuse, if ``directory`` has them) the password file, ACL, broker config and the nodes'
    credentials (``credentials.json``, readable by the owner only)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        raise InputError(f"--secure-dir {directory}: cannot create it ({err.strerror or err})") from None
    directory = os.path.abspath(directory)
    cred_path = os.path.join(directory, "credentials.json")
    found = _credentials(cred_path) if os.path.exists(cred_path) else {}
    # a login this scenario needs and the file lacks (another scenario's, an older layout's) gets a password
    credentials = {u: found[u] if u in found else secrets.token_urlsafe(16) for u in users(scenario)}
    if credentials != found:
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
        f"a thin-peer's CLI then connects as mqtt://<peer>:<password>@{broker.host}:{broker.port},"
        f" the operator's as mqtt://{OPERATOR}:<password>@{broker.host}:{broker.port}"
    )
    return SecureSetup(credentials, config, instructions)


def _credentials(path: str) -> dict[str, str]:
    """The logins and passwords of a ``credentials.json`` written before; InputError naming it when it is
    not one (a password file and an ACL are made from it)."""
    try:
        with open(path, encoding="utf-8") as fh:
            found = json.loads(fh.read(2**20))
    except (OSError, ValueError, RecursionError) as err:
        raise InputError(f"{path}: not a credentials file of --secure ({err})") from None
    valid = isinstance(found, dict) and all(
        isinstance(k, str) and isinstance(v, str) and k.isprintable() and ":" not in k and v.isprintable()
        for k, v in found.items()
    )
    if not valid:
        raise InputError(f"{path}: not a credentials file of --secure (expected {{login: password}})")
    return found
