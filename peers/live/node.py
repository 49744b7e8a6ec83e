"""``python -m peers.live.node SCENARIO SUPER_PEER mqtt://HOST:PORT``: one super-peer in its own process.

Started by ``serve --processes``; credentials, if any, come from the environment
(``STREAMGLOBE_MQTT_USER``/``STREAMGLOBE_MQTT_PASSWORD``) so they never show in ``ps``.  Its last will
(``ctl/alive/<node>`` = ``0``) tells the coordinator when it dies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from dataclasses import replace

from peers.live.connection import Broker
from peers.live.plans import PlanBook
from peers.live.serve import FOREVER_S
from peers.live.superpeer_service import SuperPeerService
from peers.live.topics import Topics
from topologies.loader import load_scenario


async def run_node(args: argparse.Namespace) -> None:
    scenario = load_scenario(args.scenario)
    if args.forever:
        scenario = replace(scenario, duration=FOREVER_S)
    broker = Broker.parse(args.broker)
    user = os.environ.get("STREAMGLOBE_MQTT_USER")
    if user:
        broker = broker.as_user(user, os.environ.get("STREAMGLOBE_MQTT_PASSWORD"))
    service = SuperPeerService(args.node, PlanBook(scenario), broker, Topics(args.prefix))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(service.close()))
    await service.run()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m peers.live.node")
    parser.add_argument("scenario")
    parser.add_argument("node")
    parser.add_argument("broker")
    parser.add_argument("--prefix", default="streamglobe")
    parser.add_argument("--forever", action="store_true")
    asyncio.run(run_node(parser.parse_args()))


if __name__ == "__main__":
    main()
