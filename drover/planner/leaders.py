"""Preferred leaders: balanced by reordering replica lists, which moves no data.

With P partitions over B brokers, every broker should lead floor(P / B) or ceil(P / B). Each partition keeps its
leader unless a hand-over is needed (leader stability): first every broker over ceil hands leaderships on, then every
broker under floor receives them, each along the shortest chain of hand-overs ("a leads a partition b also holds"),
found breadth-first. A partition of one replica cannot change leader; the balance is then as close as it allows.
"""

import heapq
from collections import deque
from itertools import chain


def balance_leaders(replicas: list[list[int]], brokers: list[int]) -> list[int]:
    """The chosen leader of every partition; ``replicas[i][0]`` is its preferred leader now.

    ``brokers`` are the kept brokers; any other broker still in a list (a plan cut short by a move budget) should
    lead nothing and hands its leaderships over where it can.
    """
    leader = [r[0] for r in replicas]
    kept = set(brokers)
    led: dict[int, set[int]] = {b: set() for b in set(chain.from_iterable(replicas))}
    led |= {b: set() for b in brokers}
    for i, b in enumerate(leader):
        led[b].add(i)
    floor, extra = divmod(len(replicas), len(brokers))
    ceil = floor + (1 if extra else 0)

    def over(b: int) -> bool:
        return len(led[b]) > (ceil if b in kept else 0)

    def under_ceil(b: int) -> bool:
        return b in kept and len(led[b]) < ceil

    def above_floor(b: int) -> bool:
        return len(led[b]) > (floor if b in kept else 0)

    def under_floor(b: int) -> bool:
        return b in kept and len(led[b]) < floor

    for b in sorted(led):
        while over(b) and _hand_over({b}, under_ceil, replicas, leader, led):
            pass
    _raise_to_floor(replicas, leader, led, {b for b in led if under_floor(b)}, under_floor, above_floor)
    return leader


def _raise_to_floor(replicas: list[list[int]], leader: list[int], led, targets: set[int], under_floor, above_floor):
    """Hand each of ``targets`` leaderships until it leads its floor, from leaders above theirs."""
    held = _held(replicas, targets)
    for b in sorted(targets):
        # Most hand-overs are one hop: from the lowest above-floor leader of a partition b holds, the lowest such
        # partition (what the search below finds first), taken from a heap; a leader that fell to the floor stays
        # there, and the heap is rebuilt after a longer chain.
        heap = _one_hop(held[b], leader, b)
        while under_floor(b):
            if _pop_valid(heap, leader, above_floor, led, b):
                continue
            if not _hand_over({c for c in sorted(led) if above_floor(c)}, lambda c, b=b: c == b, replicas, leader, led):
                break
            heap = _one_hop(held[b], leader, b)


def _pop_valid(heap: list[tuple[int, int]], leader: list[int], above_floor, led, b: int) -> bool:
    """Hand ``b`` the first partition on the heap whose leader is still the one noted and above the floor."""
    while heap:
        c, i = heapq.heappop(heap)
        if leader[i] == c and above_floor(c):
            led[c].discard(i)
            led[b].add(i)
            leader[i] = b
            return True
    return False


def _held(replicas: list[list[int]], brokers: set[int]) -> dict[int, list[int]]:
    """The partitions each of ``brokers`` holds a replica of."""
    held: dict[int, list[int]] = {b: [] for b in brokers}
    if brokers:
        for i, r in enumerate(replicas):
            for b in r:
                if b in brokers:
                    held[b].append(i)
    return held


def _one_hop(partitions: list[int], leader: list[int], b: int) -> list[tuple[int, int]]:
    """A heap of (leader, partition) of the partitions ``b`` holds and does not lead."""
    heap = [(leader[i], i) for i in partitions if leader[i] != b]
    heapq.heapify(heap)
    return heap


def _hand_over(sources: set[int], is_target, replicas, leader, led) -> bool:
    """Move one leadership from a source to a target along the shortest chain; False when none exists."""
    came_from: dict[int, tuple[int, int] | None] = dict.fromkeys(sources)
    queue = deque(sorted(sources))
    while queue:
        b = queue.popleft()
        for i in sorted(led[b]):
            for c in replicas[i]:
                if c in came_from:
                    continue
                came_from[c] = (i, b)
                if is_target(c):
                    while (hop := came_from[c]) is not None:
                        i, prev = hop
                        led[prev].discard(i)
                        led[c].add(i)
                        leader[i] = c
                        c = prev
                    return True
                queue.append(c)
    return False


def reorder(replicas: list[int], leader: int) -> list[int]:
    """The list with ``leader`` first and the others in their order."""
    return [leader, *(b for b in replicas if b != leader)]


