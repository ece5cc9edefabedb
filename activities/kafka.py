"""Kafka activities: model in, a call on the Kafka port (``KafkaPort``; ``KafkaAdmin`` on a real cluster), model out.
They block, so the worker runs them on a thread pool.

Failure types a workflow can match on (raised non-retryable):
- ``ErrorType.STALE_STATE``: Kafka shows a replica list the step did not expect; someone else changed the partition.
- ``ErrorType.UNKNOWN_PARTITION``: the topic or partition does not exist.
"""

import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from drover.activities.observer import KafkaObserver
from drover.activities.writes import ReassignmentWriter
from drover.adapters.kafka_port import KafkaAdminError, KafkaPort, KafkaRefusedError
from drover.models import OngoingReassignment, PartitionState, StepRequest, StepStatus, TopicPartition
from drover.models.errors import ErrorType
from drover.models.moves import CopyRequest, CopySource

# How long Kafka may show a finished step with a replica list other than the step's target before Drover calls it
# stale: brokers' metadata can trail the controller by a moment right after a reassignment completes.
STALE_GRACE_S = 10.0
# How long alter_step and prepare_copy look again at a partition whose list is neither the expected one nor the one
# they write before refusing to act, and cancel_step at one that still shows a cancelled step's list: long enough for
# a lagging broker to catch up, short enough to report real interference promptly.
FENCE_GRACE_S = 5.0
# How often the short waits (a cancel settling, a leader elected, a lagging broker) look again. A waiting step reads
# the worker's shared look at Kafka instead (``KafkaObserver``: one round of calls every half second for all of them).
POLL_MIN_S = 0.25
# How long a waiting step waits for the observer's next look before its activity fails (and is retried).
LOOK_TIMEOUT_S = 60.0
# How often a step that may be stuck has the size of its new replicas read (DescribeLogDirs on their brokers):
# a copy that is slow but growing is progress, not a stuck move. At least twice within the stuck time, so a copy
# that grows is seen to grow before the step could be called stuck.
SIZE_EVERY_S = 5.0


class StaleStateError(ApplicationError):
    def __init__(self, message: str):
        super().__init__(message, type=ErrorType.STALE_STATE, non_retryable=True)


