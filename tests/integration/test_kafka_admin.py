"""The KafkaAdmin adapter against the real local KRaft cluster."""

import re

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities.kafka import KafkaActivities
from drover.adapters.kafka_port import KafkaAdminError, KafkaRefusedError
from drover.models import TopicPartition
from drover.models.moves import StepRequest
from tests.integration.helpers import consume_all, internal_topics_with_data, produce, wait_until

pytestmark = pytest.mark.integration


def test_describe_cluster_shows_brokers_racks_and_quorum_leader(admin, stack):
    cluster = admin.describe_cluster()
    assert cluster.broker_ids == [1, 2, 3, 4]
    assert {b.id: b.rack for b in cluster.brokers} == {1: "rack-a", 2: "rack-b", 3: "rack-a", 4: "rack-b"}
    assert cluster.controller_id == 100


def test_disks_and_replica_sizes_come_from_one_describe_log_dirs_call(admin, real_settings, topic_name):
    admin.create_topic(topic_name, [[1, 2]])
    tp = TopicPartition(topic=topic_name, partition=0)
    wait_until(lambda: admin.describe_partition(tp).isr == [1, 2], what="topic in sync")
    produce(real_settings, topic_name, 0, 200)
    wait_until(
        lambda: (
            {s.broker for s in admin.describe_log_dirs([1, 2]) if s.topic == topic_name and s.size_bytes > 0} == {1, 2}
        ),
        what="the messages on both replicas",
    )
    calls = []
    call = admin._kp_call
    admin._kp_call = lambda fn: calls.append(fn) or call(fn)
    try:
        disks, sizes = admin.describe_usage([1, 2])
    finally:
        del admin._kp_call
    assert len(calls) == 1
    assert [d.broker for d in disks] == [1, 2] and all(d.total_bytes and d.usable_bytes for d in disks)
    # Usable bytes move as Kafka deletes other tests' files; the totals do not.
    assert [d.total_bytes for d in disks] == [d.total_bytes for d in admin.describe_disks([1, 2])]
    mine = {(s.broker, s.size_bytes) for s in sizes if s.topic == topic_name}
    assert mine == {(s.broker, s.size_bytes) for s in admin.describe_log_dirs([1, 2]) if s.topic == topic_name}
    assert {b for b, _ in mine} == {1, 2}


def test_move_a_partition_with_data_to_another_broker(admin, real_settings, topic_name):
    admin.create_topic(topic_name, [[1, 2]])
    tp = TopicPartition(topic=topic_name, partition=0)
    wait_until(lambda: admin.describe_partition(tp).isr == [1, 2], what="topic in sync")
    written = produce(real_settings, topic_name, 0, 500)
    assert len(written) == 500

    admin.alter_reassignments({tp: [3, 2]})
    state = wait_until(
        lambda: (s := admin.describe_partition(tp)).replicas == [3, 2] and set(s.isr) == {2, 3} and s,
        what="broker 3 in sync and broker 1 gone",
    )
    assert admin.list_reassignments([tp]) == []
    assert 1 not in state.replicas

    # Broker 1 drops its copy of the log shortly after the move completes.
    def sizes_on_2_and_3():
        found = {s.broker: s.size_bytes for s in admin.describe_log_dirs() if s.topic == topic_name}
        return found if set(found) == {2, 3} else None

    sizes = wait_until(sizes_on_2_and_3, timeout_s=30, what="log dirs on brokers 2 and 3 only")
    assert sizes[3] > 0

    admin.elect_preferred_leaders([tp])
    wait_until(lambda: admin.describe_partition(tp).leader == 3, what="broker 3 leading")
    assert consume_all(real_settings, topic_name, 0) == written


