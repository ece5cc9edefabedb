"""ClusterWorkflow: one per Kafka cluster ID (workflow ID ``cluster:<Kafka cluster ID>``), the owner of what the
migrations on that cluster share (``execution.cluster.ClusterState``): the names used for it, the partition
registry, the cluster-wide limits and shares, the freeze switch and the throttle configs. It is started by the first
migration that joins it, runs until terminated, and continues as new with its state."""

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.cluster import ClusterActivities
    from execution.cluster import ClusterState
    from execution.cluster_status import cluster_status
    from models.admission import MoveSpec
    from models.control import AuditEntry, OperatorAction
    from models.coordination import (
        ClusterInput,
        ClusterLimitsChange,
        ClusterStatus,
        ClusterThrottleChange,
        Demand,
        FreezeRequest,
        Grant,
        JoinRequest,
        JoinResult,
        LeaveRequest,
        LeaveResult,
        Registry,
        ThrottleBook,
        ThrottleWanted,
        ThrottleWrite,
    )
    from models.errors import ErrorType
    from steps.throttle import throttle_union, writable
    from workflows.failures import failure_message
    from workflows.ids import ALIASES_ATTR, CLUSTER_ATTR, STATUS_ATTR, move_workflow_id
    from workflows.metrics import record_cluster, record_throttle
    from workflows.policies import QUICK_CALL
    from workflows.signals import BadSignal, signal_payload

_Action = TypeVar("_Action", bound=OperatorAction)

# How often the coordinator checks that the migrations holding slots still run (and orphaned moves have ended).
CHECK_EVERY = timedelta(seconds=20)
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
# A freeze or unfreeze not yet delivered to a move (it had not started) is sent again this soon.
RESEND_EVERY = timedelta(seconds=1)
# A freeze is answered once every move in flight has been told, or after this long.
FREEZE_WAIT = timedelta(seconds=30)


