"""MigrationWorkflow and its cluster's coordinator (``ClusterWorkflow``): joining it (the partitions registered),
asking it for moves and hearing its grants, leaving it at the end. A migration started before the coordinator
existed (its history has no ``cluster-coordinator`` patch) keeps admitting under its own limits and writing its
own throttle, as it did."""

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster import ClusterActivities
    from activities.migration import MigrationActivities
    from execution import ACTIVE, MigrationState, MoveRecord
    from models.coordination import Demand, Grant, JoinStep, LeaveRequest, cluster_workflow_id
    from models.migration import MigrationInput
    from models.requests import ThrottleRequest, ThrottleState
    from steps.throttle import throttled_brokers, throttled_replicas
    from workflows.policies import LEAVE_CALL, QUICK_CALL, STEP_CALL, STEP_WAIT


class MigrationCoordination:
    """Admission and throttle over ``_s``, through the coordinator when ``_coordinated``."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _input: MigrationInput | None
    _wake: bool
    _coordinated: bool
    _asked: tuple | None
    _publish: Callable[[], None]

    async def _admit(self) -> list[MoveRecord]:
        """The moves to start now: those the coordinator granted (then the demand is brought up to date), or
        without a coordinator (a migration from before it existed) those its own limits admit, throttled here.
        Runs started before granted moves were started ahead of the demand (``_admitted``)."""
        assert self._input is not None
        s = self._s
        if not self._coordinated:
            started = s.admit(self._input.replicas_per_step)
            if started:
                await self._update_throttle()
            return started
        started = s.take_granted()
        await self._ask()
        return started

    def _admitted(self) -> list[MoveRecord]:
        """The moves the coordinator granted, to start now; the caller then sends the demand that follows
        (``_ask``: what was released meanwhile, what is still wanted)."""
        return self._s.take_granted()

    async def _ask(self) -> None:
        """Send the coordinator this migration's demand (the moves it would start, the moves it has released, its
        limits and throttle) when it has changed since the last."""
        assert self._input is not None
        s = self._s
        if not s.joined:
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
            seq=s.demand_seq,
            candidates=candidates,
            released=released,
            leaders_moved=leaders_moved,
            limits=s.limits,
            replicas_per_step=self._input.replicas_per_step,
            rate=s.rate,
            broker_rates=s.broker_rates,
        )
        coordinator = workflow.get_external_workflow_handle(cluster_workflow_id(self._input.cluster))
        try:
            await coordinator.signal("demand", demand)
        except BaseException:
            s.released = [*released, *s.released]
            raise
        self._asked = asked

    async def _join(self) -> None:
        """Register with the cluster's coordinator (started if need be); refused (its partitions are another
        migration's, or its name is bound to another Kafka cluster), the migration fails with nothing changed."""
        assert self._input is not None
        s, given = self._s, self._input
        step = JoinStep(
            migration_id=workflow.info().workflow_id,
            cluster=given.cluster,
            moves=s.window.waiting,
            moves_ref=s.window.moves_ref,
            priority=given.priority,
        )
        joined = await workflow.execute_activity_method(ClusterActivities.join_cluster, step, **QUICK_CALL)
        if joined.refused is not None:
            s.fail(joined.refused)
            return
        s.joined = True

    async def _leave(self) -> None:
        """Release the slots, partitions and throttle entries held; returns once the coordinator has rewritten
        the throttle."""
        assert self._input is not None
        s = self._s
        if not s.joined:
            return
        left = await workflow.execute_activity_method(
            ClusterActivities.leave_cluster,
            args=[LeaveRequest(migration_id=workflow.info().workflow_id), self._input.cluster],
            **LEAVE_CALL,
        )
        s.throttle_left = sorted(set(s.throttle_left) | set(left.throttle_left))
        if left.error is not None:
            s.note("throttle", "drover", left.error, workflow.now(), "what could not be removed may be left on Kafka")
        s.joined = False

    async def _update_throttle(self) -> None:
        s = self._s
        if self._coordinated:
            # The coordinator writes the throttle: it hears of a new rate with the next demand.
            await self._ask()
            return
        specs = sorted(s.window.specs(), key=lambda m: (m.topic, m.partition))
        if (s.rate is None and not s.broker_rates) or not specs:
            await self._clear_throttle()
            return
        previous = s.throttle
        # Recorded before the call: if it fails part-way, the final removal still covers what it wrote.
        s.throttle = ThrottleState(
            brokers=sorted({*previous.brokers, *throttled_brokers(specs)}),
            topics=sorted({*previous.topics, *throttled_replicas(specs)}),
        )
        # With auto throttle, a broker the estimate gave no rate (it only drops replicas) gets the highest one.
        fallback = s.rate or max(r for rates in s.broker_rates.values() for r in rates)
        request = ThrottleRequest(
            rate_bytes_per_s=fallback,
            broker_rates=s.broker_rates,
            in_flight=specs,
            previous_brokers=previous.brokers,
            previous_topics=previous.topics,
        )
        # A cancel waits for a write under way (STEP_CALL), so the final removal comes after it, never before.
        s.throttle = await workflow.execute_activity_method(MigrationActivities.set_throttle, request, **STEP_CALL)

    async def _clear_throttle(self) -> None:
        s = self._s
        if self._coordinated:
            await self._leave()
        elif s.throttle.brokers or s.throttle.topics:
            # Waits (heartbeating) for a broker that is down; those still down keep an inert rate, reported.
            left = await workflow.execute_activity_method(MigrationActivities.clear_throttle, s.throttle, **STEP_WAIT)
            s.throttle_left = sorted(set(s.throttle_left) | set(left or []))
            s.throttle = ThrottleState(brokers=[], topics=[])

    @workflow.signal(name="granted")
    def granted(self, grant: Grant) -> None:
        """From the cluster's coordinator: moves that may start now, their throttle in place."""
        s = self._s
        if grant.error is not None:
            # The throttle this migration asked for could not be written: it stops, cleans up and fails.
            if s.phase in ACTIVE:
                s.fail(grant.error)
                self._publish()
        else:
            s.granted = [*s.granted, *grant.keys]
        self._wake = True
