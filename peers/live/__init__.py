"""Live mode (issue 5): super-peers, thin-peers and a coordinator as asyncio services over MQTT."""