def test_list_and_cancel_an_ongoing_reassignment(admin, real_settings, topic_name):
    admin.create_topic(topic_name, [[1]])
    tp = TopicPartition(topic=topic_name, partition=0)
    # A throttle of 1 byte/s on the leader keeps the new replica from catching up, so the move stays ongoing.
    admin.alter_topic_config(topic_name, {"leader.replication.throttled.replicas": "*"})
    admin.alter_broker_config(1, {"leader.replication.throttled.rate": "1"})
    try:
        produce(real_settings, topic_name, 0, 200)
        admin.alter_reassignments({tp: [4]})
        ongoing = admin.list_reassignments([tp])
        assert len(ongoing) == 1 and ongoing[0].adding == [4] and ongoing[0].removing == [1]
        assert ongoing[0].target == [4]
        admin.alter_reassignments({tp: None})
        wait_until(lambda: admin.list_reassignments([tp]) == [], what="reassignment cancelled")
        # Brokers learn the reverted list from the controller a moment after it answers.
        wait_until(lambda: admin.describe_partition(tp).replicas == [1], timeout_s=15, what="replicas back to [1]")
    finally:
        admin.alter_broker_config(1, {}, delete=["leader.replication.throttled.rate"])
        admin.alter_topic_config(topic_name, {}, delete=["leader.replication.throttled.replicas"])
    assert "leader.replication.throttled.rate" not in admin.describe_broker_configs([1], overrides_only=True)[1]
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}


def test_a_cancelled_step_leaves_the_replicas_in_their_original_order_and_leader(admin, real_settings, topic_name):
    # Kafka reverts a cancelled reassignment to the replicas it had, in the order of the list it was moving to:
    # [3, 1, 2] -> [2, 3, 4] cancelled shows [2, 3, 1]. A stop promises the original list, order included.
    admin.create_topic(topic_name, [[3, 1, 2]])
    tp = TopicPartition(topic=topic_name, partition=0)
    admin.alter_topic_config(topic_name, {"leader.replication.throttled.replicas": "*"})
    admin.alter_broker_config(3, {"leader.replication.throttled.rate": "1"})
    try:
        produce(real_settings, topic_name, 0, 200)
        step = StepRequest(topic=topic_name, partition=0, expected=[3, 1, 2], target=[2, 3, 4])
        admin.alter_reassignments({tp: step.target})
        assert [r.target for r in admin.list_reassignments([tp])] == [[2, 3, 4]]
        state = ActivityEnvironment().run(KafkaActivities(admin).cancel_step, step)
    finally:
        admin.alter_broker_config(3, {}, delete=["leader.replication.throttled.rate"])
        admin.alter_topic_config(topic_name, {}, delete=["leader.replication.throttled.replicas"])
    assert (state.replicas, state.leader) == ([3, 1, 2], 3)
    wait_until(lambda: admin.describe_partition(tp).replicas == [3, 1, 2], timeout_s=15, what="the order kept")
    assert admin.list_reassignments([tp]) == []


def test_broker_and_topic_configs_round_trip(admin, topic_name):
    admin.create_topic(topic_name, [[2, 3]], {"min.insync.replicas": "2"})
    assert admin.describe_topic_configs([topic_name])[topic_name]["min.insync.replicas"] == "2"
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {"min.insync.replicas": "2"}
    admin.alter_broker_config(2, {"follower.replication.throttled.rate": "1048576"})
    try:
        overrides = admin.describe_broker_configs([2], overrides_only=True)[2]
        assert overrides["follower.replication.throttled.rate"] == "1048576"
    finally:
        admin.alter_broker_config(2, {}, delete=["follower.replication.throttled.rate"])
    assert "follower.replication.throttled.rate" not in admin.describe_broker_configs([2], overrides_only=True)[2]


def test_errors_name_the_partition(admin, topic_name):
    with pytest.raises(KafkaAdminError, match=topic_name):
        admin.describe_partition(TopicPartition(topic=topic_name, partition=0))
    admin.create_topic(topic_name, [[1]])
    with pytest.raises(KafkaAdminError, match=f"{topic_name}-0"):
        admin.alter_reassignments({TopicPartition(topic=topic_name, partition=0): [99]})


