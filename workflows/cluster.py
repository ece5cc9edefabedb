"""ClusterWorkflow: one per Kafka cluster ID (workflow ID ``cluster:<Kafka cluster ID>``), the owner of what the
migrations on that cluster share (``drover.core.coordinator.state.ClusterState``): the names used for it, the partition
registry, the cluster-wide limits and shares, the freeze switch and the throttle configs. It is started by the first
migration that joins it, runs until terminated, and continues as new with its state."""

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from drover.core.coordinator import gates
    from drover.core.coordinator.status import cluster_details, cluster_status
    from drover.core.coordinator.takeover import TakeoverWait
    from drover.core.migration.runs import ClusterRun
    from drover.models.admission import MoveSpec
    from drover.models.control import AuditEntry, OperatorAction
    from drover.models.coordination import (
        CLUSTER_SETTINGS,
        ClusterLimitsChange,
        ClusterSetting,
        ClusterStatus,
        ClusterThrottleChange,
        Demand,
        FreezeRequest,
        JoinRequest,
        JoinResult,
        LeaveRequest,
        LeaveResult,
        Registry,
        ThrottleBook,
        ThrottleWanted,
    )
    from drover.models.decommission import CordonsLifted
    from drover.models.errors import ErrorType
    from drover.steps.throttle import throttle_union
    from drover.workflows import cluster_messages as messages
    from drover.workflows import cluster_reads as reads
    from drover.workflows import versions
    from drover.workflows.cluster_published import Published
    from drover.workflows.ids import CLUSTER_ATTR
    from drover.workflows.metrics import record_throttle
    from drover.workflows.policies import (
        CHECK_EVERY,
        CLEAR_RETRY,
        CLEAR_WAIT,
        DISK_READ_EVERY,
        FREEZE_WAIT,
        ORPHAN_CHECK_EVERY,
        REJOIN_WAIT,
        RESEND_EVERY,
    )
    from drover.workflows.signals import BadSignal, signal_payload, update_payload
    from drover.workflows.throttle_writer import ThrottleWriter

_Action = TypeVar("_Action", bound=OperatorAction)


