"""The kept brokers ranked by the bytes they hold for their byte target, overall and within each rack, both ways,
kept in order as replicas move: the byte balancer asks for the furthest brokers once per replica it moves, and a
million partitions move tens of thousands of them."""

import bisect

from drover.planner.placement import Placement

Group = tuple[bool, str | None]  # (False, None): every kept broker; (True, rack): those of one rack
EVERY_BROKER: Group = (False, None)


class LoadRanking:
    def __init__(self, p: Placement, target: dict[int, float]) -> None:
        self.p = p
        self.target = target
        # Per group: (load / target, broker) ascending, and (-load / target, broker) ascending.
        self.lightest: dict[Group, list[tuple[float, int]]] = {}
        self.heaviest: dict[Group, list[tuple[float, int]]] = {}
        self.keys: dict[int, tuple[float, float]] = {}
        for b in p.rack_of:
            self.keys[b] = self._keys(b)
            for group in (EVERY_BROKER, (True, p.rack_of[b])):
                self.lightest.setdefault(group, []).append((self.keys[b][0], b))
                self.heaviest.setdefault(group, []).append((self.keys[b][1], b))
        for ranked in (*self.lightest.values(), *self.heaviest.values()):
            ranked.sort()
        p.bytes_changed.clear()

    def _keys(self, b: int) -> tuple[float, float]:
        """A broker without a target counts as empty either way."""
        target, load = self.target[b], self.p.bytes_load[b]
        return (load / target, -load / target) if target else (0.0, 0.0)

    def furthest(self, broker: int, over: bool, n: int, rack: bool = False) -> list[int]:
        """The ``n`` brokers least loaded for their target (most, unless ``over``) other than ``broker``, among
        all kept brokers or those of its rack."""
        self._refresh()
        group = (True, self.p.rack_of[broker]) if rack else EVERY_BROKER
        ranked = (self.lightest if over else self.heaviest)[group]
        return [b for _, b in ranked[: n + 1] if b != broker][:n]

    def _refresh(self) -> None:
        """Re-rank the brokers whose bytes changed since the last look."""
        for b in self.p.bytes_changed:
            before, after = self.keys[b], self._keys(b)
            if before == after:
                continue
            self.keys[b] = after
            for group in (EVERY_BROKER, (True, self.p.rack_of[b])):
                for ranked, old, new in zip((self.lightest[group], self.heaviest[group]), before, after, strict=True):
                    del ranked[bisect.bisect_left(ranked, (old, b))]
                    bisect.insort(ranked, (new, b))
        self.p.bytes_changed.clear()
