"""drover worker: the Drover worker, as ``python -m drover.worker`` (and the repository's ``worker.py``) runs it."""


def worker() -> None:
    """Run the Drover worker: it polls the task queue (DROVER_TASK_QUEUE) on Temporal (DROVER_TEMPORAL_ADDRESS) and
    runs Drover's workflows and activities against the Kafka cluster of DROVER_KAFKA_BOOTSTRAP, until SIGTERM or
    SIGINT. On SIGTERM it stops polling, lets running activities finish for a grace period and exits 0; Temporal
    hands unfinished work to the next worker. Run one per Kafka cluster, each on its own task queue.

    Example:

      DROVER_KAFKA_BOOTSTRAP=kafka-1:9092 DROVER_TEMPORAL_ADDRESS=temporal:7233 drover worker
    """
    from drover.worker import main

    main()
