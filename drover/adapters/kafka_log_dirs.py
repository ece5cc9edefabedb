"""DescribeLogDirs answers (kafka-python's dicts) as Drover's models: each replica's size, each broker's disk."""

from drover.models import BrokerDisk, ReplicaSize


def sizes_of(answer: list[dict]) -> list[ReplicaSize]:
    """Each partition replica's size on disk, from a DescribeLogDirs answer."""
    sizes = [
        ReplicaSize(
            broker=entry["broker"],
            topic=topic["name"],
            partition=p["partition_index"],
            size_bytes=p["partition_size"],
            is_future=p["is_future_key"],
        )
        for entry in answer
        for log_dir in entry["log_dirs"]
        for topic in log_dir["topics"]
        for p in topic["partitions"]
    ]
    return sorted(sizes, key=lambda s: (s.topic, s.partition, s.broker, s.is_future))


def disks_of(answer: list[dict]) -> list[BrokerDisk]:
    """Each broker's log dirs added up (total and usable bytes; DescribeLogDirs v4+, Kafka 3.3+), from an answer."""
    disks = []
    for entry in answer:
        dirs = entry["log_dirs"]
        total = [d.get("total_bytes", -1) for d in dirs]
        usable = [d.get("usable_bytes", -1) for d in dirs]
        known = dirs and all(v >= 0 for v in total + usable)
        disks.append(
            BrokerDisk(
                broker=entry["broker"],
                total_bytes=sum(total) if known else None,
                usable_bytes=sum(usable) if known else None,
            )
        )
    return sorted(disks, key=lambda d: d.broker)