class KafkaActivities:
    """The moves' Kafka calls. Those the moves run as local activities (describe_partition, min_insync,
    prepare_copy, elect_leader) end within seconds on their own and are never interrupted by a cancel raised in
    their thread: such an exception, delivered just as the call returns, lands in the worker's thread pool instead
    and ends that thread, and a worker whose pool has lost its threads runs no activity again (sdk-python#1648)."""

    def __init__(self, admin: KafkaPort):
        self.admin = admin
        # One per worker and cluster: every waiting step reads Kafka through it.
        self.observer = KafkaObserver(admin)
        self.writer = ReassignmentWriter(admin)

    @activity.defn(name="describe_partition", no_thread_cancel_exception=True)
    def describe_partition(self, tp: TopicPartition) -> PartitionState:
        return self._partition(tp)

    @activity.defn(name="min_insync", no_thread_cancel_exception=True)
    def min_insync(self, topic: str) -> int:
        """The topic's effective min.insync.replicas (its own setting, else the broker or cluster default)."""
        try:
            configs = self.admin.describe_topic_configs([topic])[topic]
        except KafkaAdminError as e:
            raise ApplicationError(str(e), type=ErrorType.UNKNOWN_PARTITION, non_retryable=True) from e
        return int(configs.get("min.insync.replicas", "1"))

    @activity.defn(name="alter_step")
    def alter_step(self, req: StepRequest) -> StepStatus | None:
        """Issue one step, fenced: only if Kafka still shows ``req.expected``.

        A retry after the step was already issued (a worker that died after the call) finds Kafka reassigning to,
        or already at, ``req.target`` and does nothing, so no step is applied twice.

        With ``req.settle_s``, then wait that long for Kafka to finish the step: its status when it has, None when
        it is still going (``wait_step`` then waits for it). Without, None at once.
        """
        activity.heartbeat()
        with self.observer.watching(req.ref):
            # The fence reads the worker's shared look at Kafka, taken after this call began.
            after, ongoing, state = self._observed(req.ref, time.monotonic())
            if ongoing:
                if ongoing[0].target == req.target:
                    return self._settled(req, after)
                raise StaleStateError(
                    f"{req.ref} is being reassigned to {ongoing[0].target} by someone else; expected no reassignment"
                )
            # Brokers learn a finished step from the controller moments apart; a broker still showing the list
            # before the last step is lagging, not evidence that someone else acted. Look again for a few seconds.
            fenced = [req.expected] if req.reordered is None else [req.expected, req.reordered]
            deadline = time.monotonic() + FENCE_GRACE_S
            while state.replicas not in (*fenced, req.target) and time.monotonic() < deadline:
                activity.heartbeat()
                after, ongoing, state = self._observed(req.ref, after)
        if state.replicas == req.target:
            return self._settled(req, after)
        if state.replicas not in fenced:
            raise StaleStateError(f"{req.ref} has replicas {state.replicas}, expected {req.expected}; not acting")
        activity.logger.info("alter step %s: %s -> %s", req.ref, req.expected, req.target)
        # Written with the other steps issued within the same few milliseconds, in one call. A cancel that comes
        # meanwhile waits until the call is made: the move then finds the step on Kafka and undoes it.
        with activity.shield_thread_cancel_exception():
            try:
                self.writer.alter(req.ref, req.target)
            except KafkaRefusedError as e:
                # Refused for good (a list naming a cordoned broker): the step fails now, with Kafka's answer.
                raise ApplicationError(str(e), type=ErrorType.KAFKA_REFUSED, non_retryable=True) from e
        return self._settled(req, time.monotonic())

    def _settled(self, req: StepRequest, after: float) -> StepStatus | None:
        """The step's status once Kafka has finished it (no reassignment, the target's list, all in sync), looking
        for ``req.settle_s`` from the first look after ``after``; None when it is still going by then."""
        if req.settle_s is None:
            return None
        deadline = time.monotonic() + req.settle_s
        with self.observer.watching(req.ref):
            while time.monotonic() < deadline:
                # A cancel (the move stopped) is raised here: the move then undoes the step it issued.
                activity.heartbeat()
                after, ongoing, state = self._observed(req.ref, after)
                if not ongoing and state.replicas == req.target and set(req.target) <= set(state.isr):
                    return StepStatus(state=state)
        return None

    @activity.defn(name="wait_step")
    def wait_step(self, req: StepRequest) -> StepStatus:
        """Poll until Kafka has finished the step: no reassignment left, replicas equal the target, all in sync.

        With ``req.stuck_after_s``, return early marked stuck when nothing moves for that long: no change in the
        replica list, the in-sync set, or the bytes the new replicas hold (a broker that is down holds none).
        """
        stale_since: float | None = None
        seen: tuple | None = None
        last_progress = sizes_at = after = time.monotonic()
        sizes: tuple = ()
        with self.observer.watching(req.ref):
            while True:
                # The observer's first look after the last one this step read (so after the step was issued).
                after, ongoing, state = self._observed(req.ref, after)
                activity.heartbeat(state.model_dump())
                if not ongoing:
                    if state.replicas == req.target and set(req.target) <= set(state.isr):
                        return StepStatus(state=state)
                    if state.replicas != req.target:
                        stale_since = stale_since or time.monotonic()
                        if time.monotonic() - stale_since > STALE_GRACE_S:
                            raise StaleStateError(
                                f"{req.ref} stopped reassigning at {state.replicas}, not at the step's {req.target}; "
                                f"someone else cancelled or changed it"
                            )
                else:
                    stale_since = None
                if req.stuck_after_s is not None:
                    now = time.monotonic()
                    if ongoing and now - sizes_at >= min(SIZE_EVERY_S, req.stuck_after_s / 2):
                        # A read that fails (a broker going down) tells nothing: the sizes seen last stand.
                        found, sizes_at = self._new_replica_sizes(req.ref, ongoing[0].adding), now
                        sizes = sizes if found is None else found
                    signature = (tuple(state.replicas), tuple(sorted(state.isr)), sizes)
                    if signature != seen:
                        seen, last_progress = signature, now
                    elif now - last_progress >= req.stuck_after_s:
                        return StepStatus(state=state, stuck=True, idle_s=round(now - last_progress, 1))

    def _observed(self, tp: TopicPartition, after: float) -> tuple[float, list[OngoingReassignment], PartitionState]:
        """The partition from the worker's shared look at Kafka (taken after ``after``): when that look started, its
        reassignment in flight (a list of at most one) and its state."""
        try:
            started, ongoing, state = self.observer.look(tp, after, LOOK_TIMEOUT_S)
        except KafkaAdminError as e:
            if _names_unknown_partition(e):
                raise ApplicationError(str(e), type=ErrorType.UNKNOWN_PARTITION, non_retryable=True) from e
            raise
        if state is None:
            raise ApplicationError(
                f"partition {tp} does not exist", type=ErrorType.UNKNOWN_PARTITION, non_retryable=True
            )
        return started, [] if ongoing is None else [ongoing], state

    def _new_replica_sizes(self, tp: TopicPartition, adding: list[int]) -> tuple | None:
        """Bytes each adding replica holds so far, from the brokers that are up (a down broker is not asked); None
        when they could not be read."""
        alive = set(self.admin.describe_cluster().broker_ids)
        asked = sorted(set(adding) & alive)
        if not asked:
            return ()
        try:
            replicas = self.admin.describe_log_dirs(asked)
        except KafkaAdminError:
            return None
        return tuple(
            sorted((r.broker, r.size_bytes) for r in replicas if (r.topic, r.partition) == (tp.topic, tp.partition))
        )

    @activity.defn(name="cancel_step")
    def cancel_step(self, req: StepRequest) -> PartitionState:
        """Cancel the step if Kafka is still carrying it out (Kafka then reverts the partition to the list before
        the step, KIP-236, written back in its order, or in ``req.restore``'s: the list before the copy's leader was
        put first); a step that already finished stays. Returns the partition once it is settled."""
        ongoing = self.admin.list_reassignments([req.ref])
        cancelled = bool(ongoing) and ongoing[0].target == req.target
        if cancelled:
            activity.logger.info("cancel step %s: %s -> %s", req.ref, req.expected, req.target)
            self.admin.alter_reassignments({req.ref: None})
        while self.admin.list_reassignments([req.ref]):
            activity.heartbeat()
            time.sleep(POLL_MIN_S)
        # Brokers learn of the cancel from the controller moments apart: one still showing the step's list is
        # lagging. A cancelled step settles on the list before it; one that was not in flight on either list.
        settled = [req.expected] if cancelled else [req.expected, req.target]
        if req.reordered is not None:
            settled.append(req.reordered)
        state = self._settle_on(req.ref, settled)
        order = req.expected if req.restore is None else req.restore
        if cancelled and state.replicas != order and sorted(state.replicas) == sorted(order):
            state = self._reorder(req.ref, order)
        return state

    def _settle_on(self, tp: TopicPartition, lists: list[list[int]]) -> PartitionState:
        """The partition once Kafka shows one of ``lists`` (or as it is after FENCE_GRACE_S)."""
        deadline = time.monotonic() + FENCE_GRACE_S
        state = self._partition(tp)
        while state.replicas not in lists and time.monotonic() < deadline:
            activity.heartbeat()
            time.sleep(POLL_MIN_S)
            state = self._partition(tp)
        return state

    def _reorder(self, tp: TopicPartition, order: list[int], shown: bool = False) -> PartitionState:
        """Kafka reverts a cancelled step to the replicas it had, but in the order of the list it was moving to
        (a step [3, 1, 2] -> [2, 3, 4] cancelled leaves [2, 3, 1]): the list before the step is written back, order
        and preferred leader included. It copies nothing; a refusal (a cordoned broker) leaves the order as it is.

        With ``shown``, a reorder whose outcome is unknown (the write failed on the client, which does not say it
        did not land, or Kafka does not show it within FENCE_GRACE_S) fails, to be tried again: the caller is told
        only a list Kafka holds."""
        activity.logger.info("%s: the replicas in the order %s", tp, order)
        try:
            self.writer.alter(tp, order)
        except KafkaAdminError as e:
            if shown and not isinstance(e, KafkaRefusedError):
                raise ApplicationError(f"{tp}: the reorder to {order} may not have been written: {e}") from e
            activity.logger.warning("%s left in another order than %s: %s", tp, order, e)
            return self._partition(tp)
        return self._reordered(tp, order, shown)

    def reorder(self, tp: TopicPartition, order: list[int]) -> PartitionState:
        """The partition's replicas written in ``order`` (it copies nothing) and its first elected; a write not known
        to have landed fails, to be tried again."""
        return self._reorder(tp, order, shown=True)

    def _reordered(self, tp: TopicPartition, order: list[int], shown: bool) -> PartitionState:
        """Once the reorder to ``order`` has ended and Kafka shows it, its first replica elected leader."""
        while self.admin.list_reassignments([tp]):
            activity.heartbeat()
            time.sleep(POLL_MIN_S)
        state = self._settle_on(tp, [order])
        if shown and state.replicas != order:
            raise ApplicationError(
                f"{tp}: Kafka shows {state.replicas}, not the reorder to {order}, after it was written"
            )
        if state.leader != order[0] and order[0] in state.isr:
            state = self.elect_leader(tp)
        return state

    @activity.defn(name="prepare_copy", no_thread_cancel_exception=True)
    def prepare_copy(self, req: CopyRequest) -> CopySource:
        """Before a step that adds replicas: with ``req.leader``, make it the leader the copies come from (first in
        the list, fenced on ``req.expected``, then elected: a reorder copies nothing). Kafka keeps that leader while
        the new replicas catch up, even when the step drops it. Then the leader's log size, from DescribeLogDirs.

        A leader no longer in sync, or a reorder Kafka refuses, leaves the leader as it is: the copy then comes from
        it. A reorder not known to have landed fails the call, which is tried again: a retry finds the list already
        reordered (and does not reorder it again) or as it was, so the step is fenced on the list Kafka holds."""
        order = req.order
        # Right after the step before has ended, the broker asked may still show its list: looked at again, as a
        # step's own fence does, before it is taken for someone else's change.
        state = self._partition(req.ref) if order is None else self._settle_on(req.ref, [req.expected, order])
        if order is not None and state.replicas not in (req.expected, order):
            raise StaleStateError(f"{req.ref} has replicas {state.replicas}, expected {req.expected}; not acting")
        if order is not None and req.leader in state.isr and state.leader != req.leader:
            if state.replicas != order:
                activity.logger.info(
                    "%s: %s leads the copy, in its zone: %s -> %s", req.ref, req.leader, state.replicas, order
                )
                state = self._reorder(req.ref, order, shown=True)
            else:
                state = self._reordered(req.ref, order, shown=True)
        return CopySource(state=state, size_bytes=self._leader_size(state))

    def _leader_size(self, state: PartitionState) -> int | None:
        """The partition's log size on its leader (what a new replica copies: with tiered storage, its local log);
        None when it cannot be read."""
        if state.leader is None:
            return None
        try:
            replicas = self.admin.describe_log_dirs([state.leader])
        except KafkaAdminError:
            return None
        key = (state.topic, state.partition)
        return next((r.size_bytes for r in replicas if (r.topic, r.partition) == key), None)

    @activity.defn(name="wait_online")
    def wait_online(self, tp: TopicPartition) -> PartitionState:
        """Wait (heartbeating) until the partition has a replica in sync again: an offline partition is never
        stepped."""
        delay = POLL_MIN_S
        while True:
            state = self._partition(tp)
            if not state.offline:
                return state
            activity.heartbeat(state.model_dump())
            time.sleep(delay)
            delay = min(5.0, delay * 2)

    @activity.defn(name="elect_leader", no_thread_cancel_exception=True)
    def elect_leader(self, tp: TopicPartition) -> PartitionState:
        """Elect the preferred leader (with the other elections asked for within the same few milliseconds, in one
        call) and wait until Kafka reports it leading."""
        self.writer.elect(tp)
        deadline = time.monotonic() + 30
        while True:
            state = self._partition(tp)
            if state.leader == state.replicas[0] or time.monotonic() > deadline:
                return state
            activity.heartbeat()
            time.sleep(POLL_MIN_S)

    def _partition(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.admin.describe_partition(tp)
        except KafkaAdminError as e:
            if _names_unknown_partition(e):
                raise ApplicationError(str(e), type=ErrorType.UNKNOWN_PARTITION, non_retryable=True) from e
            raise


def _names_unknown_partition(e: KafkaAdminError) -> bool:
    """The partition or its topic does not exist: its step fails for good (anything else is retried)."""
    return "does not exist" in str(e) or "UNKNOWN_TOPIC" in str(e).upper()
