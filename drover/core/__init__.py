"""The pure core's state machines, one package each: ``migration`` (a migration's phases, moves in flight and
operator actions), ``move`` (one partition's steps), ``coordinator`` (what a Kafka cluster's migrations share) and
``decommission`` (emptying and demoting brokers). No Temporal, Kafka, Spark, file or clock: the time is passed in."""
