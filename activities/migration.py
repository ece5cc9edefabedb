"""Migration activities: ``preflight`` (every move checked against the cluster), ``read_moves`` and
``save_outcomes`` (a large plan's moves and finished outcomes in the work folder), ``plan_rollback`` (the moves that
take back what the migration changed), ``elect_leaders`` (preferred leaders of the moved partitions, in batches) and
``verify`` (every partition against the list it should have).

Failure types a workflow can match on (raised non-retryable):
- ``ErrorType.PREFLIGHT``: the plan does not fit the cluster; the message lists every problem, nothing was changed.
"""

import time
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from drover.activities.binding import acl_problems, wrong_cluster
from drover.activities.heartbeat import heartbeating
from drover.adapters import ledger
from drover.adapters.kafka_port import KafkaPort
from drover.adapters.live_cluster import tiered_sizes
from drover.core.migration import preflight, rollback
from drover.core.zones import zone_of_brokers
from drover.models import TopicPartition
from drover.models.admission import MoveSpec
from drover.models.decommission import CORDON_CONFIG
from drover.models.errors import ErrorType
from drover.models.migration import INLINE_MOVES
from drover.models.plan import PartitionReplicas
from drover.models.requests import (
    LeaderElection,
    LeaderElectionResult,
    MovesPage,
    PreflightRequest,
    PreflightResult,
    RollbackPlan,
    RollbackRequest,
    VerifyRequest,
)
from drover.models.results import MoveOutcome, OutcomesBatch
from drover.models.units import counted
from drover.steps.admission import ordered


def _preflight_error(problems: list[str]) -> ApplicationError:
    unique = list(dict.fromkeys(problems))
    return ApplicationError(
        f"preflight found {counted(len(unique), 'problem')}, nothing was changed: " + "; ".join(unique),
        type=ErrorType.PREFLIGHT,
        non_retryable=True,
    )


