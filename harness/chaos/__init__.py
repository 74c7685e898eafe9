"""A chaos Kafka cluster for application tests: `ChaosCluster` and the pytest plugin's `kafka_chaos` fixture."""
