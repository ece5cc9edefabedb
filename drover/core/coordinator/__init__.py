"""A Kafka cluster's coordinator: its state (``state``), the throttle band, the disk gate, the time windows' gates,
the registry of holders, the take-over after a lost run and the status it answers. Pure."""
