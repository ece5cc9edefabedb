"""The canary: what a client's produce feels on each broker, measured by producing to it. Small acks=all messages,
PROBES_PER_S a second to a partition of the canary topic each broker leads, timed from the send to the broker's
answer (the round trip a producer waits on: the request's queue, the leader's write, its followers' fetch, the
network and the host's CPU). The brokers' own request metrics time only the part inside Kafka's threads: on the
sandbox the clients' produce p99 rises tenfold during a copy while those threads stay over 90% idle; the canary waits
as the clients do.

The canary topic (TOPIC) is Drover's: made on the first probe with a partition led by each broker of the cluster
then (replication factor up to REPLICAS, across the next brokers), an hour's retention. The worker's principal needs
Create, Describe and Write on it (with ACLs: `kafka-acls --add --allow-principal User:drover --operation Create
--operation Describe --operation Write --topic drover-canary`). A broker that leads none of its partitions (one added
after the topic was made, or whose leadership moved away until a preferred leader election) gets no reading, and
says why; a message unanswered when the probe ends counts at its age: a broker that does not answer is never quiet.
"""

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_clients import rdkafka_logger
from drover.adapters.kafka_port import KafkaAdminError
from drover.models.band import ProduceLatency

TOPIC = "drover-canary"
# Messages a second to each broker. The canary costs the clients most during a copy: on the sandbox, probing at 100 a
# second during a throttled copy lifted the clients' produce p99 threefold (median of 4 rounds), at 20 a second not at
# all (`bench.band.canary_cost --copy`). 20 still gives a 5 s reading 100 round trips per broker.
PROBES_PER_S = 20
REPLICAS = 3
PAYLOAD = b"drover canary"
# The canary's messages are of no use once timed: kept an hour, in segments rolled as often.
TOPIC_CONFIGS = {"retention.ms": "3600000", "segment.ms": "3600000"}
# How long the probe waits, after its last send, for the answers still out.
DRAIN_S = 5.0


class Canary:
    """Probes each broker's produce round trip on ``admin``'s cluster, with a producer of ``config`` (librdkafka's,
    the worker's credentials) kept across probes."""

    def __init__(self, admin: KafkaAdmin, config: dict, topic: str = TOPIC):
        self.admin, self.topic = admin, topic
        self._config = config | {
            "acks": "all",
            "linger.ms": 0,
            "allow.auto.create.topics": False,
            "message.timeout.ms": int(DRAIN_S * 1000) * 4,
        }
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def probe(self, brokers: Sequence[int], seconds: float) -> dict[int, ProduceLatency]:
        """Each of ``brokers``' (none: every broker's) produce round trips over ``seconds``: their 99th percentile
        and how many were timed; a broker with no reading says why."""
        try:
            leads, named = self._leaders(brokers)
        except (KafkaAdminError, KafkaException) as e:
            return {b: ProduceLatency(missing=f"canary topic {self.topic}: {e}") for b in brokers}
        probed = self._probed(leads, seconds)
        found = {b: probed[b].reading() for b in leads}
        unled = f"leads no partition of the canary topic {self.topic} (a preferred leader election gives it back)"
        return found | {b: ProduceLatency(missing=unled) for b in named if b not in leads}

    def round_trips(self, seconds: float) -> dict[int, list[float]]:
        """Every broker's produce round trips (ms) over ``seconds``, one by one, as a reading takes its p99 from them
        (``bench.band.canary_signal``). Raises where the canary topic cannot be made or described."""
        leads, _ = self._leaders([])
        return {b: probed.times for b, probed in self._probed(leads, seconds).items()}

    def _probed(self, leads: dict[int, int], seconds: float) -> dict[int, "Probed"]:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(self._config, logger=rdkafka_logger())
                # Its first messages wait for its connections to the brokers: not what a client feels.
                for partition in leads.values():
                    self._producer.produce(self.topic, PAYLOAD, partition=partition)
                self._producer.flush(DRAIN_S)
            return _probe(self._producer, self.topic, leads, seconds)

    def _leaders(self, brokers: Sequence[int]) -> tuple[dict[int, int], list[int]]:
        """A partition of the canary topic led by each of ``brokers`` (every broker when none are named) that leads
        one; and the brokers asked about. Makes the topic when it is missing."""
        every = [] if brokers else sorted(self.admin.describe_cluster().broker_ids)
        named = list(brokers) or every
        if self.topic not in self.admin.list_topics():
            every = every or sorted(self.admin.describe_cluster().broker_ids)
            width = min(REPLICAS, len(every))
            assignment = [[every[(i + k) % len(every)] for k in range(width)] for i in range(len(every))]
            # Another worker's canary may make it meanwhile: its topic serves as well.
            self.admin.create_topic(self.topic, assignment, TOPIC_CONFIGS, exist_ok=True)
        leads: dict[int, int] = {}
        for state in self.admin.describe_topics([self.topic]):
            if state.leader is not None and state.leader in named:
                leads.setdefault(state.leader, state.partition)
        return leads, named


def percentile(times: list[float], share: float) -> float:
    """The round trip at ``share`` of ``times`` (none empty), in order: the nearest rank, as a reading takes its p99."""
    ordered = sorted(times)
    return ordered[max(int(len(ordered) * share + 0.5) - 1, 0)]


@dataclass
class Probed:
    """One broker's probe: the round trips (ms), the messages still out (their send times), the first refusal."""

    times: list[float] = field(default_factory=list)
    out: set[float] = field(default_factory=set)
    refused: str = ""

    def reading(self) -> ProduceLatency:
        if self.refused:
            return ProduceLatency(missing=f"the canary's messages were refused: {self.refused}")
        if not self.times:
            return ProduceLatency(missing="the canary sent it nothing")
        p99 = percentile(self.times, 0.99)
        return ProduceLatency(p99_ms=p99, requests=float(len(self.times)), tail_ms=p99)


def _probe(producer: Producer, topic: str, leads: dict[int, int], seconds: float) -> dict[int, Probed]:
    """Per broker: a message every 1/PROBES_PER_S s for ``seconds``, then DRAIN_S for the answers; their round trips
    (ms), one still out counted at its age, and the first refusal."""
    found = {b: Probed() for b in leads}

    def answered(broker: int, sent: float) -> Callable[[KafkaError | None, Message], None]:
        def done(error: KafkaError | None, message: Message) -> None:
            probed = found[broker]
            probed.out.discard(sent)
            if error is not None:
                probed.refused = probed.refused or error.str()
            else:
                # librdkafka's own time from the send to the broker's answer (a callback runs only once polled).
                probed.times.append((message.latency() or 0.0) * 1000)

        return done

    start = time.monotonic()
    for n in range(max(int(seconds * PROBES_PER_S), 1)):
        while (left := start + n / PROBES_PER_S - time.monotonic()) > 0:
            producer.poll(left)
        for broker, partition in leads.items():
            sent = time.monotonic()
            try:
                producer.produce(topic, PAYLOAD, partition=partition, on_delivery=answered(broker, sent))
                found[broker].out.add(sent)
            except BufferError:
                pass
    producer.flush(DRAIN_S)
    now = time.monotonic()
    for probed in found.values():
        probed.times.extend((now - sent) * 1000 for sent in probed.out)
    return found
