"""With sizes: bytes per broker within a tolerance of the mean, then replica counts, with few bytes moved.

Objectives in order, never trading a higher one for a lower: the hard constraints (no replica on a removed or
unknown broker, the rack limit); bytes per broker within ±tolerance of the mean (of the used fraction when brokers
give their disk size); replicas per broker within the same tolerance; then the fewest bytes and replicas moved.

1. Replicas that must move (removed or unknown broker, over a rack limit) are placed largest first, each on the
   fitting broker that its bytes fill least.
2. While a broker is outside the byte band, the worst violator sheds to (or takes from) the brokers furthest on the
   other side, one replica at a time. A broker also off the mean count by a replica or more moves replicas of the
   size that brings bytes and count to their targets together (the bytes it is off by over the replicas it is off
   by); one whose count is about right moves just what takes it back into its band (the fewest bytes). Partitions
   none of whose replicas moved yet come first. A move never pushes the other broker out of its byte band, so the
   total violation falls with every move. When no single move helps, a swap of a larger replica for a smaller one
   does. Where rack limits force a rack to hold more (or less) than its share, each rack is balanced within itself.
3. Clusters of up to EXACT_PARTITIONS partitions are searched exhaustively: coarse sizes can need chains of moves
   the steps above do not try, and the search also finds the fewest bytes moved.
4. While a broker is outside the replica band, small replicas move (or two small ones are swapped for one larger)
   between it and the brokers on the other side, never leaving the byte band.
5. A moved replica that can go back to where it was, leaving no band worse, goes back; then step 4 once more.
Same input, same output: every choice breaks ties by size, then partition index, then broker id.
"""

import bisect
import heapq
import itertools

from drover.planner.bands import Bands
from drover.planner.placement import Hole, Placement
from drover.planner.ranking import LoadRanking

# How many brokers on the other side are searched for each move: enough to find a fitting replica near the
# wanted size, few enough that 100k partitions plan in seconds.
CANDIDATES = 12
RACK_CANDIDATES = 4
# A replica within this fraction of the wanted size ends the search for a move.
CLOSE = 0.25
# Replicas of one broker looked at for one move, nearest the wanted size first.
SCAN = 32
# How many of a broker's smallest replicas a two-for-one swap pairs up.
PAIR_TRIES = 6
# How many of the under side's smallest replicas a swap tries.
SWAP_TRIES = 64


