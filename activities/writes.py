"""Reassignment writes coalesced: steps issued within a few milliseconds of each other on one worker go to Kafka in
one AlterPartitionReassignments call (the API takes many partitions at once). Each step keeps its own result: when
the call fails, each partition is written on its own, so one partition's refusal fails that step only."""

import threading
import time
from collections.abc import Mapping

from adapters.kafka_admin import KafkaAdminError
from adapters.kafka_port import KafkaPort
from models import TopicPartition

# How long the first step of a batch waits for others to join it.
BATCH_WINDOW_S = 0.02


class _Batch:
    def __init__(self) -> None:
        self.targets: dict[TopicPartition, list[int] | None] = {}
        self.errors: dict[TopicPartition, Exception] = {}
        self.done = threading.Event()


class ReassignmentWriter:
    def __init__(self, admin: KafkaPort, window_s: float = BATCH_WINDOW_S):
        self._admin = admin
        self._window_s = window_s
        self._lock = threading.Lock()
        self._open: _Batch | None = None
        # Calls made and partitions written (for benchmarks and tests).
        self.calls = 0
        self.written = 0

    def alter(self, tp: TopicPartition, target: list[int] | None) -> None:
        """Start (a list) or cancel (None) the partition's reassignment, in the batch now open or a new one; returns
        once written, or raises that partition's error."""
        with self._lock:
            batch, leader = self._open, False
            if batch is None or tp in batch.targets:
                batch, leader = _Batch(), True
                self._open = batch
            batch.targets[tp] = target
        if leader:
            try:
                time.sleep(self._window_s)
            finally:
                # Written even when this thread is interrupted while it waits (Temporal cancels a threaded activity
                # by raising in its thread): the steps that joined the batch wait on it, and this step may be on
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

    def _write(self, batch: _Batch) -> None:
        try:
            self._call(batch.targets)
        except KafkaAdminError as e:
            if len(batch.targets) == 1:
                batch.errors.update(dict.fromkeys(batch.targets, e))
            else:
                for tp, target in batch.targets.items():
                    try:
                        self._call({tp: target})
                    except KafkaAdminError as e:
                        batch.errors[tp] = e
        except Exception as e:  # anything else fails every step of the batch, as its own call would have
            batch.errors.update(dict.fromkeys(batch.targets, e))
        finally:
            batch.done.set()

    def _call(self, targets: Mapping[TopicPartition, list[int] | None]) -> None:
        with self._lock:
            self.calls += 1
            self.written += len(targets)
        self._admin.alter_reassignments(targets)
