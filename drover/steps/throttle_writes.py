"""What a throttle write changes on Kafka, decided from the coordinator's throttle book and what the cluster shows:
the operator's own values to save before Drover first writes a topic or broker, and the config writes that make
Kafka show Drover's wanted entries merged with the operator's own (restoring the operator's values where Drover's
last entry goes). The activity reads the cluster and writes; nothing here does."""

from collections.abc import Mapping

from drover.models.coordination import ThrottleBook, ThrottleWanted
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, merged_list

LISTS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
RATES = (LEADER_RATE, FOLLOWER_RATE)

# One config write: a topic (its lists) or a broker (its rates), the values to set (None or "": deleted).
ConfigWrite = tuple[str | int, dict[str, str | None], bool]


def to_save(wanted: ThrottleWanted, book: ThrottleBook, known: set[str], live: set[int]) -> tuple[list[str], list[int]]:
    """The topics and brokers whose operator values are to be saved before Drover writes them: wanted, not saved
    yet, and there (a topic that exists, a broker that is live)."""
    topics = sorted(t for t in wanted.topics if t in known and t not in book.saved_topics)
    brokers = sorted(b for b in wanted.brokers if b in live and b not in book.saved_brokers)
    return topics, brokers


def with_saved(
    book: ThrottleBook,
    topics: list[str],
    found: Mapping[str, Mapping[str, str]],
    brokers: list[int],
    found_b: Mapping[int, Mapping[str, str]],
) -> ThrottleBook:
    """The book with the operator's values of those topics and brokers saved (None: not set)."""
    return book.model_copy(
        update={
            "saved_topics": book.saved_topics | {t: {k: found.get(t, {}).get(k) for k in LISTS} for t in topics},
            "saved_brokers": book.saved_brokers | {b: {k: found_b.get(b, {}).get(k) for k in RATES} for b in brokers},
        }
    )


def throttle_writes(
    wanted: ThrottleWanted, book: ThrottleBook, known: set[str], live: set[int]
) -> tuple[list[ConfigWrite], ThrottleBook]:
    """The writes that make Kafka show ``wanted`` merged with the operator's values, and the book once they are done.
    A topic or broker whose operator values are not saved (a broker that was down) is not written yet, and a broker
    that is down keeps what was written: the next write tries again."""
    saved_topics, saved_brokers = dict(book.saved_topics), dict(book.saved_brokers)
    writes: list[ConfigWrite] = []
    topics = {t: v for t, v in wanted.topics.items() if t in known and t in saved_topics}
    for topic, lists in topics.items():
        if book.written.topics.get(topic) != lists:
            writes.append((topic, {k: merged_list(saved_topics[topic][k], lists[k]) or None for k in LISTS}, True))
    for topic in sorted(set(book.written.topics) - set(wanted.topics)):
        if topic in known:
            writes.append((topic, saved_topics.get(topic, {}), True))
        saved_topics.pop(topic, None)
    written_brokers = {b: r for b, r in book.written.brokers.items() if b not in live}
    for broker, (leader, follower) in wanted.brokers.items():
        if broker not in live or broker not in saved_brokers:
            continue
        if book.written.brokers.get(broker) != (leader, follower):
            writes.append((broker, {LEADER_RATE: str(leader), FOLLOWER_RATE: str(follower)}, False))
        written_brokers[broker] = (leader, follower)
    for broker in sorted(set(book.written.brokers) - set(wanted.brokers)):
        if broker in live:
            writes.append((broker, saved_brokers.pop(broker, {}), False))
            written_brokers.pop(broker, None)
    written = ThrottleWanted(topics=topics, brokers=dict(sorted(written_brokers.items())))
    return writes, ThrottleBook(written=written, saved_topics=saved_topics, saved_brokers=saved_brokers)
