"""The runtime: what runs a node for real (asyncio, TCP, files with fsync, real clocks).

Network layer: Kafka framing (`primitives`, `framing`, sans-IO) and the asyncio request `server`
and `client`. Node: `config` (node.properties), `storage` (quorum-state, log file, events,
dumps), `partition_store` (the broker's partition logs), `driver` (runs a BrokerNode: controller,
broker or both), `kvapi` (the KV wire API), `kafkaapi` + `kafka_service` (the Kafka
protocol on the client listener), `brokerwire` (node-to-node broker messages), `lanes` (which
connection a node-to-node request takes, and its timeout), `kvclient` (async KV client), `cli`
(`python -m nodes`).
"""