def test_a_topic_deleted_between_the_listing_and_its_description_is_left_out_of_all_topics(admin, topic_name):
    admin.create_topic(topic_name, [[1, 2]])
    listed = admin.list_topics()
    admin.delete_topics([topic_name])
    # What a reading of every topic sees when the deletion lands between its two requests. Each request goes to any
    # broker, and one that has not yet learnt of the deletion still describes the topic; one that has must leave it
    # out of every topic's description without an error, and name it in the error when it is asked for by name.
    admin.list_topics = lambda: listed
    try:
        wait_until(
            lambda: topic_name not in {s.topic for s in admin.describe_topics()}, timeout_s=30, what="the deletion"
        )
        error = wait_until(lambda: _described_by_name(admin, topic_name), timeout_s=30, what="an unknown topic")
        assert re.search(f"describe topic {topic_name} failed: .*Unknown topic", error), error
    finally:
        del admin.list_topics


def _described_by_name(admin, topic: str) -> str | None:
    """The error of describing ``topic`` by name, None while the broker answering still knows it."""
    try:
        admin.describe_topics([topic])
    except KafkaAdminError as e:
        return str(e)
    return None


def test_every_topic_is_listed_and_described_kafkas_internal_ones_and_user_topics_named_like_them_included(
    admin, real_settings, topic_name
):
    # A broker's replicas of the internal topics must be seen by whatever empties it; a user topic whose name
    # starts with "__" is a user topic like any other.
    admin.create_topic(topic_name, [[1, 2]])
    internal_topics_with_data(real_settings, topic_name)
    underscored = f"__{topic_name}"
    admin.create_topic(underscored, [[2, 3]])
    try:
        wanted = {"__consumer_offsets", "__transaction_state", underscored}
        # Each broker learns of a new topic from the controller in its own time: create_topic returned once the
        # broker that described it had it, and a listing answered by another may not have it yet.
        wait_until(lambda: wanted <= set(admin.list_topics()), 30, what=f"{sorted(wanted)} listed")
        wait_until(lambda: wanted <= {s.topic for s in admin.describe_topics()}, 30, what=f"{sorted(wanted)} described")
        assert len([s for s in admin.describe_topics(["__consumer_offsets"]) if s.leader is not None]) == 5
    finally:
        admin.delete_topics([underscored])


def test_a_reassignment_naming_a_cordoned_broker_is_refused_for_good(admin, topic_name):
    # KIP-1066: Kafka refuses any replica list that names a cordoned broker. That answer is final (the same request
    # gets it again), unlike a timeout, so the port raises it as KafkaRefusedError, naming what it means.
    admin.create_topic(topic_name, [[1, 2]])
    admin.alter_broker_config(4, {"cordoned.log.dirs": "*"})
    try:
        with pytest.raises(KafkaRefusedError, match=f"{topic_name}-0: InvalidReplicationAssignmentError .*cordoned"):
            admin.alter_reassignments({TopicPartition(topic=topic_name, partition=0): [1, 4]})
        assert [r for r in admin.list_reassignments() if r.topic == topic_name] == []
        assert admin.describe_topics([topic_name])[0].replicas == [1, 2]
    finally:
        admin.alter_broker_config(4, {}, delete=["cordoned.log.dirs"])


def test_a_validate_only_config_change_asks_kafka_and_changes_nothing(admin):
    # KIP-1066's cordon, as a decommission's check asks for it: Kafka 4.4 takes "*" and refuses a dir it lacks.
    admin.validate_broker_config(4, {"cordoned.log.dirs": "*"})
    with pytest.raises(KafkaAdminError, match="must be present in log.dirs"):
        admin.validate_broker_config(4, {"cordoned.log.dirs": "/not/a/log/dir"})
    assert "cordoned.log.dirs" not in admin.describe_broker_configs([4], overrides_only=True)[4]
