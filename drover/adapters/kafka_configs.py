"""Topic and broker configs through librdkafka's AdminClient: described many at once, altered incrementally and read
back until the change shows."""

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from drover.adapters.kafka_port import KafkaAdminError

# How long describing a topic (or its configs) retries "unknown topic": brokers learn of a new topic moments apart.
NEW_TOPIC_GRACE_S = 5.0

# Where a config set on the resource itself comes from (ConfigEntry.source holds the enum's integer value). The
# cluster-wide dynamic defaults (KRaft formats one for min.insync.replicas) belong to neither a topic nor a broker.
_OVERRIDE_SOURCE = {
    ResourceType.TOPIC: ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    ResourceType.BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG.value,
}


class ConfigClient:
    """The configs half of KafkaAdmin, on its AdminClient; ``wait`` turns a future into its result or one
    KafkaAdminError."""

    def __init__(self, ck: AdminClient, timeout: float, wait: Callable[[Any, str], Any]):
        self._ck, self._timeout, self._wait = ck, timeout, wait

    def describe(self, kind: ResourceType, names: list[str], overrides_only: bool) -> dict[str, dict[str, str]]:
        """Effective configs per resource; with ``overrides_only``, just those set on the resource itself."""
        wanted = sorted(set(names))
        futures = self._describe_futures(kind, wanted)
        out: dict[str, dict[str, str]] = {}
        for name in wanted:
            entries = self._describe_one(kind, name, futures[name])
            out[name] = {
                k: e.value
                for k, e in sorted(entries.items())
                if e.value is not None and (not overrides_only or int(e.source) == _OVERRIDE_SOURCE[kind])
            }
        return out

    def _describe_futures(self, kind: ResourceType, names: list[str]) -> dict[str, object]:
        """Every resource asked for before any answer is awaited: topics in one DescribeConfigs request, brokers in
        one each (a broker's configs come from that broker), all in flight at once. One after another, a preflight
        over a thousand topics made a thousand round trips."""
        resources = [ConfigResource(kind, name) for name in names]
        calls = [[r] for r in resources] if kind == ResourceType.BROKER else [resources] if resources else []
        futures: dict[str, object] = {}
        for call in calls:
            answer = self._ck.describe_configs(call, request_timeout=self._timeout)
            futures.update({r.name: answer[r] for r in call})
        return futures

    def _describe_one(self, kind: ResourceType, name: str, future=None) -> dict:
        what = f"describe configs of {kind.name.lower()} {name}"
        # Any broker may answer; one that has not yet learnt of a topic created a moment ago says it is unknown.
        deadline = time.monotonic() + NEW_TOPIC_GRACE_S
        while True:
            if future is None:
                future = self._describe_futures(kind, [name])[name]
            try:
                return self._wait(future, what)
            except KafkaAdminError as e:
                if kind != ResourceType.TOPIC or not unknown_topic(e) or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
            future = None

    def validate(self, kind: ResourceType, name: str, set_: Mapping[str, str]) -> None:
        """Ask Kafka whether it would take these configs, changing nothing (IncrementalAlterConfigs, validate-only)."""
        entries = [ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in sorted(set_.items())]
        resource = ConfigResource(kind, name, incremental_configs=entries)
        futures = self._ck.incremental_alter_configs([resource], request_timeout=self._timeout, validate_only=True)
        self._wait(futures[resource], f"validate configs of {kind.name.lower()} {name}")

    def alter(self, kind: ResourceType, name: str, set_: Mapping[str, str], delete: Iterable[str]) -> None:
        """Set and delete configs of one resource, incrementally; returns once the resource shows the change."""
        entries = [
            ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in sorted(set_.items())
        ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in sorted(set(delete))]
        if not entries:
            return
        resource = ConfigResource(kind, name, incremental_configs=entries)
        futures = self._ck.incremental_alter_configs([resource], request_timeout=self._timeout)
        what = f"alter configs of {kind.name.lower()} {name}"
        self._wait(futures[resource], what)
        # The controller has accepted the change; wait until the resource shows it, so callers read their writes.
        wanted = {k: str(v) for k, v in set_.items()}
        deadline = time.monotonic() + self._timeout
        while True:
            now = self.describe(kind, [name], overrides_only=True)[name]
            if all(now.get(k) == v for k, v in wanted.items()) and not set(delete) & set(now):
                return
            if time.monotonic() > deadline:
                raise KafkaAdminError(f"{what}: accepted but not visible after {self._timeout:.0f} s")
            time.sleep(0.1)


def refused_with(error: KafkaAdminError, code: int) -> bool:
    """The call failed as Kafka answered ``code`` (a ``KafkaError`` code)."""
    cause = error.__cause__
    return isinstance(cause, KafkaException) and bool(cause.args) and cause.args[0].code() == code


def unknown_topic(error: KafkaAdminError) -> bool:
    return refused_with(error, KafkaError.UNKNOWN_TOPIC_OR_PART)
