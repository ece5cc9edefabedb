"""Drover's one vocabulary of failure types: the ``type`` of every ApplicationError Drover raises, the names the
retry policies' ``non_retryable_error_types`` list, and a move outcome's ``error_type``."""

from enum import StrEnum


class ErrorType(StrEnum):
    # Kafka shows another replica list than the step expects: someone else changed the partition.
    STALE_STATE = "StaleState"
    # The topic or partition does not exist (any more).
    UNKNOWN_PARTITION = "UnknownPartition"
    # The metrics given for the estimate are unusable.
    METRICS = "Metrics"
    # Preflight found problems; nothing was changed.
    PREFLIGHT = "Preflight"
    # The estimate refused the plan (a partition that could never catch up) or could not be made.
    ESTIMATE = "Estimate"
    # The migration's input (or the state a previous run handed over) does not validate.
    INPUT = "Input"
    # The migration failed after it started changing Kafka (it stopped and cleaned up first).
    FAILED = "Failed"
    # Another migration is moving the partition.
    REFUSED = "Refused"
    # Kafka answered and refused the request for good (a replica list naming a cordoned broker, say): asking again
    # cannot help, so the call fails at once with Kafka's answer.
    KAFKA_REFUSED = "KafkaRefused"
    # A step showed no progress for the stuck time and its policy ended the move.
    STUCK = "Stuck"