@workflow.defn
class ClusterWorkflow:
    """Migrations join (update ``join``), keep one standing demand for slots (signal ``demand``), are granted moves
    (signal ``granted`` to the migration) once their throttle is on Kafka, and leave (update ``leave``).
    Operators: updates ``set_limits``, ``set_throttle`` and ``freeze``, each with who and why; query ``status``."""

    @workflow.init
    def __init__(self, given: ClusterInput) -> None:
        # Set up before any handler runs: the first join arrives with the start (update-with-start).
        if given.carry is None:
            self._s = ClusterState(name=given.name, cluster_id=given.cluster_id or None, aliases=[given.name])
            self._book = ThrottleBook()
        else:
            self._s = ClusterState.model_validate(given.carry["state"])
            self._book = ThrottleBook.model_validate(given.carry["book"])
            self._s.runs += 1
        # The first pass runs at once: a run that continues takes up the demands it carries without waiting.
        self._wake = True
        # Throttle write passes started and done: a leave waits for a pass that started after it.
        self._passes = 0
        self._passes_done = 0
        self._write_error: str | None = None
        self._throttle_left: list[int] = []
        self._checked_at = datetime.min.replace(tzinfo=UTC)  # set as the run starts
        # Set when the migrations holding slots are to be checked at the next pass, not at the next period.
        self._check_due = False
        # The DroverStatus and DroverAliases last upserted.
        self._published = ""
        self._published_aliases: list[str] = []
        # Granted moves not told to their migration yet: told once their throttle is on Kafka.
        self._untold_grants: dict[str, list[MoveSpec]] = {}
        # Migrations to ask to join again: they asked for moves, but this coordinator does not know them.
        self._rejoin: set[str] = set()
        # Operator actions on the cluster that its migrations have not been told of yet.
        self._cluster_news: list[AuditEntry] = []
        # After the loss of the last run: the migrations found running that have not joined this one yet, and until
        # when they are waited for. Meanwhile nothing the last run wrote is taken off Kafka.
        self._awaiting: set[str] = set()
        self._awaiting_until = datetime.min.replace(tzinfo=UTC)
        # Migrations that left this run: one that leaves before the take-over looks is not waited for.
        self._left: set[str] = set()
        # An operator's retire, accepted; and done (the run then ends, holding nothing and having written nothing).
        self._retire: OperatorAction | None = None
        self._retired = False
        # Set once a new coordinator has taken over the last run's settings: operator actions wait for it.
        self._taken_over = False

    @property
    def _me(self) -> str:
        """This coordinator's first run: its runs continuing as new share it, a coordinator started after it was
        lost has another."""
        return workflow.info().first_execution_run_id

    @property
    def s(self) -> ClusterState:
        return self._s

    @workflow.run
    async def run(self, given: ClusterInput) -> None:
        # General flow: wait for a demand, a release, an action or the next check; then clean up after migrations
        # that ended without leaving, grant what fits, write the throttle for what is in flight, and tell each
        # migration its grants (only then may it start them). Continue as new when the history grows.
        workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(given.cluster_id or given.name)])
        self._publish()
        self._checked_at = workflow.now()
        if given.carry is None:
            await self._take_over()
        self._taken_over = True
        while True:
            await self._wait()
            period = ORPHAN_CHECK_EVERY if self.s.orphans else CHECK_EVERY
            if self._check_due or workflow.now() - self._checked_at >= period:
                await self._check_holders()
            await self._ask_to_rejoin()
            # Taking over, nothing is granted until the running migrations have joined with their moves in flight:
            # the limits count those too.
            for mid, moves in ({} if self._taking_over() else self.s.allocate()).items():
                self._untold_grants[mid] = [*self._untold_grants.get(mid, []), *moves]
            if await self._write_throttle():
                if self.s.frozen and self._untold_grants:
                    # A freeze acknowledged while the throttle was written: no move granted before it may start.
                    self._take_back_untold()
                else:
                    grants, self._untold_grants = self._untold_grants, {}
                    await asyncio.gather(*(self._grant(mid, moves) for mid, moves in grants.items()))
            await self._tell_freeze()
            await self._tell_holders()
            self._publish()
            if self._retire is not None and self._retire_done():
                await workflow.wait_condition(workflow.all_handlers_finished)
                return
            if self._due_for_new_run(given.events_per_run) and not self._untold_grants:
                await self._settle()
                carry = {"state": self.s.model_dump(mode="json"), "book": self._book.model_dump(mode="json")}
                workflow.continue_as_new(given.model_copy(update={"carry": carry}))

    async def _take_over(self) -> None:
        """A coordinator started anew (the first, or after the last was lost) takes over what the last run held:
        its throttle book, so its entries count as Drover's, and the operator's freeze, limits and rate. The
        migrations of this cluster still running are asked to join again with their moves in flight; until they
        have (or TAKE_OVER_WAIT has passed), nothing the last run wrote is removed."""
        took = await workflow.execute_activity_method(
            ClusterActivities.previous_run, workflow.info().workflow_id, **QUICK_CALL
        )
        if took is None:
            return
        self._book = took.book
        self.s.took_over(took.frozen, took.limits, took.rate_bytes_per_s, took.aliases)
        running = await workflow.execute_activity_method(
            ClusterActivities.running_migrations, self.s.aliases, **QUICK_CALL
        )
        self._awaiting = set(running) - set(self.s.holders) - self._left
        self._awaiting_until = workflow.now() + TAKE_OVER_WAIT
        self._rejoin |= self._awaiting
        self.s.note(
            "take-over",
            f"the last run's throttle book and settings (frozen: {took.frozen}); "
            f"{len(self._awaiting)} running migration(s) asked to join again",
            workflow.now(),
        )
        self._publish()

    async def _pass_after(self, started: int) -> None:
        """Until a throttle write pass that started after the first ``started`` has ended."""
        await workflow.wait_condition(lambda: self._passes_done > started)

    def _taking_over(self) -> bool:
        if self._awaiting and workflow.now() < self._awaiting_until:
            return True
        self._awaiting = set()
        return False

    async def _ask_to_rejoin(self) -> None:
        asked, self._rejoin = self._rejoin, set()
        me = self._me
        await asyncio.gather(
            *(self._quietly(workflow.get_external_workflow_handle(mid).signal("rejoin", me)) for mid in sorted(asked))
        )

    async def _wait(self) -> None:
        busy = self.s.holders or self.s.orphans or self.s.wanted() != self._book.written or self._awaiting
        retry = self._freeze_due() or self._untold_grants
        timeout = RESEND_EVERY if retry else (ORPHAN_CHECK_EVERY if self.s.orphans else CHECK_EVERY if busy else None)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._wake, timeout=timeout)
        self._wake = False

    async def _settle(self) -> None:
        """Before continuing as new: every handler done. A leave waits for the next throttle write, so write until
        none is left waiting."""
        while True:
            await self._write_throttle()
            # A freeze is answered once the moves in flight are told.
            await self._tell_freeze()
            try:
                await workflow.wait_condition(workflow.all_handlers_finished, timeout=RESEND_EVERY)
                return
            except TimeoutError:
                continue

    def _due_for_new_run(self, events: int) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > events

    async def _check_holders(self) -> None:
        """Migrations that ended without leaving (terminated, say) and their moves: cancelled, then released."""
        self._checked_at, self._check_due = workflow.now(), False
        s = self.s
        moves = {move_workflow_id(s.orphan_name(o), o.move.topic, o.move.partition): o for o in s.orphans}
        ids = [*s.holders, *moves]
        if not ids:
            return
        try:
            found = await workflow.execute_activity_method(ClusterActivities.running_workflows, ids, **QUICK_CALL)
        except ActivityError as e:
            # Temporal's frontend did not answer: the next check tries again.
            workflow.logger.warning("could not check the migrations holding slots: %s", e)
            return
        running = set(found)
        # Only the migrations checked: one that joined while the check ran was not in it.
        for mid in [m for m in s.holders if m in ids and m not in running]:
            s.gone(mid, workflow.now())
            self._wake = True
        for wid, o in moves.items():
            if wid not in running:
                s.orphan_ended((o.move.topic, o.move.partition))
                s.note("orphan-ended", f"{o.move.topic}-{o.move.partition} of {o.migration_id}", workflow.now())
        for o in s.orphans:
            if not o.cancel_sent:
                o.cancel_sent = True
                wid = move_workflow_id(s.orphan_name(o), o.move.topic, o.move.partition)
                handle = workflow.get_external_workflow_handle(wid)
                await self._quietly(handle.cancel())

    async def _write_throttle(self) -> bool:
        """Kafka's throttle configs made what the moves in flight need (the operator's own values saved first where
        Drover has not written yet). If Kafka refuses, whatever the write may have done is kept in the book, so a
        later write removes it, and every migration hears why: none may run with a throttle it asked for missing.
        False then (and no grant is told)."""
        self._passes += 1
        this = self._passes
        wanted, book = self.s.wanted(), self._book
        if self._taking_over() or (self._awaiting_until is not None and workflow.now() < self._awaiting_until):
            # The lost run's entries stay until the migrations that need them have joined this one, and for
            # TAKE_OVER_WAIT in any case: one that Temporal's visibility did not list yet joins late.
            wanted = throttle_union(wanted, book.written)
        rates_before = book.written.brokers
        try:
            if wanted != book.written:
                request = ThrottleWrite(wanted=wanted, book=book)
                if any(t not in book.saved_topics for t in wanted.topics) or any(
                    b not in book.saved_brokers for b in wanted.brokers
                ):
                    book = self._book = await workflow.execute_activity_method(
                        ClusterActivities.save_throttle_configs, request, **QUICK_CALL
                    )
                    request = ThrottleWrite(wanted=wanted, book=book)
                self._book = await workflow.execute_activity_method(
                    ClusterActivities.write_throttle, request, **QUICK_CALL
                )
            self._write_error = None
        except ActivityError as e:
            # What the write may have done stays in the book, so a later write removes it. It writes only where the
            # operator's values are saved: a failed save recorded nothing, and nothing else counts as written.
            touched = writable(wanted, book.saved_topics, book.saved_brokers)
            self._book = book.model_copy(update={"written": throttle_union(book.written, touched)})
            self._write_error = f"the cluster's throttle could not be written: {failure_message(e)}"
            workflow.logger.warning(self._write_error)
            await self._refuse_all(self._write_error)
        # Not in a ``finally``: a run being torn down (cancelled, evicted, or its coroutine closed) does nothing more.
        self._passes_done = this
        self._throttle_left = sorted(set(self._book.written.brokers) - set(self.s.wanted().brokers))
        if rates_before != self._book.written.brokers:
            record_throttle(self.s.name, rates_before, self._book.written.brokers)
        return self._write_error is None

    async def _refuse_all(self, error: str) -> None:
        """Every migration hears the error (it stops and cleans up); grants not told yet are taken back."""
        self._take_back_untold()
        refusal = Grant(seq=0, keys=[], error=error)
        await asyncio.gather(
            *(
                self._quietly(workflow.get_external_workflow_handle(mid).signal("granted", refusal))
                for mid in list(self.s.holders)
            )
        )

    def _take_back_untold(self) -> None:
        """Grants not told to their migration go back to its candidates; the next pass takes their throttle off."""
        for mid, moves in self._untold_grants.items():
            self.s.take_back(mid, moves)
        # The next pass takes their throttle off (if any was taken back).
        self._wake = self._wake or bool(self._untold_grants)
        self._untold_grants = {}

    async def _grant(self, migration_id: str, moves) -> None:
        h = self.s.holders.get(migration_id)
        seq = h.demand.seq if h and h.demand else 0
        grant = Grant(seq=seq, keys=[(m.topic, m.partition) for m in moves], coordinator=self._me)
        await self._quietly(workflow.get_external_workflow_handle(migration_id).signal("granted", grant))

    def _freeze_due(self) -> list[tuple[str, int]]:
        """Moves to tell the freeze state: while frozen, those in flight not told yet; once unfrozen, those told."""
        in_flight = {(m.topic, m.partition) for _, m in self.s.in_flight()}
        told = {(k[0], k[1]) for k in self.s.told_frozen} & in_flight
        return sorted(in_flight - told) if self.s.frozen else sorted(told)

    async def _tell_freeze(self) -> None:
        """Moves wait before their next step while frozen: each in flight is told, and told again on unfreeze. A
        move not started yet (or ended) is tried again shortly; one granted while not frozen needs no word."""
        in_flight = {(m.topic, m.partition) for _, m in self.s.in_flight()}
        self.s.told_frozen = [k for k in self.s.told_frozen if tuple(k) in in_flight]
        names = self.s.moves_by_name()
        for key in self._freeze_due():
            handle = workflow.get_external_workflow_handle(move_workflow_id(names[key], *key))
            if await self._quietly(handle.signal("freeze", self.s.frozen)):
                told = [k for k in self.s.told_frozen if tuple(k) != key]
                self.s.told_frozen = [*told, key] if self.s.frozen else told

    async def _tell_holders(self) -> None:
        """The operator's freeze and unfreeze, told to every migration on the cluster for its own audit."""
        news, self._cluster_news = self._cluster_news, []
        for entry in news:
            for mid in sorted(self.s.holders):
                await self._quietly(workflow.get_external_workflow_handle(mid).signal("cluster_action", entry))

    @staticmethod
    async def _quietly(call) -> bool:
        try:
            await call
            return True
        except Exception:  # noqa: BLE001 - the workflow has ended (or not started yet); the caller tries again
            return False

    def _publish(self) -> None:
        """DroverStatus (frozen or coordinating) when it changes, and the current details. Called by the run only:
        a handler can run before run() in a run's first activation, where replay may order its command otherwise."""
        status = "frozen" if self.s.frozen else "coordinating"
        if status != self._published:
            self._published = status
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(status)])
        if self.s.aliases != self._published_aliases:
            self._published_aliases = list(self.s.aliases)
            workflow.upsert_search_attributes([ALIASES_ATTR.value_set(self._published_aliases)])
        workflow.set_current_details(self.s.details())
        record_cluster(self.s.name, self.s.frozen, self.s.limits)

    # -- migrations -------------------------------------------------------------------------------------------

    @workflow.update
    async def join(self, req: JoinRequest) -> JoinResult:
        self._awaiting.discard(req.migration_id)
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
        self._awaiting.discard(req.migration_id)
        self._left.add(req.migration_id)
        self.s.leave(req.migration_id, workflow.now())
        deadline = workflow.now() + CLEAR_WAIT
        while True:
            self._wake = True
            await self._pass_after(self._passes)
            # A broker that is down keeps the rate written on it: waited for (a while), like a restart.
            if not self._throttle_left or workflow.now() >= deadline:
                return LeaveResult(throttle_left=self._throttle_left, error=self._write_error)
            await workflow.sleep(CLEAR_RETRY)

    # -- operators --------------------------------------------------------------------------------------------

    # Each operator action is an update (answered once applied, or refused with why) and a signal of the same name
    # without "_update" (recorded in the history even with no worker running, applied when one polls; a signal that
    # does not validate or is refused is recorded as refused). Both wait for a new coordinator's take-over, so the
    # last run's settings never overwrite the action.

    @workflow.update(name="set_limits_update")
    async def set_limits_update(self, change: ClusterLimitsChange) -> None:
        await workflow.wait_condition(lambda: self._taken_over)
        self._set_limits(change)

    @workflow.signal(name="set_limits")
    async def set_limits(self, raw: RawValue) -> None:
        change = await self._payload("set_limits", raw, ClusterLimitsChange)
        if change is not None:
            self._set_limits(change)

    def _set_limits(self, change: ClusterLimitsChange) -> None:
        self.s.set_limits(change.limits, change, workflow.now())
        self._wake = True

    @workflow.update(name="set_throttle_update")
    async def set_throttle_update(self, change: ClusterThrottleChange) -> None:
        await workflow.wait_condition(lambda: self._taken_over)
        self._set_throttle(change)

    @workflow.signal(name="set_throttle")
    async def set_throttle(self, raw: RawValue) -> None:
        change = await self._payload("set_throttle", raw, ClusterThrottleChange)
        if change is not None:
            self._set_throttle(change)

    def _set_throttle(self, change: ClusterThrottleChange) -> None:
        self.s.set_rate(change.rate_bytes_per_s, change, workflow.now())
        self._wake = True

    @workflow.update(name="freeze_update")
    async def freeze_update(self, req: FreezeRequest) -> None:
        """Final once answered: a freeze is answered once every move in flight has been told (a move told finishes
        the step it is on and starts no other), so no step starts after the answer. A move that cannot be told within
        FREEZE_WAIT (its workflow not started yet, say) is told as soon as it can be."""
        await workflow.wait_condition(lambda: self._taken_over)
        refused = self._freeze(req)
        if refused is not None:
            raise ApplicationError(refused, type=ErrorType.REFUSED, non_retryable=True)
        if req.frozen and self._freeze_due():
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: not self.s.frozen or not self._freeze_due(), timeout=FREEZE_WAIT)

    @freeze_update.validator
    def _freeze_allowed(self, req: FreezeRequest) -> None:
        refused = self.s.freeze_refusal(req.frozen)
        if refused is not None and self._taken_over:
            raise ValueError(refused)

    @workflow.signal(name="freeze")
    async def freeze(self, raw: RawValue) -> None:
        req = await self._payload("freeze", raw, FreezeRequest)
        if req is None:
            return
        refused = self._freeze(req)
        if refused is not None:
            self.s.refuse("freeze" if req.frozen else "unfreeze", req, workflow.now(), refused)

    def _freeze(self, req: FreezeRequest) -> str | None:
        refused = self.s.freeze(req.frozen, req, workflow.now())
        if refused is None:
            # Each migration's own audit says so too (sent by the run, with the next pass).
            self._cluster_news.append(self.s.actions[-1])
            workflow.set_current_details(self.s.details())
            self._wake = True
        return refused

    async def _payload(self, name: str, raw: RawValue, model: type[_Action]) -> _Action | None:
        """A signal's payload, validated once a new coordinator has taken over (signals keep their order); one that
        does not validate is recorded as refused."""
        await workflow.wait_condition(lambda: self._taken_over)
        found = signal_payload(name, raw, model)
        if isinstance(found, BadSignal):
            self.s.refuse(name, found.by, workflow.now(), found.why)
            workflow.logger.warning("signal %s refused: %s", name, found.why)
            return None
        return found

    @workflow.update
    async def retire(self, by: OperatorAction) -> None:
        """End this coordinator for good, once no migration runs on it and Drover's throttle is off Kafka (the
        operator's own configs restored). The next migration starts a new one, which takes nothing over."""
        self._retire, self._wake = by, True
        await workflow.wait_condition(lambda: self._retired or self._retire is None)
        if not self._retired:
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
        if self._book.written != ThrottleWanted() or self._taking_over():
            return False
        self.s.retired(self._retire, workflow.now())
        self._retired = True
        workflow.set_current_details(self.s.details())
        return True

    @workflow.query
    def registry(self) -> Registry:
        return self.s.registry(self._me)

    @workflow.query
    def status(self) -> ClusterStatus:
        return cluster_status(self.s, self._book.written, workflow.now())
