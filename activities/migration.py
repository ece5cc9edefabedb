"""Migration activities: preflight checks, the throttle for the moves in flight, and the final verification.

Failure types a workflow can match on (raised non-retryable):
- ``Preflight``: the plan does not fit the cluster; the message lists every problem, and nothing was changed.
"""

import time
from collections import Counter

from temporalio import activity
from temporalio.exceptions import ApplicationError

from adapters.kafka_admin import KafkaAdmin
from models.migration import LeaderElection, LeaderElectionResult, PreflightResult, ThrottleRequest, ThrottleState
from models.plan import PartitionReplicas
from models import TopicPartition
from steps.admission import MoveSpec
from steps.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    throttled_brokers,
    throttled_replicas,
)


class MigrationActivities:
    def __init__(self, admin: KafkaAdmin):
        self.admin = admin

    @activity.defn(name="preflight")
    def preflight(self, moves: list[PartitionReplicas]) -> PreflightResult:
        """Check every move against the cluster and record what it shows now; any problem fails with all of them."""
        cluster = self.admin.describe_cluster()
        alive = set(cluster.broker_ids)
        topics = sorted({m.topic for m in moves})
        known = set(self.admin.list_topics())
        states = {(s.topic, s.partition): s for s in self.admin.describe_topics([t for t in topics if t in known])}
        ongoing = {(r.topic, r.partition) for r in self.admin.list_reassignments()}
        problems: list[str] = []
        repeated = Counter((m.topic, m.partition) for m in moves)
        for (topic, partition), count in sorted(repeated.items()):
            if count > 1:
                problems.append(f"{topic}-{partition} is in the plan {count} times")
        for m in moves:
            name = f"{m.topic}-{m.partition}"
            if m.topic not in known:
                problems.append(f"topic {m.topic} does not exist")
            elif (m.topic, m.partition) not in states:
                problems.append(f"partition {name} does not exist")
            elif (m.topic, m.partition) in ongoing:
                problems.append(f"{name} is already being reassigned")
            missing = sorted(set(m.replicas) - alive)
            if missing:
                problems.append(f"{name}: broker {missing[0]} is not a live broker of the cluster")
        if problems:
            unique = list(dict.fromkeys(problems))
            raise ApplicationError(
                f"preflight found {len(unique)} problem(s), nothing was changed: " + "; ".join(unique),
                type="Preflight",
                non_retryable=True,
            )
        min_insync = {
            t: int(c.get("min.insync.replicas", "1")) for t, c in self.admin.describe_topic_configs(topics).items()
        }
        sizes: dict[tuple[str, int], int] = {}
        for r in self.admin.describe_log_dirs():
            key = (r.topic, r.partition)
            if key in states and r.broker == states[key].leader:
                sizes[key] = r.size_bytes
        specs = []
        for m in moves:
            state = states[(m.topic, m.partition)]
            urgent = len(state.isr) < len(state.replicas) or len(state.isr) <= min_insync[m.topic]
            specs.append(
                MoveSpec(
                    topic=m.topic, partition=m.partition, original=state.replicas, target=m.replicas,
                    size_bytes=sizes.get((m.topic, m.partition), 0), urgent=urgent and len(state.replicas) > 1,
                )  # fmt: skip
            )
        return PreflightResult(moves=specs, min_insync=min_insync)

    @activity.defn(name="set_throttle")
    def set_throttle(self, req: ThrottleRequest) -> ThrottleState:
        """Throttle exactly the moves in flight; clear brokers and topics that no longer need it."""
        lists = throttled_replicas(req.in_flight)
        brokers = throttled_brokers(req.in_flight)
        rate = str(req.rate_bytes_per_s)
        for topic, configs in lists.items():
            follower = configs[FOLLOWER_REPLICAS]
            self.admin.alter_topic_config(
                topic,
                {LEADER_REPLICAS: configs[LEADER_REPLICAS], **({FOLLOWER_REPLICAS: follower} if follower else {})},
                delete=[] if follower else [FOLLOWER_REPLICAS],
            )
        for broker in brokers:
            self.admin.alter_broker_config(broker, {LEADER_RATE: rate, FOLLOWER_RATE: rate})
        state = ThrottleState(brokers=brokers, topics=sorted(lists))
        self._clear(
            ThrottleState(
                brokers=sorted(set(req.previous_brokers) - set(brokers)),
                topics=sorted(set(req.previous_topics) - set(lists)),
            )
        )
        return state

    @activity.defn(name="clear_throttle")
    def clear_throttle(self, state: ThrottleState) -> None:
        self._clear(state)

    def _clear(self, state: ThrottleState) -> None:
        known = set(self.admin.list_topics())
        for topic in state.topics:
            if topic in known:
                self.admin.alter_topic_config(topic, {}, delete=[LEADER_REPLICAS, FOLLOWER_REPLICAS])
        for broker in state.brokers:
            self.admin.alter_broker_config(broker, {}, delete=[LEADER_RATE, FOLLOWER_RATE])

    @activity.defn(name="elect_leaders")
    def elect_leaders(self, req: LeaderElection) -> LeaderElectionResult:
        """Elect the preferred leader of every partition given that is led by another replica, ``req.batch`` at a
        time, each batch waited for (up to 30 s) before the next; a preferred replica out of sync is left alone."""
        wanted = {(p.topic, p.partition) for p in req.partitions}
        states = [s for s in self.admin.describe_topics(sorted({t for t, _ in wanted})) if (s.topic, s.partition) in wanted]
        off = [s for s in states if s.replicas and s.leader != s.replicas[0] and s.replicas[0] in s.isr]
        elected = 0
        for i in range(0, len(off), req.batch):
            batch = [TopicPartition(topic=s.topic, partition=s.partition) for s in off[i : i + req.batch]]
            self.admin.elect_preferred_leaders(batch)
            deadline = time.monotonic() + 30
            while True:
                now = {(s.topic, s.partition): s for s in self.admin.describe_topics(sorted({p.topic for p in batch}))}
                led = [p for p in batch if now[(p.topic, p.partition)].leader == now[(p.topic, p.partition)].replicas[0]]
                if len(led) == len(batch) or time.monotonic() > deadline:
                    break
                activity.heartbeat(i)
                time.sleep(0.25)
            elected += len(led)
        after = self.admin.describe_topics(sorted({t for t, _ in wanted}))
        not_preferred = [f"{s.topic}-{s.partition}" for s in after
                         if (s.topic, s.partition) in wanted and s.replicas and s.leader != s.replicas[0]]  # fmt: skip
        return LeaderElectionResult(elected=elected, not_preferred=not_preferred)

    @activity.defn(name="verify")
    def verify(self, moves: list[MoveSpec]) -> list[str]:
        """The partitions whose replica list on Kafka is not their target, one line each (empty: all verified)."""
        states = {(s.topic, s.partition): s for s in self.admin.describe_topics(sorted({m.topic for m in moves}))}
        wrong = []
        for m in moves:
            state = states.get((m.topic, m.partition))
            if state is None or state.replicas != m.target:
                shown = state.replicas if state else "nothing"
                wrong.append(f"{TopicPartition(topic=m.topic, partition=m.partition)} shows {shown}, not {m.target}")
        return wrong
