"""Timeouts and retry policies, each with the reason for its value."""

import dataclasses
from datetime import timedelta
from typing import TypedDict

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from drover.models.errors import ErrorType


class CallOptions(TypedDict, total=False):
    """The options of one kind of activity call, passed as ``**options`` to ``workflow.execute_activity_method`` or
    ``execute_local_activity_method``: typed, so a misspelt or mistyped option fails the type check rather than the
    workflow."""

    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    cancellation_type: ActivityCancellationType


class ActivityOptions(CallOptions, total=False):
    """Options only a (non-local) activity takes: a heartbeat."""

    heartbeat_timeout: timedelta


# Kafka admin calls that answer at once. A minute covers a slow controller; retries with backoff ride out a
# broker restart, and give up after about ten minutes so a dead cluster surfaces as a failed workflow.
QUICK_CALL = CallOptions(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=12,
        non_retryable_error_types=[ErrorType.STALE_STATE, ErrorType.UNKNOWN_PARTITION],
    ),
)

# A write that must not be overtaken by the undo a cancel starts (a flow's cordon): QUICK_CALL, waited for to its
# end even when the workflow is cancelled, so the undo's writes come after its own.
WAITED_CALL: CallOptions = {**QUICK_CALL, "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED}

# A new coordinator's check that its workers reach its Kafka cluster: everything it does waits for the answer, so it
# waits out a Kafka that does not answer (retried like QUICK_CALL, without end) rather than failing the coordinator.
BINDING_CALL: CallOptions = {
    **QUICK_CALL,
    "retry_policy": dataclasses.replace(QUICK_CALL["retry_policy"], maximum_attempts=0),
}

# Joining the cluster's coordinator checks the plan's partitions against those of every running migration, reading
# the moves files of large plans (a few seconds per 100k moves): retried like QUICK_CALL, with room for that.
JOIN: CallOptions = {**QUICK_CALL, "start_to_close_timeout": timedelta(minutes=5)}

# Waiting for Kafka to finish a step copies data and can take hours under a throttle, so the bound is the
# heartbeat (sent at every poll, at least every second): a worker that dies is noticed within 20 seconds and the
# wait resumes on another; an admin call that hangs longer than that is abandoned and tried again.
STEP_WAIT = ActivityOptions(
    start_to_close_timeout=timedelta(days=7),
    heartbeat_timeout=timedelta(seconds=20),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        non_retryable_error_types=[ErrorType.STALE_STATE, ErrorType.UNKNOWN_PARTITION],
    ),
)

# Issuing a step: an admin call that answers at once, retried like QUICK_CALL. It heartbeats, and a cancel waits for
# it to end (WAIT_CANCELLATION_COMPLETED): the move then cancels the step it issued, never looking before the
# call has landed on Kafka and leaving a reassignment nobody tracks.
STEP_CALL: ActivityOptions = {
    **QUICK_CALL,
    "heartbeat_timeout": timedelta(seconds=20),
    "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
}

# How long issuing a step also waits for Kafka to finish it (StepRequest.settle_s). An empty or small partition's step
# is done within a second or two, and is then one activity instead of an alter and a wait; a step still copying after
# this is waited for by wait_step, heartbeating, with its stuck detection. Short enough that a step which will take
# hours holds the issuing activity only briefly, and at most half the stuck time so stuck detection is not delayed.
STEP_SETTLE_S = 2.0

# Preflight reads the whole plan's partitions, configs and log dirs: a few calls that answer at once, retried like
# QUICK_CALL. A plan that does not fit the cluster will not fit it on a retry either, so ErrorType.PREFLIGHT fails the
# migration at once.
PREFLIGHT = ActivityOptions(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=dataclasses.replace(QUICK_CALL["retry_policy"], non_retryable_error_types=[ErrorType.PREFLIGHT]),
)

# The estimate samples write rates over a window and then runs a Spark job (heartbeating throughout), which starts a
# session the first time (seconds) and takes under a minute for a million partitions on one machine. Bad metrics stay
# bad.
ESTIMATE = ActivityOptions(
    start_to_close_timeout=timedelta(hours=1),
    heartbeat_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=5),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=5,
        non_retryable_error_types=[ErrorType.METRICS],
    ),
)

# Leaving the cluster's coordinator: it answers once the throttle is rewritten, waiting up to two minutes for a
# broker that is down (CLEAR_WAIT below); retried like QUICK_CALL.
LEAVE_CALL: CallOptions = {**QUICK_CALL, "start_to_close_timeout": timedelta(minutes=5)}

# -- the cluster's coordinator (ClusterWorkflow) -------------------------------------------------------------------

# How often the coordinator checks that the migrations holding slots still run (and orphaned moves have ended).
CHECK_EVERY = timedelta(seconds=20)
# How often each migration with moves in flight is told what they have cost the clients so far.
COSTS_TOLD_EVERY = timedelta(minutes=1)
# Moves cancelled after their migration ended are checked this often until they have ended.
ORPHAN_CHECK_EVERY = timedelta(seconds=5)
# A leave waits this long for a broker that is down to take its throttle off, trying again this often; the
# coordinator goes on trying after that, on its checks.
CLEAR_WAIT = timedelta(seconds=120)
CLEAR_RETRY = timedelta(seconds=2)
# A join under the ID of a migration that ended without leaving waits this long for its moves to end (the join
# activity's own timeout is a minute); still moving then, their partitions are refused as another migration's.
REJOIN_WAIT = timedelta(seconds=40)
# A coordinator that takes over from a lost one keeps the lost one's throttle entries this long at most, waiting
# for the running migrations to join it with their moves in flight.
TAKE_OVER_WAIT = timedelta(seconds=60)
# The disks that moves waiting or in flight copy onto are read again once their last reading is this old.
DISK_READ_EVERY = timedelta(seconds=10)
DISK_CALL: CallOptions = {
    **QUICK_CALL,
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": dataclasses.replace(QUICK_CALL["retry_policy"], maximum_attempts=3),
}
# The throttle band reads the brokers' traffic over a window this long, this long after its last reading; the
# reading runs beside the coordinator's passes, which do not wait for it.
BAND_WINDOW = timedelta(seconds=5)
BAND_READ_EVERY = timedelta(seconds=5)
TRAFFIC_CALL: ActivityOptions = {
    **QUICK_CALL,
    "heartbeat_timeout": timedelta(seconds=20),
    "retry_policy": dataclasses.replace(QUICK_CALL["retry_policy"], maximum_attempts=2),
}
# A freeze or unfreeze not yet delivered to a move (it had not started) is sent again this soon.
RESEND_EVERY = timedelta(seconds=1)
# A freeze is answered once every move in flight has been told, or after this long.
FREEZE_WAIT = timedelta(seconds=30)
# A decommission's verify that finds leaders left looks again this often, this many times (elections take a moment).
VERIFY_EVERY = timedelta(seconds=2)
VERIFY_LOOKS = 15
