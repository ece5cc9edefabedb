"""Adapters to the outside world (Kafka, Temporal). The rest of Drover talks to Kafka only through the Kafka port
(``kafka_port.KafkaPort``), which ``KafkaAdmin`` implements on a real cluster and the in-memory Kafka in tests."""