class Balancer:
    """Keeps each broker's replicas sorted by size, so the replica nearest a wanted size is a bisection away: those
    of partitions none of whose replicas moved yet apart from the others, which are taken only when no untouched
    one fits. Moving several replicas of one partition would pair the brokers they land on, and leave their leaders
    nowhere else to go."""

    def __init__(self, p: Placement, b: Bands, original: list[list[int]]) -> None:
        self.p = p
        self.b = b
        self.original = [set(r) for r in original]
        self.changed: set[int] = set()  # brokers whose load changed since last cleared
        self.fresh: dict[int, list[tuple[int, int]]] = {broker: [] for broker in p.rack_of}
        self.touched: dict[int, list[tuple[int, int]]] = {broker: [] for broker in p.rack_of}
        for i, replicas in enumerate(p.replicas):
            lists = self.fresh if self.untouched(i) else self.touched
            entry = (p.sizes[i], i)
            for broker in replicas:
                if broker in lists:
                    lists[broker].append(entry)
        for entries in (*self.fresh.values(), *self.touched.values()):
            entries.sort()
        self.ranking = LoadRanking(p, b.bytes_target)

    # -- bookkeeping ---------------------------------------------------------------------------------------------

    def untouched(self, i: int) -> bool:
        return all(b in self.original[i] for b in self.p.replicas[i])

    def _entries(self, i: int, broker: int, untouched: bool | None = None) -> list[tuple[int, int]]:
        fresh = self.untouched(i) if untouched is None else untouched
        return self.fresh[broker] if fresh else self.touched[broker]

    def place(self, hole: Hole, broker: int) -> None:
        """Fill a hole (its partition counts as touched while the hole is open)."""
        self._put(hole.partition, hole.slot, broker, was=False)

    def move(self, i: int, source: int, dest: int) -> None:
        self.changed.update((source, dest))
        was = self.untouched(i)
        slot = self.p.replicas[i].index(source)
        entries = self._entries(i, source, was)
        del entries[bisect.bisect_left(entries, (self.p.sizes[i], i))]
        self.p.take_out(i, slot)
        self._put(i, slot, dest, was)

    def _put(self, i: int, slot: int, broker: int, was: bool) -> None:
        self.p.put_in(i, slot, broker)
        self._reclassify(i, was, exclude=broker)
        bisect.insort(self._entries(i, broker), (self.p.sizes[i], i))

    def _reclassify(self, i: int, was: bool, exclude: int) -> None:
        """Partition ``i``'s entries on its other brokers follow it between the untouched and touched lists."""
        now = self.untouched(i)
        if now == was:
            return
        key = (self.p.sizes[i], i)
        for broker in self.p.replicas[i]:
            if broker == exclude or broker not in self.fresh:
                continue
            old = self._entries(i, broker, was)
            del old[bisect.bisect_left(old, key)]
            bisect.insort(self._entries(i, broker, now), key)

    def bytes(self, broker: int) -> int:
        return self.p.bytes_load[broker]

    def count(self, broker: int) -> int:
        return self.p.load[broker]

    def byte_violation(self, broker: int) -> float:
        u = self.bytes(broker)
        return max(u - self.b.bytes_high[broker], self.b.bytes_low[broker] - u, 0.0)

    # -- 1. replicas that must move --------------------------------------------------------------------------------

    def place_mandatory(self, holes: list[Hole]) -> None:
        for hole in sorted(holes, key=lambda h: (-self.p.sizes[h.partition], h.partition, h.slot)):
            i = hole.partition
            fitting = self.p.fitting(i, self.p.rack_of) or [b for b in self.p.rack_of if b not in self.p.replicas[i]]
            size, penalty = self.p.sizes[i], self.p.zone_penalty
            self.place(
                hole,
                min(
                    fitting,
                    key=lambda b: (
                        (self.bytes(b) + size + penalty(i, b)) / max(self.b.bytes_target[b], 1),
                        self.count(b) >= self.b.replicas_high[b],
                        self.count(b),
                        b,
                    ),
                ),
            )

    # -- 2. bytes --------------------------------------------------------------------------------------------------

    def balance_bytes(self) -> None:
        violating = {b for b in self.p.rack_of if self.byte_violation(b) > 0}
        stuck: set[int] = set()
        while True:
            worst = max(
                (b for b in violating if b not in stuck),
                key=lambda b: (self.byte_violation(b) / max(self.b.bytes_target[b], 1), -b),
                default=None,
            )
            if worst is None:
                return
            over = self.bytes(worst) > self.b.bytes_high[worst]
            self.changed.clear()
            if self._shift(worst, over) or self._swap(worst, over):
                stuck.clear()
            else:
                stuck.add(worst)
            for b in self.changed:
                if self.byte_violation(b) > 0:
                    violating.add(b)
                else:
                    violating.discard(b)

    def _wanted_size(self, broker: int, over: bool) -> float:
        """The size of replica to move. A broker off the mean count by several replicas as well moves replicas of
        the size that brings bytes and count to their targets together; one whose count is about right moves just
        what takes it back into its byte band (fewest bytes moved)."""
        off_count = (self.count(broker) - self.b.replicas_target[broker]) * (1 if over else -1)
        if off_count >= 1:
            return abs(self.bytes(broker) - self.b.bytes_target[broker]) / off_count
        return self.byte_violation(broker)

    def _others(self, broker: int, over: bool) -> list[int]:
        """Brokers on the other side, furthest first, and the furthest of the broker's own rack (where a tight rack
        limit keeps a partition's replica)."""
        chosen = self.ranking.furthest(broker, over, CANDIDATES)
        if not self.p.racked:
            return chosen
        same_rack = self.ranking.furthest(broker, over, RACK_CANDIDATES, rack=True)
        return chosen + [b for b in same_rack if b not in chosen]

    def _shift(self, broker: int, over: bool) -> bool:
        """One replica from the over broker to another, or to the under broker from another."""
        wanted = self._wanted_size(broker, over)
        slack = CLOSE * wanted if self.p.own_copies else 0.0  # see _nearest
        best: tuple[bool, float, int, int, int] | None = None
        for other in self._others(broker, over):
            source, dest = (broker, other) if over else (other, broker)
            # The source stays at or above its low bound, the destination at or below its high bound.
            most = min(self.bytes(source) - self.b.bytes_low[source], self.b.bytes_high[dest] - self.bytes(dest))
            if most <= 0:
                continue
            found = self._nearest(source, dest, wanted, 1, most, slack=slack)
            if found is None:
                continue
            size, i = found
            penalty = self.p.zone_penalty(i, dest)
            key = (not self.untouched(i), max(abs(size - wanted), slack) + penalty, self.p.copies[i], i, other)
            if best is None or key < best:
                best = key
            if key[0] is False and key[1] <= CLOSE * wanted:
                break
        if best is None:
            return False
        *_, i, other = best
        source, dest = (broker, other) if over else (other, broker)
        self.move(i, source, dest)
        return True

    def _nearest(
        self, source: int, dest: int, wanted: float, low: float, high: float, skip: int = -1, slack: float = 0.0
    ):
        """The replica of ``source`` with size in [low, high] nearest ``wanted`` that may go to ``dest``, as
        (size, partition), untouched partitions first; or None. With a zone weight, a copy between zones counts as
        that much further (``Placement.zone_penalty``). With copy bytes of their own (a tiered topic's, KIP-1023),
        sizes within ``slack`` of ``wanted`` are as near as each other, and of those as near, the one whose copy
        moves the fewest bytes. Candidates come nearest first: one further than the best found ends the search."""
        penalty, copies, ties_matter = self.p.zone_penalty, self.p.copies, self.p.own_copies
        for entries in (self.fresh[source], self.touched[source]):
            best: tuple[float, int, int, int] | None = None
            for size, i in self._outward(entries, wanted, low, high):
                if i == skip or not self.may_go(i, source, dest):
                    continue
                distance = max(abs(size - wanted), slack)
                if best is not None and distance > best[0]:
                    break  # nearest first: every one after is further still
                cost = distance + penalty(i, dest)
                key = (cost, copies[i] - (0 if ties_matter else size))
                if best is None or key < best[:2]:
                    best = (*key, size, i)
                if cost == distance and not ties_matter:
                    break  # without copy bytes of their own, the first that stays within a zone is the one
            if best is not None:
                return best[2], best[3]
        return None

    @staticmethod
    def _outward(entries: list[tuple[int, int]], wanted: float, low: float, high: float):
        """Up to SCAN of ``entries`` (sorted by size) with size in [low, high], nearest ``wanted`` first."""
        start = bisect.bisect_left(entries, (low, -1))
        end = bisect.bisect_right(entries, (high, 1 << 62))
        mid = min(max(bisect.bisect_left(entries, (wanted, -1)), start), end)
        down, up = mid - 1, mid
        for _ in range(SCAN):
            if down < start and up >= end:
                return
            if up < end and (down < start or entries[up][0] - wanted <= wanted - entries[down][0]):
                k, up = up, up + 1
            else:
                k, down = down, down - 1
            yield entries[k]

    def _smallest(self, broker: int, n: int) -> list[tuple[int, int]]:
        return heapq.nsmallest(n, [*self.fresh[broker][:n], *self.touched[broker][:n]])

    def _ascending(self, broker: int):
        return heapq.merge(self.fresh[broker], self.touched[broker])

    def may_go(self, i: int, source: int, dest: int) -> bool:
        """``dest`` may hold partition ``i`` in place of its replica on ``source``: not there yet, and the rack
        limit holds once the replica has left ``source``."""
        p = self.p
        replicas = p.replicas[i]
        if dest in replicas:
            return False
        if not p.racked:
            return True
        rack = p.rack_of[dest]
        if p.rack_of.get(source) == rack:
            return True
        return sum(1 for b in replicas if b != source and p.rack_of.get(b) == rack) < p.limits[i]

    def _swap(self, broker: int, over: bool) -> bool:
        """A larger replica of the over side for a smaller one of the under side: counts stay, bytes even out."""
        for other in self._others(broker, over):
            high_side, low_side = (broker, other) if over else (other, broker)
            # Moving d bytes from high_side to low_side keeps both in their bands when 1 <= d <= most.
            most = min(
                self.bytes(high_side) - self.b.bytes_low[high_side],
                self.b.bytes_high[low_side] - self.bytes(low_side),
            )
            if most < 1:
                continue
            wanted = min(self.byte_violation(broker), most)
            for size_y, j in self._smallest(low_side, SWAP_TRIES):
                if not self.may_go(j, low_side, high_side):
                    continue
                found = self._nearest(high_side, low_side, size_y + wanted, size_y + 1, size_y + most, skip=j)
                if found is not None and self._swap_fits(found[1], j, high_side, low_side):
                    self.move(found[1], high_side, low_side)
                    self.move(j, low_side, high_side)
                    return True
        return False

    def _swap_fits(self, i: int, j: int, a: int, b: int) -> bool:
        """Partition ``i`` a -> b and partition ``j`` b -> a are both allowed (checked one after the other)."""
        if i == j:
            return False
        slot = self.p.replicas[i].index(a)
        self.p.replicas[i][slot] = b
        ok = self.may_go(j, b, a)
        self.p.replicas[i][slot] = a
        return ok

    # -- 4. replica counts -----------------------------------------------------------------------------------------

    def balance_counts(self) -> None:
        stuck: set[int] = set()
        while True:
            worst = max(
                (b for b in self.p.rack_of if b not in stuck and self._count_violation(b) > 0),
                key=lambda b: (self._count_violation(b), -b),
                default=None,
            )
            if worst is None:
                return
            if self._count_step(worst, over=self.count(worst) > self.b.replicas_high[worst]):
                stuck.clear()
            else:
                stuck.add(worst)

    def _count_violation(self, broker: int) -> int:
        return self._count_violation_at(broker, self.count(broker))

    def _count_violation_at(self, broker: int, n: int) -> int:
        return max(n - self.b.replicas_high[broker], self.b.replicas_low[broker] - n, 0)

    def _count_step(self, broker: int, over: bool) -> bool:
        """One replica, the smallest that keeps both brokers in their byte bands, from the broker with too many or
        to the broker with too few. The other broker stays within the replica band, so the violation falls."""
        others = sorted(
            (b for b in self.p.rack_of if b != broker), key=lambda b: (self.count(b) * (1 if over else -1), b)
        )
        for other in others[:CANDIDATES]:
            source, dest = (broker, other) if over else (other, broker)
            if self.count(source) <= self.b.replicas_low[source] or self.count(dest) >= self.b.replicas_high[dest]:
                continue
            most = min(self.bytes(source) - self.b.bytes_low[source], self.b.bytes_high[dest] - self.bytes(dest))
            for size, i in self._ascending(source):
                if size > most:
                    break
                if self.may_go(i, source, dest):
                    self.move(i, source, dest)
                    return True
            if self._two_for_one(source, dest):
                return True
        return False

    def _two_for_one(self, source: int, dest: int) -> bool:
        """Two small replicas from ``source`` to ``dest``, and one of about their size back, where both brokers
        stay in their byte bands: ``source`` holds one replica fewer, ``dest`` one more."""
        b = self.b
        # d bytes may go from source to dest.
        d_low = max(self.bytes(source) - b.bytes_high[source], b.bytes_low[dest] - self.bytes(dest))
        d_high = min(self.bytes(source) - b.bytes_low[source], b.bytes_high[dest] - self.bytes(dest))
        small = [(size, i) for size, i in self._smallest(source, PAIR_TRIES) if self.may_go(i, source, dest)]
        for (s1, i1), (s2, i2) in itertools.combinations(small, 2):
            if i1 == i2:
                continue
            self.move(i1, source, dest)
            if not self.may_go(i2, source, dest):
                self.move(i1, dest, source)
                continue
            self.move(i2, source, dest)
            back = self._nearest(dest, source, s1 + s2, s1 + s2 - d_high, s1 + s2 - d_low, skip=i1)
            if back is not None and back[1] != i2:
                self.move(back[1], dest, source)
                return True
            self.move(i2, dest, source)
            self.move(i1, dest, source)
        return False

    # -- 5. fewer moves --------------------------------------------------------------------------------------------

    def send_back(self) -> None:
        """A replica that left a kept broker goes back there when that leaves no band more violated."""
        for i, replicas in enumerate(self.p.replicas):
            for home in sorted(self.original[i] - set(replicas)):
                if home not in self.p.rack_of:
                    continue
                for source in [b for b in self.p.replicas[i] if b not in self.original[i]]:
                    if self.may_go(i, source, home) and self._no_worse(i, source, home):
                        self.move(i, source, home)
                        break

    def _no_worse(self, i: int, source: int, dest: int) -> bool:
        size = self.p.sizes[i]
        before = self.byte_violation(source) + self.byte_violation(dest)
        after = self._violation_at(source, self.bytes(source) - size) + self._violation_at(
            dest, self.bytes(dest) + size
        )
        counts_before = self._count_violation(source) + self._count_violation(dest)
        counts_after = self._count_violation_at(source, self.count(source) - 1) + self._count_violation_at(
            dest, self.count(dest) + 1
        )
        return after <= before and counts_after <= counts_before

    def _violation_at(self, broker: int, load: float) -> float:
        return max(load - self.b.bytes_high[broker], self.b.bytes_low[broker] - load, 0.0)
