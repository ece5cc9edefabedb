"""Kafka writes coalesced: steps issued within a few milliseconds of each other on one worker go to Kafka in one
AlterPartitionReassignments call, and preferred-leader elections in one ElectLeaders call (both APIs take many
partitions at once). Each partition keeps its own result: when the call fails, each partition is written on its
own, so one partition's refusal fails that step or election only."""

import threading
import time
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from drover.adapters.kafka_port import KafkaAdminError, KafkaPort
from drover.models import TopicPartition

# How long the first write of a batch waits for others to join it.
BATCH_WINDOW_S = 0.02

V = TypeVar("V")


class _Batch(Generic[V]):
    def __init__(self) -> None:
        self.values: dict[TopicPartition, V] = {}
        self.errors: dict[TopicPartition, Exception] = {}
        self.done = threading.Event()


class CoalescedCall(Generic[V]):
    """One Kafka call that takes many partitions (``call``, given each partition's value), made once for every
    partition submitted within ``window_s`` of the first."""

    def __init__(self, call: Callable[[Mapping[TopicPartition, V]], None], window_s: float):
        self._call = call
        self._window_s = window_s
        self._lock = threading.Lock()
        self._open: _Batch[V] | None = None
        # Calls made and partitions written (for benchmarks and tests).
        self.calls = 0
        self.written = 0

    def submit(self, tp: TopicPartition, value: V) -> None:
        """Write the partition's value in the batch now open or a new one; returns once written, or raises that
        partition's error."""
        with self._lock:
            batch, leader = self._open, False
            if batch is None or tp in batch.values:
                batch, leader = _Batch(), True
                self._open = batch
            batch.values[tp] = value
        if leader:
            try:
                time.sleep(self._window_s)
            finally:
                # Written even when this thread is interrupted while it waits (Temporal cancels a threaded activity
                # by raising in its thread): the writes that joined the batch wait on it, and this one may be on
                # Kafka's way already as far as its cancel knows; the interruption is raised once it is written.
                with self._lock:
                    if self._open is batch:
                        self._open = None
                self._write(batch)
        else:
            batch.done.wait()
        error = batch.errors.get(tp)
        if error is not None:
            raise error

    def _write(self, batch: _Batch[V]) -> None:
        try:
            self._counted(batch.values)
        except KafkaAdminError as e:
            if len(batch.values) == 1:
                batch.errors.update(dict.fromkeys(batch.values, e))
            else:
                for tp, value in batch.values.items():
                    try:
                        self._counted({tp: value})
                    except KafkaAdminError as e:
                        batch.errors[tp] = e
        except Exception as e:  # anything else fails every write of the batch, as its own call would have
            batch.errors.update(dict.fromkeys(batch.values, e))
        finally:
            batch.done.set()

    def _counted(self, values: Mapping[TopicPartition, V]) -> None:
        with self._lock:
            self.calls += 1
            self.written += len(values)
        self._call(values)


class ReassignmentWriter:
    """The worker's coalesced reassignment writes and preferred-leader elections."""

    def __init__(self, admin: KafkaPort, window_s: float = BATCH_WINDOW_S):
        self._alters: CoalescedCall[list[int] | None] = CoalescedCall(admin.alter_reassignments, window_s)
        self._elections: CoalescedCall[None] = CoalescedCall(
            lambda partitions: admin.elect_preferred_leaders(list(partitions)), window_s
        )

    def alter(self, tp: TopicPartition, target: list[int] | None) -> None:
        """Start (a list) or cancel (None) the partition's reassignment."""
        self._alters.submit(tp, target)

    def elect(self, tp: TopicPartition) -> None:
        """Elect the partition's preferred leader."""
        self._elections.submit(tp, None)

    @property
    def calls(self) -> int:
        """AlterPartitionReassignments calls made."""
        return self._alters.calls

    @property
    def elections(self) -> int:
        """ElectLeaders calls made."""
        return self._elections.calls
