"""With sizes, on small clusters: every rack-valid assignment searched, branch and bound, for bytes within the band
for every broker, then the fewest replicas outside the count band, the fewest bytes moved, the fewest moves. Coarse
sizes can need chains of moves the balancer's single moves and swaps do not try."""

import itertools

from drover.planner.weights import Balancer

# Small clusters whose sizes are too coarse for single moves and swaps (a partition may have to go where only a
# chain of two moves through an over-full broker leads) are searched exhaustively, within this many nodes.
EXACT_PARTITIONS = 12
EXACT_NODES = 200_000


def search_exactly(balancer: Balancer) -> bool:
    """Branch and bound over every rack-valid assignment: bytes within the band for every broker, then the fewest
    replicas outside the count band, the fewest bytes moved, the fewest moves. Applies the best found and returns
    True; False (nothing changed) when none is within the byte band or the search is too large."""
    p = balancer.p
    if len(p.replicas) > EXACT_PARTITIONS:
        return False
    search = _ExactSearch(balancer)
    search.search(0, 0, 0)
    if search.best is None or search.nodes > EXACT_NODES:
        return False
    for i, combo in enumerate(search.best):
        leaving = [x for x in p.replicas[i] if x not in combo]
        arriving = [x for x in combo if x not in p.replicas[i]]
        for source, dest in zip(leaving, arriving, strict=True):
            balancer.move(i, source, dest)
    return True


class _ExactSearch:
    """The search's state: partitions largest first, each with its rack-valid broker sets (fewest moved first), the
    bytes and replicas per broker so far, and the best complete assignment found."""

    def __init__(self, balancer: Balancer):
        p = self.p = balancer.p
        self.b = balancer.b
        n = self.n = len(p.replicas)
        self.kept = sorted(p.rack_of)
        self.order = sorted(range(n), key=lambda i: (-p.sizes[i], i))
        self.options = [self._valid(i, balancer.original[i]) for i in self.order]
        self.load = dict.fromkeys(self.kept, 0)
        self.count = dict.fromkeys(self.kept, 0)
        self.chosen: list[tuple[int, ...]] = [()] * n
        self.best_cost: tuple[int, int, int] | None = None
        self.best: list[tuple[int, ...]] | None = None
        self.nodes = 0
        # The bytes still to place from the k-th partition on: a bound on how far the brokers under their band rise.
        self.remaining = [0] * (n + 1)
        for k in range(n - 1, -1, -1):
            i = self.order[k]
            self.remaining[k] = self.remaining[k + 1] + len(p.replicas[i]) * p.sizes[i]

    def _valid(self, i: int, original: set[int]) -> list[tuple[int, tuple[int, ...]]]:
        """Partition ``i``'s broker sets within its rack limit, as (replicas moved, brokers), fewest moved first."""
        p = self.p
        valid = []
        for combo in itertools.combinations(self.kept, len(p.replicas[i])):
            if p.racked:
                per_rack: dict[str | None, int] = {}
                for x in combo:
                    per_rack[p.rack_of[x]] = per_rack.get(p.rack_of[x], 0) + 1
                if max(per_rack.values()) > p.limits[i]:
                    continue
            valid.append((sum(1 for x in combo if x not in original), combo))
        valid.sort()
        return valid

    def search(self, k: int, moved_bytes: int, moves: int) -> None:
        self.nodes += 1
        if self.nodes > EXACT_NODES:
            return
        if self.best_cost is not None and self.best_cost[0] == 0 and (moved_bytes, moves) >= self.best_cost[1:]:
            return
        if k == self.n:
            self._complete(moved_bytes, moves)
            return
        load, b = self.load, self.b
        if sum(max(0.0, b.bytes_low[x] - load[x]) for x in self.kept) > self.remaining[k] + 1e-9:
            return
        i = self.order[k]
        size = self.p.sizes[i]
        for moved, combo in self.options[k]:
            if any(load[x] + size > b.bytes_high[x] + 1e-9 for x in combo):
                continue
            self._place(combo, size, 1)
            self.chosen[i] = combo
            self.search(k + 1, moved_bytes + moved * self.p.copies[i], moves + moved)
            self._place(combo, size, -1)

    def _place(self, combo: tuple[int, ...], size: int, sign: int) -> None:
        for x in combo:
            self.load[x] += sign * size
            self.count[x] += sign

    def _complete(self, moved_bytes: int, moves: int) -> None:
        """A complete assignment: kept as the best when every broker is within its byte band and it costs less."""
        b, kept = self.b, self.kept
        if any(self.load[x] < b.bytes_low[x] - 1e-9 for x in kept):
            return
        counts = sum(max(self.count[x] - b.replicas_high[x], b.replicas_low[x] - self.count[x], 0) for x in kept)
        cost = (counts, moved_bytes, moves)
        if self.best_cost is None or cost < self.best_cost:
            self.best_cost, self.best = cost, list(self.chosen)
