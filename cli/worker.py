"""drover worker: the Drover worker, as ``python -m drover.worker`` (and the repository's ``worker.py``) runs it."""


def worker() -> None:
    """Run the Drover worker: it polls the task queue (DROVER_TASK_QUEUE) on Temporal (DROVER_TEMPORAL_ADDRESS) and
    runs Drover's workflows and activities against the Kafka cluster of DROVER_KAFKA_BOOTSTRAP, until SIGTERM or
    SIGINT. On SIGTERM it stops polling, lets running activities finish for a grace period and exits 0; Temporal
    hands unfinished work to the next worker. Run one per Kafka cluster, each on its own task queue.

    With DROVER_DEPLOYMENT_NAME and DROVER_BUILD_ID it runs as that build of a Temporal Worker Deployment: every
    workflow stays on the build it started on, and the first worker of a new build makes it current, so an upgrade
    is: start the new workers, wait for the old build to drain, stop the old ones (README, Upgrades).

    Examples:

      DROVER_KAFKA_BOOTSTRAP=kafka-1:9092 DROVER_TEMPORAL_ADDRESS=temporal:7233 drover worker

      DROVER_DEPLOYMENT_NAME=drover DROVER_BUILD_ID=2.5.0 drover worker
    """
    from drover.worker import main

    main()
