"""MigrationWorkflow and its cluster's coordinator (``ClusterWorkflow``): joining it (the partitions registered),
asking it for moves and hearing its grants, leaving it at the end. The coordinator admits every move and writes
every throttle."""

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.cluster import ClusterActivities
    from execution import ACTIVE, MigrationState
    from models.control import AuditEntry
    from models.coordination import Demand, Grant, JoinStep, LeaveRequest
    from models.migration import MigrationInput
    from workflows.failures import INTERRUPTIONS
    from workflows.policies import JOIN, LEAVE_CALL


class MigrationCoordination:
    """Admission and throttle over ``_s``, through the coordinator."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _input: MigrationInput | None
    _wake: bool
    _asked: tuple | None
    _describe: Callable[[], None]

    async def _ask(self) -> None:
        """Send the coordinator this migration's demand (the moves it would start, the moves it has released, its
        limits and throttle) when it has changed since the last."""
        assert self._input is not None
        s = self._s
        if not s.joined or s.rejoin_due:
            return
        candidates = s.candidates()
        leaders_moved = s.leaders_moved()
        asked = ([(m.topic, m.partition) for m in candidates], leaders_moved, s.limits, s.rate, s.broker_rates)
        if asked == self._asked and not s.released:
            return
        s.demand_seq += 1
        released, s.released = s.released, []
        demand = Demand(
            migration_id=workflow.info().workflow_id,
            run=workflow.info().first_execution_run_id,
            seq=s.demand_seq,
            candidates=candidates,
            released=released,
            leaders_moved=leaders_moved,
            limits=s.limits,
            replicas_per_step=self._input.replicas_per_step,
            rate=s.rate,
            broker_rates=s.broker_rates,
        )
        coordinator = workflow.get_external_workflow_handle(s.coordinator_id)
        try:
            await coordinator.signal("demand", demand)
        except INTERRUPTIONS as e:
            s.released = [*released, *s.released]
            if is_cancelled_exception(e):
                raise
            # The coordinator is gone (terminated, or at its history limit): join the next one, which this starts.
            workflow.logger.warning("the cluster's coordinator could not be reached (%s); joining again", e)
            s.coordinator_lost()
            self._wake = True
            return
        self._asked = asked

    async def _join(self) -> None:
        """Register with the cluster's coordinator (started if need be), with the moves in flight when it joins
        again; refused (its partitions are another migration's, or its name is bound to another Kafka cluster), the
        migration fails, with nothing changed at a first join."""
        assert self._input is not None
        s, given = self._s, self._input
        in_flight = s.window.specs()
        step = JoinStep(
            migration_id=workflow.info().workflow_id,
            run=workflow.info().first_execution_run_id,
            cluster=given.cluster,
            # A plan by reference: its moves file names its partitions.
            moves=[*s.window.waiting, *in_flight] if s.window.moves_ref is None else [],
            moves_ref=s.window.moves_ref,
            priority=given.priority,
            in_flight=in_flight,
        )
        joined = await workflow.execute_activity_method(ClusterActivities.join_cluster, step, **JOIN)
        if joined.refused is not None:
            s.fail(joined.refused)
            return
        s.joined_coordinator(joined.coordinator, joined.coordinator_id)
        # The coordinator may be a new one: it hears the whole demand.
        self._asked = None

    async def _leave(self) -> None:
        """Release the slots, partitions and throttle entries held; returns once the coordinator has rewritten
        the throttle."""
        assert self._input is not None
        s = self._s
        if not s.joined:
            return
        leave = LeaveRequest(
            migration_id=workflow.info().workflow_id, coordinator_id=s.coordinator_id, cluster=self._input.cluster
        )
        left = await workflow.execute_activity_method(ClusterActivities.leave_cluster, leave, **LEAVE_CALL)
        s.throttle_left = sorted(set(s.throttle_left) | set(left.throttle_left))
        if left.error is not None:
            s.note("throttle", "drover", left.error, workflow.now(), "what could not be removed may be left on Kafka")
        s.left_coordinator()

    @workflow.signal(name="cluster_action")
    def cluster_action(self, entry: AuditEntry) -> None:
        """From the cluster's coordinator: an operator froze or unfroze the cluster (who, why): in this
        migration's audit too."""
        self._s.note(entry.action, entry.actor, entry.reason, entry.at, "on the cluster (drover cluster)")
        self._wake = True

    @workflow.signal(name="rejoin")
    def rejoin(self, coordinator: str = "") -> None:
        """From a coordinator that does not know this migration (a new one, after the last was lost): join again.
        Not from the coordinator it has joined since it was asked."""
        s = self._s
        if coordinator and s.joined and not s.rejoin_due and coordinator == s.coordinator:
            return
        s.coordinator_lost()
        self._wake = True

    @workflow.signal(name="granted")
    def granted(self, grant: Grant) -> None:
        """From the cluster's coordinator: moves that may start now, their throttle in place."""
        s = self._s
        if grant.error is not None:
            # The throttle this migration asked for could not be written: it stops, cleans up and fails.
            if s.phase in ACTIVE:
                s.fail(grant.error)
                self._describe()
        elif not s.grant_heard([(k[0], k[1]) for k in grant.keys], grant.coordinator):
            workflow.logger.info("a grant of %d move(s) from a coordinator it has not joined is void", len(grant.keys))
        self._wake = True
