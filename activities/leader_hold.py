"""The end of a migration whose moves held their new preferred leaders back (KIP-1023): a new replica that starts
after the last tiered offset lacks the uploaded segments its leader still keeps locally (consumers of those offsets
would go to remote storage were it leading), so it is made preferred leader only once its local log covers the
leader's."""

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from temporalio import activity

from drover.activities.kafka import KafkaActivities
from drover.adapters import ledger
from drover.core.tiered import held_order
from drover.models import TopicPartition
from drover.models.results import LeaderHold, LeaderHoldRequest, MoveOutcome

# How often the held partitions' replicas have their local logs read (DescribeLogDirs on their brokers).
HOLD_POLL_S = 5.0
# A topic's segment.bytes where its config does not say (Kafka's default).
DEFAULT_SEGMENT = 1 << 30

Key = tuple[str, int]


class Coverage(NamedTuple):
    """A held partition as last seen: on its held list or not, and its new replica's and leader's local bytes."""

    held: bool
    new_bytes: int | None = None
    leader_bytes: int | None = None

    def covered(self, segment: int) -> bool:
        """The new replica's local log is within one segment of the leader's."""
        new, leader = self.new_bytes, self.leader_bytes
        return new is not None and leader is not None and new >= leader - segment


class LeaderHoldActivities:
    def __init__(self, kafka: KafkaActivities, work_dir: Path):
        self.kafka, self.admin, self.work_dir = kafka, kafka.admin, work_dir

    @activity.defn(name="hold_leaders")
    def hold_leaders(self, req: LeaderHoldRequest) -> list[LeaderHold]:
        """Each held partition (its outcome's ``held``, given or saved) put on its target, which elects its first
        replica, once that new replica's local log is within one segment of the leader's: the leader then keeps
        no uploaded segment locally that the new replica lacks. At ``req.max_s`` from the first attempt the rest are
        put on their targets as they are. A partition Kafka shows on another list than its held one is left as it
        is. The heartbeats carry what is done, so a retry reports it and goes on with the rest."""
        folder = ledger.migration_dir(self.work_dir, req.outcomes_of) if req.outcomes_of else None
        saved = ledger.saved_outcomes(folder) if folder is not None else []
        pending = {(o.topic, o.partition): o for o in [*saved, *req.outcomes] if o.held and o.error is None}
        info = activity.info()
        done = [LeaderHold.model_validate(h) for h in (info.heartbeat_details[0] if info.heartbeat_details else [])]
        for h in done:
            pending.pop((h.topic, h.partition), None)
        topics = sorted({t for t, _ in pending})
        configs = self.admin.describe_topic_configs(topics) if topics else {}
        segment = {t: int(c.get("segment.bytes", DEFAULT_SEGMENT)) for t, c in configs.items()}
        while pending:
            activity.heartbeat([h.model_dump() for h in done])
            waited = (datetime.now(UTC) - info.scheduled_time).total_seconds()
            for key, seen in sorted(self._look(pending).items()):
                covered = seen.covered(segment.get(key[0], DEFAULT_SEGMENT))
                if covered or waited >= req.max_s or not seen.held:
                    done.append(self._end_hold(pending.pop(key), seen, covered, waited))
                    activity.heartbeat([h.model_dump() for h in done])
            if pending:
                time.sleep(HOLD_POLL_S)
        return done

    def _look(self, pending: dict[Key, MoveOutcome]) -> dict[Key, Coverage]:
        """Each held partition as Kafka shows it now."""
        keys = set(pending)
        states = {
            (s.topic, s.partition): s for s in self.admin.describe_topics(sorted({t for t, _ in keys}), only=keys)
        }
        # Those on their held lists, and the brokers whose local logs are compared: the new replica's, the leader's.
        compared = {}
        for key, o in pending.items():
            state = states.get(key)
            if state is not None and state.leader is not None and state.replicas == held_order(o.original, o.target):
                compared[key] = (o.target[0], state.leader)
        brokers = sorted({b for pair in compared.values() for b in pair})
        found = self.admin.describe_log_dirs(brokers) if brokers else []
        sizes = {(r.topic, r.partition, r.broker): r.size_bytes for r in found}
        return {
            key: Coverage(True, sizes.get((*key, pair[0])), sizes.get((*key, pair[1])))
            if (pair := compared.get(key))
            else Coverage(held=False)
            for key in pending
        }

    def _end_hold(self, o: MoveOutcome, seen: Coverage, covered: bool, waited: float) -> LeaderHold:
        tp = TopicPartition(topic=o.topic, partition=o.partition)
        reordered = seen.held
        if seen.held:
            activity.logger.info(
                "%s: %s made preferred leader (its local log covers the leader's: %s)", tp, o.target[0], covered
            )
            reordered = self.kafka.reorder(tp, o.target).replicas == o.target
        return LeaderHold(
            topic=o.topic,
            partition=o.partition,
            broker=o.target[0],
            waited_s=round(waited, 1),
            covered=covered,
            new_bytes=seen.new_bytes,
            leader_bytes=seen.leader_bytes,
            reordered=reordered,
        )
