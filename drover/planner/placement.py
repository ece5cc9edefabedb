"""The replicas of every partition while the planner moves them: per broker, its count, its quota and the
partitions it holds; per rack, its replicas of each partition; and the holes left by evicted replicas."""

from collections import Counter
from dataclasses import dataclass, field

HOLE = -1


@dataclass
class Hole:
    partition: int  # index into Placement.replicas
    slot: int
    source: int  # the broker the replica left
    mandatory: bool  # removed/unknown broker or rack limit: may not go back


@dataclass
class Placement:
    replicas: list[list[int]]
    topics: list[str]
    sizes: list[int]
    rack_of: dict[int, str | None]  # kept brokers only
    limits: list[int]  # rack limit per partition
    quota: dict[int, int]
    racked: bool
    group: dict[int, str | None]  # brokers whose quotas may trade: one rack when balancing per rack, else all
    load: dict[int, int] = field(default_factory=dict)
    hosted: dict[int, set[int]] = field(default_factory=dict)
    topic_load: dict[int, Counter] = field(default_factory=dict)  # per broker, its replicas of each topic
    bytes_load: Counter = field(default_factory=Counter)
    open: set[int] = field(default_factory=set)  # brokers below their quota
    by_room: dict[int, set[int]] = field(default_factory=dict)  # the open brokers by room (quota - load)
    bytes_changed: set[int] = field(default_factory=set)  # brokers whose bytes changed (for drover.planner.ranking)
    # With a zone weight: each partition's replicas before the plan (a new replica copies from one of them: the one
    # in its zone, where there is one, as Drover's zone-local copies do), each broker's zone.
    sources: list[list[int]] = field(default_factory=list)
    zone_of: dict[int, str] = field(default_factory=dict)
    zone_weight: float = 0.0
    # The bytes a copy of each partition moves, where not its size (a tiered topic's part past its last tiered
    # offset, KIP-1023): what a move costs. Its size stays what a broker holds once the copy has caught up.
    copies: list[int] = field(default_factory=list)
    own_copies: bool = False  # copies given, not the sizes

    def __post_init__(self) -> None:
        self.own_copies = bool(self.copies)
        if not self.own_copies:
            self.copies = self.sizes
        # The same counts as _count(i, b, +1) for every replica on a kept broker, added up in bulk.
        hosted: dict[int, set[int]] = {b: set() for b in self.rack_of}
        self.hosted = hosted
        for i, replicas in enumerate(self.replicas):
            for b in replicas:
                if (on := hosted.get(b)) is not None:
                    on.add(i)
        topics, sizes = self.topics, self.sizes
        self.topic_load = {b: Counter(map(topics.__getitem__, on)) for b, on in hosted.items()}
        if any(sizes):
            for b, on in hosted.items():
                self.bytes_load[b] = sum(map(sizes.__getitem__, on))
        self.load = {b: len(on) for b, on in hosted.items()}
        self.open = set()
        for b in self.rack_of:
            self._reopen(b, 0)

    # -- bookkeeping ---------------------------------------------------------------------------------------------

    def _count(self, i: int, b: int, sign: int) -> None:
        room = self.quota[b] - self.load[b]
        self.load[b] += sign
        self.topic_load[b][self.topics[i]] += sign
        self.bytes_load[b] += sign * self.sizes[i]
        self.bytes_changed.add(b)
        if sign > 0:
            self.hosted[b].add(i)
        else:
            self.hosted[b].discard(i)
        self._reopen(b, room)

    def _reopen(self, b: int, room_before: int) -> None:
        """Keep ``open`` (brokers below their quota) and ``by_room`` (open brokers by their room) up to date."""
        if room_before > 0:
            bucket = self.by_room[room_before]
            bucket.discard(b)
            if not bucket:
                del self.by_room[room_before]
        room = self.quota[b] - self.load[b]
        if room > 0:
            self.by_room.setdefault(room, set()).add(b)
            self.open.add(b)
        else:
            self.open.discard(b)

    def take_out(self, i: int, slot: int) -> int:
        b = self.replicas[i][slot]
        self.replicas[i][slot] = HOLE
        if b in self.load:
            self._count(i, b, -1)
        return b

    def put_in(self, i: int, slot: int, b: int) -> None:
        assert self.replicas[i][slot] == HOLE
        self.replicas[i][slot] = b
        self._count(i, b, +1)

    def reset_quotas(self, quota: dict[int, int], group: dict[int, str | None]) -> None:
        self.group = group
        for b, q in quota.items():
            self.set_quota(b, q)

    def set_quota(self, b: int, quota: int) -> None:
        room = self.quota[b] - self.load[b]
        self.quota[b] = quota
        self._reopen(b, room)

    def best_open(self, i: int) -> int | None:
        """The open broker that fits partition ``i`` and comes first by ``preference`` (most room first), or None;
        looked for among the brokers with the most room first, so a hole costs a few brokers, not every open one."""
        for room in sorted(self.by_room, reverse=True):
            fitting = self.fitting(i, self.by_room[room])
            if fitting:
                return min(fitting, key=self.preference(i))
        return None

    def room(self, b: int) -> int:
        return self.quota[b] - self.load[b]

    def fits(self, i: int, b: int) -> bool:
        """Broker ``b`` may hold a replica of partition ``i``: not there yet, and its rack is under the limit."""
        return bool(self.fitting(i, (b,)))

    def fitting(self, i: int, brokers) -> list[int]:
        """The brokers of ``brokers`` that may hold a replica of partition ``i``."""
        replicas = self.replicas[i]
        if not self.racked:
            return [b for b in brokers if b not in replicas]
        in_rack = Counter(self.rack_of[b] for b in replicas if b != HOLE)
        limit = self.limits[i]
        return [b for b in brokers if b not in replicas and in_rack[self.rack_of[b]] < limit]

    def preference(self, i: int):
        """The sort key among fitting brokers for partition ``i``: most room, then (with a zone weight) in its
        leader's zone, fewest replicas of its topic, fewest bytes, lowest id."""
        topic, load, quota, topic_load, bytes_load = (
            self.topics[i],
            self.load,
            self.quota,
            self.topic_load,
            self.bytes_load,
        )
        if self.zone_weight:
            return lambda b: (load[b] - quota[b], self.crosses(i, b), topic_load[b][topic], bytes_load[b], b)
        return lambda b: (load[b] - quota[b], topic_load[b][topic], bytes_load[b], b)

    def crosses(self, i: int, dest: int) -> bool:
        """With a zone weight: a copy of partition ``i`` onto ``dest`` crosses zones when none of the partition's
        replicas before the plan is in ``dest``'s zone (Drover's moves make such a replica the leader for the copy).
        Never where a zone is unknown."""
        if not self.zone_weight:
            return False
        zone_of = self.zone_of
        there = zone_of.get(dest)
        return there is not None and all(zone_of.get(b, there) != there for b in self.sources[i])

    def move_price(self, i: int, dest: int) -> float:
        """What a copy of partition ``i`` onto ``dest`` costs, in bytes: what it copies, less ``zone_weight`` of it
        where the copy stays within a zone (at weight 1, only bytes between zones count). Without sizes, a copy is
        one."""
        w = self.zone_weight
        return (self.copies[i] or 1) * (1 - w + w * self.crosses(i, dest)) if w else self.copies[i]

    def zone_penalty(self, i: int, dest: int) -> float:
        """The bytes a copy of partition ``i`` onto ``dest`` counts for above one that stays within a zone."""
        return (self.copies[i] or 1) * self.zone_weight if self.crosses(i, dest) else 0.0
