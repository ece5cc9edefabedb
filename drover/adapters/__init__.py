"""Adapters to the outside world (Kafka, Temporal). The rest of Drover talks to Kafka only through KafkaAdmin."""
