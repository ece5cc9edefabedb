"""What a throttle write changes on Kafka: the operator's values saved first, merged in, and restored."""

from drover.models.coordination import ThrottleBook, ThrottleWanted
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.steps.throttle_writes import throttle_writes, to_save, with_saved

LISTS = {LEADER_REPLICAS: ["0:1", "0:2"], FOLLOWER_REPLICAS: ["0:3"]}
WANTED = ThrottleWanted(topics={"orders": LISTS}, brokers={1: (100, 100), 3: (100, 100)})


def test_only_topics_and_brokers_that_are_there_and_not_saved_yet_are_saved():
    book = ThrottleBook(saved_brokers={1: {LEADER_RATE: None, FOLLOWER_RATE: None}})
    topics, brokers = to_save(WANTED, book, known={"orders"}, live={1, 2})
    assert (topics, brokers) == (["orders"], [])
    saved = with_saved(book, topics, {"orders": {LEADER_REPLICAS: "5:1"}}, [2], {})
    assert saved.saved_topics == {"orders": {LEADER_REPLICAS: "5:1", FOLLOWER_REPLICAS: None}}
    assert saved.saved_brokers[2] == {LEADER_RATE: None, FOLLOWER_RATE: None}


def test_drovers_entries_are_merged_with_the_operators_and_a_broker_not_saved_or_down_waits():
    book = ThrottleBook(
        saved_topics={"orders": {LEADER_REPLICAS: "5:1", FOLLOWER_REPLICAS: None}},
        saved_brokers={1: {LEADER_RATE: None, FOLLOWER_RATE: None}},
    )
    writes, after = throttle_writes(WANTED, book, known={"orders"}, live={1, 2})
    assert writes == [
        ("orders", {LEADER_REPLICAS: "0:1,0:2,5:1", FOLLOWER_REPLICAS: "0:3"}, True),
        (1, {LEADER_RATE: "100", FOLLOWER_RATE: "100"}, False),
    ]
    # Broker 3 is down and not saved: not written, and not in the book; the next write tries again.
    assert after.written == ThrottleWanted(topics={"orders": LISTS}, brokers={1: (100, 100)})
    # Written already: nothing to do.
    assert throttle_writes(WANTED, after, known={"orders"}, live={1, 2})[0] == []


def test_where_drovers_last_entry_goes_the_operators_values_are_restored_and_a_down_broker_keeps_its_rate():
    book = ThrottleBook(
        written=ThrottleWanted(topics={"orders": LISTS}, brokers={1: (100, 100), 2: (100, 100)}),
        saved_topics={"orders": {LEADER_REPLICAS: "5:1", FOLLOWER_REPLICAS: None}},
        saved_brokers={1: {LEADER_RATE: "7", FOLLOWER_RATE: None}, 2: {LEADER_RATE: None, FOLLOWER_RATE: None}},
    )
    writes, after = throttle_writes(ThrottleWanted(), book, known={"orders"}, live={1})
    assert writes == [
        ("orders", {LEADER_REPLICAS: "5:1", FOLLOWER_REPLICAS: None}, True),
        (1, {LEADER_RATE: "7", FOLLOWER_RATE: None}, False),
    ]
    assert after.written == ThrottleWanted(brokers={2: (100, 100)})
    assert after.saved_topics == {} and list(after.saved_brokers) == [2]
