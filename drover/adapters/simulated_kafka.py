"""A simulated Kafka for load: the in-memory Kafka with log sizes, write rates and a bandwidth model, so that a step
takes as long as its bytes take at the throttle in force. It stands behind the Kafka port like the real cluster and
is chosen for a worker by ``DROVER_KAFKA_SIMULATED`` (for example ``brokers=200,racks=10,partitions=100000,rf=3``):
large plans can be rehearsed and the scale benchmarks run without a cluster of that size.

The model, checked on each look at Kafka (listing reassignments, describing partitions):
- every partition has a log size and a write rate; its log grows at that rate;
- a replica being added copies from the partition's leader; its copy rate is the smaller of the receiver's and the
  leader's bandwidth, each shared equally by the copies going through that broker;
- a broker's bandwidth is its network (``net``), or the replication throttle in force on it when the partition's
  replica there is listed as throttled (``follower.`` for the receiver, ``leader.`` for the leader), as Kafka does;
- the copy catches up when it holds the whole log: a copy slower than the partition's writes never does;
- a step is done when every replica it adds has caught up, and no sooner than ``step`` seconds after it was issued
  (Kafka's own round trips for an empty partition); the leader changes then if it left the list;
- a stopped broker copies nothing, and a partition it led is led by its next replica; elections are Kafka's.
"""

import math
import random
import time
from array import array
from collections.abc import Callable

from drover.adapters.memory_kafka import InMemoryKafka
from drover.models import PartitionState, ReplicaSize
from drover.models.simulation import SimulationSpec

Key = tuple[str, int]

# Messages are taken to be 1 KiB each for the offsets a simulated partition reports.
MESSAGE_BYTES = 1024