@workflow.defn
class ClusterWorkflow:
    """Migrations join (update ``join``), keep one standing demand for slots (signal ``demand``), are granted moves
    (signal ``granted`` to the migration) once their throttle is on Kafka, and leave (update ``leave``).
    Operators: the settings' updates (``CLUSTER_SETTINGS``: limits, throttle, disk limit, windows, band) and
    ``freeze``, each with who and why, and their signal twins; signal ``uncordon`` (audited); query ``status``."""

    @workflow.init
    def __init__(self, given: ClusterRun) -> None:
        # Set up before any handler runs: the first join arrives with the start (update-with-start).
        self.s = given.first_state()
        self._throttle = ThrottleWriter(given.carry.book if given.carry is not None else ThrottleBook())
        # The first pass runs at once: a run that continues takes up the demands it carries without waiting.
        self._wake = True
        self._checked_at = datetime.min.replace(tzinfo=UTC)  # set as the run starts
        self._costs = messages.Costs()
        # Set when the migrations holding slots are to be checked at the next pass, not at the next period.
        self._check_due = False
        self._published = Published()
        # Granted moves not told to their migration yet: told once their throttle is on Kafka.
        self._untold_grants: dict[str, list[MoveSpec]] = {}
        # Migrations to ask to join again: they asked for moves, but this coordinator does not know them.
        self._rejoin: set[str] = set()
        # Operator actions on the cluster that its migrations have not been told of yet.
        self._cluster_news: list[AuditEntry] = []
        # After the loss of the last run: the migrations it waits for to join again.
        self._takeover = TakeoverWait()
        # An operator's retire, accepted; and done (the run then ends, holding nothing and having written nothing).
        self._retire: OperatorAction | None = None
        self._retired = False
        # Why this coordinator's workers may not serve it (they reach another Kafka cluster), once checked.
        self._wrong: str | None = None
        self._traffic = reads.TrafficReader(self._wake_up)

    def _wake_up(self) -> None:
        self._wake = True

    @property
    def _me(self) -> str:
        """This coordinator's first run: its runs continuing as new share it, a coordinator started after it was
        lost has another."""
        return workflow.info().first_execution_run_id

    @workflow.run
    async def run(self, given: ClusterRun) -> None:
        # General flow: wait for a demand, a release, an action or the next check; then clean up after migrations
        # that ended without leaving, grant what fits, write the throttle for what is in flight, and tell each
        # migration its grants (only then may it start them). Continue as new when the history grows.
        workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(given.cluster_id or given.name)])
        self._published.publish(self.s)
        self._checked_at = workflow.now()
        if given.carry is None:
            await self._take_over(given.cluster_id)
        self._takeover.done = True
        while True:
            await self._wait()
            period = ORPHAN_CHECK_EVERY if self.s.orphans else CHECK_EVERY
            if self._check_due or workflow.now() - self._checked_at >= period:
                self._checked_at, self._check_due = workflow.now(), False
                if await messages.check_holders(self.s):
                    self._wake = True
            asked, self._rejoin = self._rejoin, set()
            await messages.ask_to_rejoin(asked, self._me)
            # Taking over, nothing is granted until the running migrations have joined with their moves in flight:
            # the limits count those too.
            self._cluster_news += gates.window_news(self.s, workflow.now())
            self._cluster_news += await reads.read_disks(self.s)
            self._cluster_news += self._traffic.read(self.s)
            for mid, moves in ({} if self._takeover.waiting(workflow.now()) else self.s.allocate()).items():
                self._untold_grants[mid] = [*self._untold_grants.get(mid, []), *moves]
            self._cluster_news += gates.disk_news(self.s, workflow.now())
            if await self._write_throttle():
                if self.s.holding and self._untold_grants:
                    # A freeze acknowledged while the throttle was written: no move granted before it may start.
                    self._take_back_untold()
                else:
                    grants, self._untold_grants = self._untold_grants, {}
                    await messages.grant(self.s, grants, self._me)
            await messages.tell_freeze(self.s)
            await self._costs.tell(self.s, self._me)
            news, self._cluster_news = self._cluster_news, []
            await messages.tell_holders(self.s, news)
            self._published.publish(self.s)
            if self._retire is not None and self._retire_done():
                await workflow.wait_condition(workflow.all_handlers_finished)
                return
            info = workflow.info()
            due = info.is_continue_as_new_suggested() or info.get_current_history_length() > given.events_per_run
            due = due or versions.newer_build()
            if due and not self._untold_grants:
                await self._settle()
                versions.continue_as_new(given.continued(self.s, self._throttle.book))

    async def _take_over(self, cluster_id: str) -> None:
        """A new coordinator whose workers reach another Kafka cluster (a command started it through its own
        connection to this one) ends before it reads or writes anything, refusing the actions sent with it; else it
        takes over what the last run held."""
        self._wrong = await reads.wrong_workers(cluster_id)
        if self._wrong is not None:
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(self._wrong, type=ErrorType.INPUT, non_retryable=True)
        self._rejoin |= await reads.take_over(self.s, self._throttle, self._takeover)
        self._published.publish(self.s)

    async def _wait(self) -> None:
        s = self.s
        busy = s.holders or s.orphans or s.wanted() != self._throttle.book.written or self._takeover.awaiting
        retry = messages.freeze_due(s) or self._untold_grants
        timeout = RESEND_EVERY if retry else (ORPHAN_CHECK_EVERY if s.orphans else CHECK_EVERY if busy else None)
        if s.disk.waiting and not retry:
            # Moves wait for a disk: read again as the period comes.
            timeout = DISK_READ_EVERY
        # Durable timers to the windows' next edge and the band's next reading.
        for edge in (s.windows.next_change(workflow.now()), self._traffic.due_at(s)):
            if edge is not None:
                until = max(edge - workflow.now(), RESEND_EVERY)
                timeout = until if timeout is None else min(timeout, until)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._wake, timeout=timeout)
        self._wake = False

    async def _settle(self) -> None:
        """Before continuing as new: every handler done. A leave waits for the next throttle write, so write until
        none is left waiting."""
        while True:
            await self._write_throttle()
            # A freeze is answered once the moves in flight are told.
            await messages.tell_freeze(self.s)
            try:
                await workflow.wait_condition(workflow.all_handlers_finished, timeout=RESEND_EVERY)
                return
            except TimeoutError:
                continue

    async def _write_throttle(self) -> bool:
        """Kafka's throttle configs made what the moves in flight need (``ThrottleWriter``). If Kafka refuses, every
        migration hears why: none may run with a throttle it asked for missing. False then (and no grant is told)."""
        writer = self._throttle
        this = writer.start()
        wanted = self.s.wanted()
        if self._takeover.keeps_lost_throttle(workflow.now()):
            wanted = throttle_union(wanted, self._takeover.lost)
        rates_before = writer.book.written.brokers
        error = await writer.write(wanted)
        if error is not None:
            # Every migration hears the error (it stops and cleans up); grants not told yet are taken back.
            self._take_back_untold()
            await messages.refuse_all(self.s, error)
        # Not in a ``finally``: a run being torn down (cancelled, evicted, or its coroutine closed) does nothing more.
        writer.finish(this, self.s.wanted())
        if rates_before != writer.book.written.brokers:
            record_throttle(self.s.name, rates_before, writer.book.written.brokers)
        return error is None

    def _take_back_untold(self) -> None:
        """Grants not told to their migration go back to its candidates; the next pass takes their throttle off."""
        for mid, moves in self._untold_grants.items():
            self.s.take_back(mid, moves)
        self._wake = self._wake or bool(self._untold_grants)
        self._untold_grants = {}

    # -- migrations -------------------------------------------------------------------------------------------

    @workflow.update
    async def join(self, req: JoinRequest) -> JoinResult:
        self._takeover.joined(req.migration_id)
        if self.s.reused(req):
            # A new migration under the ID of one that ended without leaving (terminated): the earlier one's moves
            # are cancelled at once, and hold their partitions until they have ended; then this one joins.
            self.s.gone(req.migration_id, workflow.now())
            self._check_due = self._wake = True
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: not self.s.orphans_of(req.migration_id), timeout=REJOIN_WAIT)
        if self.s.recheck(req, self._me):
            return JoinResult(recheck=True, coordinator=self._me)
        refused = self.s.join(req, workflow.now())
        self._wake = True
        return JoinResult(refused=refused, coordinator=self._me)

    @workflow.signal
    def demand(self, d: Demand) -> None:
        if self.s.demand(d):
            self._wake = True
        elif d.migration_id not in self.s.holders:
            # It joined a coordinator that is gone: it is asked to join this one, with its moves in flight.
            self._rejoin.add(d.migration_id)
            self._wake = True

    @workflow.update
    async def leave(self, req: LeaveRequest) -> LeaveResult:
        self._takeover.leaving(req.migration_id)
        held = self.s.holders.get(req.migration_id)
        latency = dict(held.latency) if held is not None else {}
        self.s.leave(req.migration_id, workflow.now())
        deadline = workflow.now() + CLEAR_WAIT
        while True:
            self._wake = True
            await self._throttle.pass_after(self._throttle.passes)
            # A broker that is down keeps the rate written on it: waited for (a while), like a restart.
            if not self._throttle.left or workflow.now() >= deadline:
                return LeaveResult(throttle_left=self._throttle.left, error=self._throttle.error, latency=latency)
            await workflow.sleep(CLEAR_RETRY)

    # -- operators --------------------------------------------------------------------------------------------

    # Each operator action is an update (answered once applied, or refused with why) and a signal twin without
    # "_update" (kept in the history with no worker running; one that does not validate is recorded as refused).
    # Both wait for a new coordinator's take-over, so the last run's settings never overwrite the action. The
    # settings (CLUSTER_SETTINGS) come through dynamic handlers, in the order sent: "<name>_update" and "<name>".

    @workflow.update(dynamic=True)
    async def setting_update(self, name: str, args: Sequence[RawValue]) -> None:
        await self._taken_over()
        self._setting(update_payload(name, args, CLUSTER_SETTINGS))

    @setting_update.validator
    def _setting_valid(self, name: str, args: Sequence[RawValue]) -> None:
        update_payload(name, args, CLUSTER_SETTINGS)

    @workflow.signal(dynamic=True)
    async def setting(self, name: str, args: Sequence[RawValue]) -> None:
        model = CLUSTER_SETTINGS.get(name)
        if model is None or len(args) != 1:
            workflow.logger.warning("signal %s ignored: the coordinator has no such signal", name)
            return
        self._setting(await self._payload(name, args[0], model))

    def _setting(self, change: ClusterSetting | None) -> None:
        """A cluster-wide setting (None: a signal refused); all but limits and rate go to the migrations' audits."""
        if change is not None:
            self.s.setting(change, workflow.now())
            if not isinstance(change, ClusterLimitsChange | ClusterThrottleChange):
                self._cluster_news.append(self.s.actions[-1])
            self._wake = True

    @workflow.update(name="freeze_update")
    async def freeze_update(self, req: FreezeRequest) -> None:
        """Final once answered: a freeze is answered once every move in flight has been told (a move told finishes
        the step it is on and starts no other), so no step starts after the answer. A move that cannot be told within
        FREEZE_WAIT (its workflow not started yet, say) is told as soon as it can be."""
        await self._taken_over()
        refused = self._freeze(req)
        if refused is not None:
            raise ApplicationError(refused, type=ErrorType.REFUSED, non_retryable=True)
        if req.frozen and messages.freeze_due(self.s):
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: not self.s.frozen or not messages.freeze_due(self.s), timeout=FREEZE_WAIT
                )

    @workflow.signal(name="freeze")
    async def freeze(self, raw: RawValue) -> None:
        req = await self._payload("freeze", raw, FreezeRequest)
        if req is not None:
            self._freeze(req)

    def _freeze(self, req: FreezeRequest) -> str | None:
        """Applied, or refused with the reason in the audit (an update fails with it)."""
        refused = self.s.freeze(req.frozen, req, workflow.now())
        if refused is None:
            # Each migration's own audit says so too (sent by the run, with the next pass).
            self._cluster_news.append(self.s.actions[-1])
            workflow.set_current_details(cluster_details(self.s, workflow.now()))
            self._wake = True
        return refused

    @workflow.signal(name="uncordon")
    async def uncordon(self, raw: RawValue) -> None:
        """Cordons an operator lifted with `drover uncordon` (which wrote Kafka itself): kept in the audit."""
        lifted = await self._payload("uncordon", raw, CordonsLifted)
        if lifted is not None:
            self.s.lifted(lifted, workflow.now())

    async def _payload(self, name: str, raw: RawValue, model: type[_Action]) -> _Action | None:
        """A signal's payload, validated once a new coordinator has taken over (signals keep their order); one that
        does not validate is recorded as refused."""
        if not await self._taken_over(update=False):
            return None
        found = signal_payload(name, raw, model)
        if isinstance(found, BadSignal):
            self.s.refuse(name, found.by, workflow.now(), found.why)
            workflow.logger.warning("signal %s refused: %s", name, found.why)
            return None
        return found

    async def _taken_over(self, update: bool = True) -> bool:
        """Wait for a new coordinator's take-over. False if it found its workers reach another Kafka cluster than
        its own (it then ends): an update is refused with why."""
        await workflow.wait_condition(lambda: self._takeover.done or self._wrong is not None)
        if self._wrong is not None and update:
            raise ApplicationError(f"{self._wrong}; nothing was changed", type=ErrorType.INPUT, non_retryable=True)
        return self._wrong is None

    @workflow.update
    async def retire(self, by: OperatorAction) -> None:
        """End this coordinator for good, once no migration runs on it and Drover's throttle is off Kafka (the
        operator's own configs restored). The next migration starts a new one, which takes nothing over."""
        self._retire, self._wake = by, True
        await workflow.wait_condition(lambda: self._retired or self._retire is None or self._wrong is not None)
        if not self._retired and await self._taken_over():
            raise ApplicationError(
                f"not retired: {self.s.retire_refusal() or 'a migration joined'}", type=ErrorType.REFUSED
            )

    @retire.validator
    def _retire_allowed(self, by: OperatorAction) -> None:
        refused = self.s.retire_refusal()
        if refused is not None:
            raise ValueError(f"{refused}; retire it once they have ended")

    def _retire_done(self) -> bool:
        """The retire asked for, carried out if nothing holds the coordinator and nothing Drover wrote is left."""
        assert self._retire is not None
        if self.s.retire_refusal() is not None:
            # A migration joined after the retire was accepted: the retire is refused, the coordinator goes on.
            self._retire = None
            return False
        if self._throttle.book.written != ThrottleWanted() or self._takeover.waiting(workflow.now()):
            return False
        self.s.retired(self._retire, workflow.now())
        self._retired = True
        workflow.set_current_details(cluster_details(self.s, workflow.now()))
        return True

    @workflow.query
    def holding(self) -> bool:
        """Whether moves may take no new step now (frozen, or outside the windows with no cap, or taking over)."""
        return self.s.holding or not self._takeover.done

    @workflow.query
    def registry(self) -> Registry:
        return self.s.registry(self._me)

    @workflow.query
    def status(self) -> ClusterStatus:
        return cluster_status(self.s, self._throttle.book.written, workflow.now(), not self._takeover.done)
