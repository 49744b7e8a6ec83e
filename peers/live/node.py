"""``python -m peers.live.node SCENARIO mqtt://HOST:PORT SUPER_PEER...``: super-peers in their own process.

Started by ``serve --processes``; each super-peer keeps its own broker connection (its own user, ACL and
last will ``ctl/alive/<node>`` = ``0``, which tells the coordinator when the process dies), and they share
one :class:`PlanBook`, so each plan version is decoded and each epoch installed once per process.
Credentials, if any, come from the environment (``STREAMGLOBE_MQTT_CREDENTIALS``, JSON ``{node: the
password of its login}``, peers/live/access.py) so they never show in ``ps``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from dataclasses import replace

from peers.live.access import super_peer_user
from peers.live.connection import Broker
from peers.live.plans import PlanBook
from peers.live.serve import CREDENTIALS_ENV, FOREVER_S
from peers.live.superpeer_service import SuperPeerService
from peers.live.thinpeer_service import BATCH_S
from peers.live.topics import Topics
from topologies.errors import EmulatorError, EngineError, InputError
from topologies.loader import load_scenario


async def run_nodes(args: argparse.Namespace) -> None:
    """Raises :class:`InputError` for a node that is not a super-peer of the scenario."""
    scenario = load_scenario(args.scenario)
    if args.forever:
        scenario = replace(scenario, duration=FOREVER_S)
    unknown = sorted(set(args.nodes) - set(scenario.super_peers))
    if unknown:
        raise InputError(f"{args.scenario}: no super-peer {unknown[0]!r}")
    broker = Broker.parse(args.broker)
    try:
        credentials = json.loads(os.environ.get(CREDENTIALS_ENV, "{}"))
    except ValueError:
        raise EngineError(f"environment variable {CREDENTIALS_ENV}: not JSON") from None
    book = PlanBook(scenario, args.run, args.nodes)
    topics = Topics(args.prefix)
    flush_s = args.batch_ms / 1000
    services = []
    for node in args.nodes:
        login = broker.as_user(super_peer_user(node), credentials[node]) if credentials else broker
        services.append(SuperPeerService(node, book, login, topics, flush_s=flush_s))
    loop = asyncio.get_running_loop()
    closing: list[asyncio.Task] = []

    def stop() -> None:
        closing.extend(loop.create_task(service.close()) for service in services)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(service.run() for service in services))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m peers.live.node")
    parser.add_argument("scenario")
    parser.add_argument("broker")
    parser.add_argument("nodes", nargs="+", metavar="super_peer")
    parser.add_argument("--prefix", default="streamglobe")
    parser.add_argument("--forever", action="store_true")
    parser.add_argument("--run", default="", help="the run id the coordinator stamps on clock and plan messages")
    parser.add_argument("--batch-ms", type=float, default=BATCH_S * 1000, help="longest wall ms outputs wait")
    args = parser.parse_args()
    try:
        asyncio.run(run_nodes(args))
    except EmulatorError as err:  # one line on stderr, as from run.py; serve reports the exit code
        print(f"error: {' '.join(args.nodes)}: {err}", file=sys.stderr)
        sys.exit(2 if isinstance(err, InputError) else 1)


if __name__ == "__main__":
    main()