class SimulatedKafka(InMemoryKafka):
    def __init__(
        self,
        brokers: dict[int, str | None],
        assignment: dict[Key, list[int]],
        sizes: dict[Key, int],
        rates: dict[Key, float] | None = None,
        net: float = 125_000_000,
        step_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(brokers, assignment)
        self.net = net
        self.step_s = step_s
        self._clock = clock
        self._start = self._now = clock()
        keys = sorted(assignment)
        self._index = {k: i for i, k in enumerate(keys)}
        self._sizes = array("d", (float(sizes.get(k, 0)) for k in keys))
        self._rates = array("d", (float((rates or {}).get(k, 0.0)) for k in keys))
        self._topics: dict[str, list[Key]] = {}
        for k in keys:
            self._topics.setdefault(k[0], []).append(k)
        # Bytes each adding replica holds, (partition, broker) -> bytes, and when each step was issued.
        self._copied: dict[tuple[Key, int], float] = {}
        # Adding replicas that have caught up: they follow the log from then on.
        self._synced: set[tuple[Key, int]] = set()
        self._issued: dict[Key, float] = {}
        # Each topic's throttled-replica lists as last parsed: config value -> {(partition, broker)} or None for "*".
        self._lists: dict[str, set[tuple[int, int]] | None] = {}
        self.cluster_id = "simulated"

    @classmethod
    def from_spec(cls, spec: SimulationSpec, clock: Callable[[], float] = time.monotonic) -> "SimulatedKafka":
        """The cluster a spec describes, the same every time for the same spec: brokers 1..N in racks r0..r(R-1)
        by turns; each partition's replicas on the next brokers from one further along per partition, skipping a
        broker whose rack already has its share (ceil(rf / racks)) of the partition."""
        rng = random.Random(spec.seed)
        racks = {b: (f"r{(b - 1) % spec.racks}" if spec.racks else None) for b in range(1, spec.brokers + 1)}
        order = list(range(1, spec.brokers - spec.empty + 1))
        topics = spec.topics or max(1, spec.partitions // 100)
        assignment: dict[Key, list[int]] = {}
        sizes: dict[Key, int] = {}
        rates: dict[Key, float] = {}
        for i in range(spec.partitions):
            key = (f"sim-{i % topics:05d}", i // topics)
            assignment[key] = _spread(order, i % len(order), spec.rf, racks)
            weight = math.exp(rng.gauss(0.0, 1.0) - 0.5)
            sizes[key] = int(spec.size * weight)
            rates[key] = spec.rate * weight
        return cls(racks, assignment, sizes, rates, net=spec.net, step_s=spec.step, clock=clock)

    # -- what Kafka shows --------------------------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        return sorted(self._topics)

    def describe_topics(self, topics=None, only=None) -> list[PartitionState]:
        names = sorted(set(topics)) if topics is not None else sorted(self._topics)
        with self._lock:
            self._advance()
            return [self._state(k) for t in names for k in self._topics.get(t, []) if only is None or k in only]

    def describe_log_dirs(self, brokers=None) -> list[ReplicaSize]:
        """Each replica in sync holds the whole log; a replica being added holds what it has copied so far."""
        wanted = None if brokers is None else set(brokers)
        with self._lock:
            self._advance()
            sizes = []
            for key, replicas in self.replicas.items():
                log = int(self._log_bytes(key))
                held = [(b, log) for b in replicas]
                if key in self.ongoing:
                    held += [
                        (b, log if (key, b) in self._synced else int(self._copied.get((key, b), 0.0)))
                        for b in self._adding(key)
                    ]
                sizes += [
                    ReplicaSize(broker=b, topic=key[0], partition=key[1], size_bytes=n)
                    for b, n in held
                    if wanted is None or b in wanted
                ]
            return sizes

    def local_log_starts(self, partitions) -> dict[Key, int]:
        """No simulated partition is tiered: each log is local from offset 0."""
        return {(p.topic, p.partition): 0 for p in partitions}

    def last_tiered_offsets(self, partitions) -> dict[Key, int]:
        return {(p.topic, p.partition): -1 for p in partitions}

    def log_offsets(self, partitions) -> dict[Key, tuple[int, int]]:
        """Offsets of 1 KiB messages: the log end grows with the partition's writes."""
        at = self._clock()
        with self._lock:
            return {
                (p.topic, p.partition): (0, int(self._log_bytes((p.topic, p.partition), at) // MESSAGE_BYTES))
                for p in partitions
            }

    # -- the model -----------------------------------------------------------------------------------------------

    # Whatever changes the model (a step, a throttle, a broker stopping) first carries the copies up to now, so that
    # what went before is copied at the rates in force before.

    def alter_broker_config(self, broker_id: int, set_, delete=()) -> None:
        self._settle()
        super().alter_broker_config(broker_id, set_, delete)

    def alter_topic_config(self, topic: str, set_, delete=()) -> None:
        self._settle()
        super().alter_topic_config(topic, set_, delete)

    def stop_broker(self, broker: int) -> None:
        self._settle()
        super().stop_broker(broker)

    def start_broker(self, broker: int) -> None:
        self._settle()
        super().start_broker(broker)

    def elect_preferred_leaders(self, partitions) -> None:
        self._settle()
        super().elect_preferred_leaders(partitions)

    def _settle(self) -> None:
        with self._lock:
            self._advance()

    def alter_reassignments(self, targets) -> None:
        self._settle()
        super().alter_reassignments(targets)
        now = self._clock()
        with self._lock:
            for tp, target in targets.items():
                key = (tp.topic, tp.partition)
                # A cancelled step's new replicas are deleted; a changed step keeps the copies it still adds.
                for c in [c for c in self._copied if c[0] == key and (target is None or c[1] not in target)]:
                    del self._copied[c]
                    self._synced.discard(c)
                if target is None:
                    self._issued.pop(key, None)
                else:
                    self._issued[key] = now

    def _look(self) -> None:
        self._advance()

    def _log_bytes(self, key: Key, at: float | None = None) -> float:
        i = self._index.get(key)
        if i is None:
            return 0.0
        return self._sizes[i] + self._rates[i] * ((self._now if at is None else at) - self._start)

    def _adding(self, key: Key) -> list[int]:
        return [b for b in self.ongoing[key][0] if b not in self.replicas[key]]

    def _advance(self) -> None:
        """Carry every copy forward to now: between two moments where a copy catches up, each copies at its share
        of the bandwidth; the shares change as copies finish."""
        now = self._clock()
        copies = [
            (key, b)
            for key in self.ongoing
            for b in self._adding(key)
            if not self._blocked(key, self.ongoing[key][0])
            and self.leaders[key] not in self.down
            and key not in self.offline
        ]
        self._copied = {c: n for c, n in self._copied.items() if c[0] in self.ongoing}
        self._synced = {c for c in self._synced if c[0] in self.ongoing}
        while self._now < now:
            moving = [c for c in copies if c not in self._synced]
            if not moving:
                self._now = now
                break
            share = self._shares(moving)
            # The next moment a copy catches up, or now.
            step = now - self._now
            for c in moving:
                gain = share[c] - self._rates[self._index[c[0]]]
                if gain > 0:
                    step = min(step, max(0.0, self._log_bytes(c[0]) - self._copied.get(c, 0.0)) / gain)
            self._now += step
            for c in moving:
                self._copied[c] = self._copied.get(c, 0.0) + share[c] * step
                if self._copied[c] >= self._log_bytes(c[0]) - 1.0:
                    self._synced.add(c)
        for key in list(self.ongoing):
            target = self.ongoing[key][0]
            in_sync = all((key, b) in self._synced for b in self._adding(key)) and not self._blocked(key, target)
            if in_sync and now >= self._issued.get(key, 0.0) + self.step_s:
                self._finish(key, self.ongoing[key][0])

    def _shares(self, copies: list[tuple[Key, int]]) -> dict[tuple[Key, int], float]:
        into: dict[int, int] = {}
        out_of: dict[int, int] = {}
        for key, b in copies:
            into[b] = into.get(b, 0) + 1
            out_of[self.leaders[key]] = out_of.get(self.leaders[key], 0) + 1
        share = {}
        for key, b in copies:
            leader = self.leaders[key]
            receive = self._bandwidth(b, key, "follower") / into[b]
            send = self._bandwidth(leader, key, "leader") / out_of[leader]
            share[(key, b)] = min(receive, send)
        return share

    def _bandwidth(self, broker: int, key: Key, side: str) -> float:
        """The broker's network, or its throttle when the partition's replica there is listed as throttled."""
        rate = self.broker_configs.get(broker, {}).get(f"{side}.replication.throttled.rate")
        if rate is None:
            return self.net
        listed = self.topic_configs.get(key[0], {}).get(f"{side}.replication.throttled.replicas", "")
        if listed not in self._lists:
            self._lists[listed] = None if listed.strip() == "*" else _replica_list(listed)
        replicas = self._lists[listed]
        if replicas is None or (key[1], broker) in replicas:
            return min(self.net, float(rate))
        return self.net

    def _finish(self, key, target) -> None:
        super()._finish(key, target)
        self._issued.pop(key, None)


def _spread(order: list[int], start: int, rf: int, racks: dict[int, str | None]) -> list[int]:
    share = math.ceil(rf / len({racks[b] for b in order}))
    chosen: list[int] = []
    for j in range(start, start + 2 * len(order)):
        b = order[j % len(order)]
        if b not in chosen and [racks[c] for c in chosen].count(racks[b]) < share:
            chosen.append(b)
            if len(chosen) == rf:
                return chosen
    # Racks too uneven for an even spread: fill up with the next brokers.
    return chosen + [b for b in order if b not in chosen][: rf - len(chosen)]


def _replica_list(text: str) -> set[tuple[int, int]]:
    """Kafka's throttled-replica list, "0:1,0:2,1:3", as (partition, broker) pairs."""
    pairs = set()
    for item in filter(None, (s.strip() for s in text.split(","))):
        partition, _, broker = item.partition(":")
        pairs.add((int(partition), int(broker)))
    return pairs


def simulated_kafka(text: str) -> SimulatedKafka:
    """The simulated cluster ``DROVER_KAFKA_SIMULATED`` describes."""
    return SimulatedKafka.from_spec(SimulationSpec.parse(text))


__all__ = ["SimulatedKafka", "SimulationSpec", "simulated_kafka"]
