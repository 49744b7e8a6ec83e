"""A Mosquitto broker on a free 127.0.0.1 port with a generated config, for the live-mode tests."""

from __future__ import annotations

import pytest

from peers.live.broker import Mosquitto, mosquitto_binary


@pytest.fixture
def mosquitto(tmp_path):
    if mosquitto_binary() is None:
        pytest.skip("mosquitto is not installed (apt-get install mosquitto mosquitto-clients; CI installs it)")
    broker = Mosquitto(str(tmp_path)).start()
    yield broker
    broker.stop()
