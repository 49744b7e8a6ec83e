"""Live mode: super-peers, thin-peers and a coordinator as asyncio services over MQTT."""
