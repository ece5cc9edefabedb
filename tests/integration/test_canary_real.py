"""The canary on the real cluster (``drover.adapters.canary``): its topic made with a partition led by each broker,
a reading of every broker's produce round trip, a broker that leads none of its partitions told apart; and the band
driven by it with no broker metrics at all."""

import asyncio

import pytest

from drover.adapters.canary import PROBES_PER_S, Canary
from drover.sandbox import Sandbox
from drover.workflows import ClusterWorkflow
from tests.integration.test_band_real import MB, ConfigSampler, Run, banded_move

pytestmark = pytest.mark.integration


def test_the_canary_makes_its_topic_led_by_every_broker_and_times_each_one(admin, topic_name):
    brokers = sorted(admin.describe_cluster().broker_ids)
    canary = Canary(admin, admin.client_config(), topic=topic_name)
    try:
        found = canary.probe([], 1.0)
        states = admin.describe_topics([topic_name])
        assert sorted(s.leader for s in states) == brokers, states
        assert all(len(s.replicas) == min(3, len(brokers)) for s in states), states
        assert sorted(found) == brokers
        for b, reading in found.items():
            assert not reading.missing and reading.requests == PROBES_PER_S, (b, reading)
            # Acknowledged by all its replicas: more than nothing, less than the probe's own drain.
            assert reading.p99_ms is not None and 0 < reading.p99_ms < 5000 and reading.tail_ms == reading.p99_ms
        configs = admin.describe_topic_configs([topic_name])[topic_name]
        assert configs["retention.ms"] == "3600000", configs
        # The round trips one by one, as a reading takes its p99 from them (the canary signal bench reads them).
        trips = canary.round_trips(0.5)
        assert sorted(trips) == brokers and all(len(t) == PROBES_PER_S // 2 and min(t) > 0 for t in trips.values())
        print({b: round(r.p99_ms or 0, 1) for b, r in found.items()})
    finally:
        admin.delete_topics([topic_name])


def test_a_broker_that_leads_no_canary_partition_is_told_not_taken_for_quiet(admin, topic_name):
    # The topic as an older cluster left it: no partition led by broker 3.
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    canary = Canary(admin, admin.client_config(), topic=topic_name)
    try:
        found = canary.probe([1, 3], 0.5)
        assert found[1].p99_ms is not None and not found[1].missing
        assert found[3].p99_ms is None and "leads no partition of the canary topic" in found[3].missing, found[3]
    finally:
        admin.delete_topics([topic_name])


def test_a_canary_topic_made_meanwhile_by_another_worker_is_probed_not_refused(admin, topic_name, monkeypatch):
    """Two workers' canaries on one cluster: the other made the topic after this one's listing (or a broker that had not
    yet learnt of it answered that listing). The create is refused as the topic exists; the canary probes it all the
    same, with partitions led as the other worker made them."""
    brokers = sorted(admin.describe_cluster().broker_ids)
    admin.create_topic(topic_name, [[b] for b in brokers])
    listed = admin.list_topics
    monkeypatch.setattr(admin, "list_topics", lambda: [t for t in listed() if t != topic_name])
    canary = Canary(admin, admin.client_config(), topic=topic_name)
    try:
        found = canary.probe([], 0.5)
        assert sorted(found) == brokers
        assert all(not r.missing and r.p99_ms is not None for r in found.values()), found
    finally:
        admin.delete_topics([topic_name])


async def test_with_no_broker_metrics_the_canary_drives_the_band(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    """The worker reads no broker metrics (its traffic from log growth): with `--latency-from canary`, a target under
    what a client's produce takes halves broker 1's leader rate, told as the canary's p99 over the target, and the
    migration's result keeps what its moves cost the clients, as the canary measured it."""
    sampler = ConfigSampler(admin, [1, 3])
    run = Run(None, "the clients first", latency="0.5ms", floor=1 * MB, latency_from="canary")
    async with banded_move(real_client, admin, real_settings, topic_name, 60, run) as (handle, coordinator, *_):
        sampler.start()
        try:
            result = await asyncio.wait_for(handle.result(), 600)
        finally:
            sampler.stopped.set()
        status = await coordinator.query(ClusterWorkflow.status)
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    over = [t for t in told if t.startswith("broker 1: canary's produce p99") and "over the 0.5 ms target" in t]
    assert over and "leader rate" in over[0], "\n".join(told)
    assert not any("follows bytes alone" in t for t in told), told
    # Halved on Kafka: a rate under the one the move started at, never under the floor.
    rates = sampler.leader_on(1, 0)
    assert rates and min(rates) < max(rates) and min(rates) >= 1 * MB, rates
    cost = result.latency[1]
    assert result.verified and cost.readings >= 1 and cost.peak_ms > 0.5 and cost.over_s > 0, result.latency
    print(f"{over[0]}; result: {cost.text(1)}")
