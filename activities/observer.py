"""One look at Kafka per worker and cluster for every step waiting on it: a single poller lists the reassignments
in flight and describes their partitions once per interval, for all waiting steps together, and each waiting step
reads its partition from the latest look. Kafka's calls per second then stay flat however many moves are in
flight (before, each waiting step polled ListPartitionReassignments and DescribeTopics on its own)."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from drover.adapters.kafka_port import KafkaAdminError, KafkaPort
from drover.models import OngoingReassignment, PartitionState, TopicPartition

Key = tuple[str, int]

# A look starts this often while steps wait: a step Kafka finishes is seen within about a quarter of a second, for
# four ListPartitionReassignments and four metadata requests a second however many steps wait.
LOOK_EVERY_S = 0.25
# A step that starts waiting has a look sooner (an empty partition's step is done in a fraction of a second), but
# looks never start closer together than this, so steps starting together share one.
LOOK_GAP_S = 0.1


@dataclass
class Look:
    """One round of calls: the partitions it covered, the reassignments in flight among them and their states (or
    the error the calls raised)."""

    started: float
    covered: frozenset[Key]
    ongoing: dict[Key, OngoingReassignment] = field(default_factory=dict)
    states: dict[Key, PartitionState] = field(default_factory=dict)
    error: Exception | None = None
    # A topic that could not be described (deleted, say) fails only the steps of its partitions.
    topic_errors: dict[str, Exception] = field(default_factory=dict)


class KafkaObserver:
    """Waiting steps register their partition (``watching``) and ask for a look taken after a given moment
    (``look``); the poller thread runs while any partition is watched."""

    def __init__(self, admin: KafkaPort, every_s: float = LOOK_EVERY_S):
        self._admin = admin
        self._every_s = every_s
        self._cond = threading.Condition()
        self._watched: dict[Key, int] = {}
        self._latest: Look | None = None
        self._thread: threading.Thread | None = None
        # When the last look started, and whether a step started waiting since.
        self._last_start = 0.0
        self._fresh = False
        # Rounds of calls made so far (for benchmarks and tests).
        self.looks = 0

    @contextmanager
    def watching(self, tp: TopicPartition) -> Iterator[None]:
        key = (tp.topic, tp.partition)
        with self._cond:
            self._watched[key] = self._watched.get(key, 0) + 1
            self._fresh = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kafka-observer", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                left = self._watched[key] - 1
                if left:
                    self._watched[key] = left
                else:
                    del self._watched[key]

    def look(
        self, tp: TopicPartition, after: float, timeout_s: float
    ) -> tuple[float, OngoingReassignment | None, PartitionState | None]:
        """From the first look that started after ``after`` (a ``time.monotonic()``) and covered the partition: when
        it started, the partition's reassignment in flight (None when there is none) and its state (None when Kafka
        does not know it). The calls' error, if they failed, is raised."""
        key = (tp.topic, tp.partition)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                latest = self._latest
                if latest is not None and latest.started > after and key in latest.covered:
                    error = latest.error or latest.topic_errors.get(tp.topic)
                    if error is not None:
                        raise error
                    return latest.started, latest.ongoing.get(key), latest.states.get(key)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaAdminError(f"no answer from Kafka about {tp} within {timeout_s:.0f} s")
                self._cond.wait(left)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._watched:
                        self._cond.wait()
                        continue
                    due = self._last_start + (LOOK_GAP_S if self._fresh else self._every_s)
                    now = time.monotonic()
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                keys = frozenset(self._watched)
                self._fresh = False
                self._last_start = started = time.monotonic()
            self._latest_is(self._round(keys, started))

    def _round(self, keys: frozenset[Key], started: float) -> Look:
        look = Look(started=started, covered=keys)
        topics = sorted({t for t, _ in keys})
        try:
            wanted = [TopicPartition(topic=t, partition=p) for t, p in sorted(keys)]
            look.ongoing = {(o.topic, o.partition): o for o in self._admin.list_reassignments(wanted)}
            try:
                described = self._admin.describe_topics(topics, only=keys)
            except KafkaAdminError:
                # One topic that cannot be described fails its own steps, not every waiting step.
                described = []
                for topic in topics:
                    try:
                        described += self._admin.describe_topics([topic], only=keys)
                    except KafkaAdminError as e:
                        look.topic_errors[topic] = e
            look.states = {(s.topic, s.partition): s for s in described}
        except Exception as e:  # every waiting step sees the failure and handles it as its own call's
            look.error = e
        self.looks += 1
        return look

    def _latest_is(self, look: Look) -> None:
        with self._cond:
            self._latest = look
            self._cond.notify_all()