class MigrationActivities:
    def __init__(self, admin: KafkaPort, work_dir: Path):
        self.admin = admin
        self.work_dir = work_dir

    @activity.defn(name="preflight")
    def preflight(self, req: PreflightRequest) -> PreflightResult:
        """Check every move against the cluster and record what it shows now; any problem fails with all of them.

        The moves that change a list come back in the order they will run: inline, or for a plan passed by
        reference (or one above INLINE_MOVES) in the migration's folder, to be paged in."""
        wrong = wrong_cluster(self.admin, req.cluster_id)
        if wrong is not None:
            raise _preflight_error([wrong])
        moves = req.moves
        if req.plan_ref is not None:
            try:
                moves = ledger.read_plan(req.plan_ref)
            except ledger.PlanFileError as e:
                raise _preflight_error([str(e)]) from None
            if not moves:
                raise _preflight_error([f"plan file {req.plan_ref} moves nothing"])
        specs, min_insync, offline, zones = self._check(moves, req)
        skipped = []
        if req.offline == "skip":
            skipped = [
                f"{m.topic}-{m.partition}: offline (no replica in sync); not moved"
                for m in specs
                if (m.topic, m.partition) in offline and m.original != m.target
            ]
            specs = [m for m in specs if (m.topic, m.partition) not in offline]
        moving = ordered([m for m in specs if m.original != m.target], req.order)
        result = PreflightResult(
            count=len(moving),
            bytes_total=sum(m.bytes_to_copy for m in moving),
            unchanged=len(specs) - len(moving),
            min_insync=min_insync,
            skipped=skipped,
            zones=zones,
        )
        if req.plan_ref is None and len(moving) <= INLINE_MOVES:
            return result.model_copy(update={"moves": moving})
        path = ledger.write_moves(ledger.migration_dir(self.work_dir, req.migration_id), moving)
        return result.model_copy(update={"moves_ref": str(path)})

    @activity.defn(name="read_moves")
    def read_moves(self, page: MovesPage) -> list[MoveSpec]:
        return ledger.read_moves(Path(page.moves_ref), page.offset, page.limit)

    @activity.defn(name="save_outcomes")
    def save_outcomes(self, batch: OutcomesBatch) -> None:
        ledger.save_outcomes(self._folder(batch.migration_id, batch.rollback), batch.run, batch.outcomes)

    def _folder(self, migration_id: str, rollback: bool = False) -> Path:
        folder = ledger.migration_dir(self.work_dir, migration_id)
        return folder / "rollback" if rollback else folder

    def _saved(self, migration_id: str | None, rollback: bool = False) -> list[MoveOutcome]:
        return ledger.saved_outcomes(self._folder(migration_id, rollback)) if migration_id else []

    @activity.defn(name="plan_rollback")
    def plan_rollback(self, req: RollbackRequest) -> RollbackPlan:
        """The partitions to step back to their original lists: with mode revert-pending those whose move had not
        finished, with rollback every one. Only partitions this migration changed, each from the list it left them
        on (the rollback move is fenced on it). Left as they are, each with the reason: partitions it never changed
        (someone else did, or another migration was moving them), partitions Kafka shows on another list than the
        one it left them on, and, as KIP-236 has it, partitions whose original replicas that still hold them are
        none of them in sync (or, moved off all of them, none of them is a live broker)."""
        activity.heartbeat()
        live = set(self.admin.describe_cluster().broker_ids)
        # Saved outcomes first, this run's over them.
        wanted = rollback.to_revert([*self._saved(req.outcomes_of), *req.outcomes], req.mode)
        shown = {(p.topic, p.partition): p for p in self.admin.describe_topics(sorted({o.topic for o in wanted}))}
        back, skipped = rollback.rollback_moves(wanted, shown, live)
        if req.outcomes_of is None and len(back) <= INLINE_MOVES:
            return RollbackPlan(moves=back, count=len(back), skipped=skipped)
        path = ledger.write_moves(self._folder(req.migration_id, rollback=True), back)
        return RollbackPlan(moves_ref=str(path), count=len(back), skipped=skipped)

    def _check(
        self, moves: list[PartitionReplicas], req: PreflightRequest
    ) -> tuple[list[MoveSpec], dict[str, int], set[tuple[str, int]], dict[int, str]]:
        """Every problem the plan has on this cluster, or the moves as it will run them, the topics'
        min.insync.replicas, the partitions that are offline (no replica in sync) and each broker's zone."""
        topics = sorted({m.topic for m in moves})
        refused = acl_problems(self.admin, topics)
        if refused:
            raise _preflight_error(refused)
        cluster = self.admin.describe_cluster()
        alive, zones = set(cluster.broker_ids), zone_of_brokers(cluster.brokers, req.zones)
        known = set(self.admin.list_topics())
        states = {(s.topic, s.partition): s for s in self.admin.describe_topics([t for t in topics if t in known])}
        ongoing = {(r.topic, r.partition) for r in self.admin.list_reassignments()}
        problems = preflight.plan_problems(moves, known, states, ongoing, alive)
        if problems:
            raise _preflight_error(problems)
        configs = self.admin.describe_topic_configs(topics)
        min_insync = {t: int(c.get("min.insync.replicas", "1")) for t, c in configs.items()}
        problems = preflight.min_insync_problems(moves, min_insync)
        problems += preflight.cordon_problems(moves, states, self._cordoned({b for m in moves for b in m.replicas}))
        sizes = {
            (r.topic, r.partition): r.size_bytes
            for r in self.admin.describe_log_dirs()
            if (r.topic, r.partition) in states and r.broker == states[(r.topic, r.partition)].leader
        }
        # A copy of a tiered partition moves the leader's local log, or (KIP-1023) only its part past the last
        # tiered offset: the estimate, the ETA, the disk gate and the bound count that.
        tiered = tiered_sizes(self.admin, [(m.topic, m.partition) for m in moves], sizes, configs).copies
        sizes |= tiered
        local = zones if req.zone_local_copies else None
        # KIP-1023's copies (those smaller than the local log) start after the last tiered offset.
        from_tiered = tiered.keys() if req.tiered_leader_hold else ()
        specs, offline = preflight.move_specs(moves, states, sizes, min_insync, local, from_tiered)
        incoming = preflight.incoming_bytes(s for s in specs if s.original != s.target)
        if incoming:
            disks = self.admin.describe_disks(sorted(incoming))
            problems += preflight.disk_problems(incoming, disks, req.disk_margin)
        if problems:
            raise _preflight_error(problems)
        return specs, min_insync, offline, zones

    def _cordoned(self, brokers: set[int]) -> dict[int, str]:
        """Those of ``brokers`` cordoned (KIP-1066), with the value set; none on a Kafka without the config."""
        configs = self.admin.describe_broker_configs(sorted(brokers), overrides_only=True) if brokers else {}
        return {b: c[CORDON_CONFIG] for b, c in configs.items() if c.get(CORDON_CONFIG)}

    @activity.defn(name="elect_leaders")
    def elect_leaders(self, req: LeaderElection) -> LeaderElectionResult:
        """Elect the preferred leader of every partition given that is led by another replica, ``req.batch`` at a
        time, each batch waited for (up to 30 s) before the next; a preferred replica out of sync is left alone."""
        # Heartbeats go on while a describe of many topics runs: it may take longer than the heartbeat timeout.
        with heartbeating("electing leaders"):
            return self._elect_leaders(req)

    def _elect_leaders(self, req: LeaderElection) -> LeaderElectionResult:
        activity.heartbeat()
        saved = [
            TopicPartition(topic=o.topic, partition=o.partition)
            for o in self._saved(req.outcomes_of, req.rollback)
            if o.error is None and o.final is not None and o.final != o.original
        ]
        wanted = {(p.topic, p.partition) for p in [*req.partitions, *saved]}
        states = self.admin.describe_topics(sorted({t for t, _ in wanted}), only=wanted)
        off = [s for s in states if s.replicas and s.leader != s.replicas[0] and s.replicas[0] in s.isr]
        elected = 0
        for i in range(0, len(off), req.batch):
            activity.heartbeat(i)
            batch = [TopicPartition(topic=s.topic, partition=s.partition) for s in off[i : i + req.batch]]
            self.admin.elect_preferred_leaders(batch)
            deadline = time.monotonic() + 30
            keys = {(p.topic, p.partition) for p in batch}
            while True:
                shown = self.admin.describe_topics(sorted({t for t, _ in keys}), only=keys)
                now = {(s.topic, s.partition): s for s in shown}
                led = [
                    p for p in batch if now[(p.topic, p.partition)].leader == now[(p.topic, p.partition)].replicas[0]
                ]
                if len(led) == len(batch) or time.monotonic() > deadline:
                    break
                activity.heartbeat(i)
                time.sleep(0.25)
            elected += len(led)
        after = self.admin.describe_topics(sorted({t for t, _ in wanted}), only=wanted)
        not_preferred = [f"{s.topic}-{s.partition}" for s in after if s.replicas and s.leader != s.replicas[0]]
        return LeaderElectionResult(elected=elected, not_preferred=not_preferred)

    @activity.defn(name="verify")
    def verify(self, req: VerifyRequest) -> list[str]:
        """The partitions whose replica list on Kafka is not their target, one line each (empty: all verified).
        With ``outcomes_of``, the finished moves a large migration saved are checked as well."""
        # Heartbeats go on while the describe runs: over many topics it may take longer than the heartbeat timeout.
        with heartbeating("verifying"):
            return self._verify(req)

    def _verify(self, req: VerifyRequest) -> list[str]:
        activity.heartbeat()
        moves = list(req.expected)
        for o in self._saved(req.outcomes_of, req.rollback):
            if req.rollback:
                # A rollback move's partition belongs on its original list (the move's target), whatever happened.
                if o.final is not None or o.error is None:
                    moves.append(MoveSpec(topic=o.topic, partition=o.partition, original=o.original, target=o.target))
            elif o.error is None and o.original != o.target:
                moves.append(
                    MoveSpec(
                        topic=o.topic,
                        partition=o.partition,
                        original=o.original,
                        target=o.original if o.reverted_when_stuck else o.target,
                    )
                )
        if not moves:
            return []
        states = {(s.topic, s.partition): s for s in self.admin.describe_topics(sorted({m.topic for m in moves}))}
        wrong = []
        for m in moves:
            state = states.get((m.topic, m.partition))
            if state is None or state.replicas != m.target:
                shown = state.replicas if state else "nothing"
                wrong.append(f"{TopicPartition(topic=m.topic, partition=m.partition)} shows {shown}, not {m.target}")
        return wrong