def balance_leader_traffic(
    replicas: list[list[int]], brokers: list[int], rates: list[float], tolerance: float
) -> list[int]:
    """With write rates: the chosen leader of every partition, so that each kept broker's leaders take in bytes
    within ``tolerance`` of the mean. Leaders stay where they are unless a hand-over is needed; each hand-over goes
    to a broker of the partition's own list (a reorder, no data moved) and never pushes that broker out of the band,
    so the total excess falls with every one. Where the rates make the band unreachable, as close as hand-overs get.
    """
    return _TrafficBalance(replicas, brokers, rates, tolerance).run()


# A hand-over: (its sort key, the partition, the new leader); the smallest key is taken.
Trade = tuple[float, int, int]


class _TrafficBalance:
    """The leaders' write traffic per kept broker, and the hand-overs that bring each broker into the band."""

    def __init__(self, replicas: list[list[int]], brokers: list[int], rates: list[float], tolerance: float):
        self.replicas, self.brokers, self.rates = replicas, brokers, rates
        self.leader = [r[0] for r in replicas]
        self.kept = set(brokers)
        self.load = dict.fromkeys(brokers, 0.0)
        self.led: dict[int, set[int]] = {b: set() for b in brokers}
        self.holds: dict[int, list[int]] = {b: [] for b in brokers}
        for i, r in enumerate(replicas):
            for b in r:
                if b in self.kept:
                    self.holds[b].append(i)
            if self.leader[i] in self.kept:
                self.load[self.leader[i]] += rates[i]
                self.led[self.leader[i]].add(i)
        self.mean = sum(rates) / len(brokers)
        self.low, self.high = self.mean * (1 - tolerance), self.mean * (1 + tolerance)

    def run(self) -> list[int]:
        stuck: set[int] = set()
        while True:
            worst = max(
                (b for b in self.brokers if b not in stuck and self.violation(b) > 0),
                key=lambda b: (self.violation(b), -b),
                default=None,
            )
            if worst is None:
                return self.leader
            over = self.load[worst] > self.high
            # No hand-over keeps the other broker in the band: take the one that lowers the two brokers' total
            # excess most (a partition writing more than the band is wide still moves off the busiest broker).
            best = self.in_band_trade(worst, over) or self.best_trade(worst, over)
            if best is None:
                stuck.add(worst)
                continue
            self.hand(best[1], best[2])
            stuck.clear()

    def excess(self, x: float) -> float:
        return max(x - self.high, self.low - x, 0.0)

    def violation(self, b: int) -> float:
        return self.excess(self.load[b])

    def hand(self, i: int, to: int) -> None:
        if self.leader[i] in self.kept:
            self.load[self.leader[i]] -= self.rates[i]
            self.led[self.leader[i]].discard(i)
        self.leader[i] = to
        self.load[to] += self.rates[i]
        self.led[to].add(i)

    def in_band_trade(self, worst: int, over: bool) -> Trade | None:
        """The hand-over to or from ``worst`` closest to its distance from the mean that leaves the other broker
        in the band, or None."""
        load, rates, low, high = self.load, self.rates, self.low, self.high
        wanted = abs(load[worst] - self.mean)
        best: Trade | None = None
        if over:
            for i in sorted(self.led[worst]):
                for c in self.replicas[i]:
                    if c != worst and c in self.kept and 0 < rates[i] <= min(load[worst] - low, high - load[c]):
                        key = (abs(rates[i] - wanted), i, c)
                        best = key if best is None or key < best else best
            return best
        for i in self.holds[worst]:
            a = self.leader[i]
            movable = a != worst and 0 < rates[i] <= high - load[worst]
            if movable and (a not in self.kept or rates[i] <= load[a] - low):
                key = (abs(rates[i] - wanted), i, worst)
                best = key if best is None or key < best else best
        return best

    def best_trade(self, worst: int, over: bool) -> Trade | None:
        """The hand-over (key, partition, new leader) to or from ``worst`` that lowers the sum of both brokers'
        excess over the band most, or None when none lowers it."""
        leader, kept = self.leader, self.kept
        best = None
        pairs = (
            [(i, worst, c) for i in sorted(self.led[worst]) for c in self.replicas[i] if c != worst and c in kept]
            if over
            else [(i, leader[i], worst) for i in self.holds[worst] if leader[i] != worst and leader[i] in kept]
        )
        for i, source, dest in pairs:
            rate = self.rates[i]
            if rate <= 0:
                continue
            before = self.violation(source) + self.violation(dest)
            after = self.excess(self.load[source] - rate) + self.excess(self.load[dest] + rate)
            if after < before - 1e-9:
                key = (after - before, i, dest)
                best = key if best is None or key < best else best
        return best
