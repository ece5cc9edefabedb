"""The cluster coordinator's state: binding, registry, shared limits, shares, priority, freeze, clean-up after a
migration that ended without leaving, and the throttle it wants on Kafka."""

import random
from collections import Counter
from datetime import UTC, datetime

from drover.core.coordinator.registry import FreezeNotices
from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits, MoveSpec
from drover.models.control import OperatorAction
from drover.models.coordination import ClusterLimitsChange, Demand, JoinRequest
from drover.models.throttle import Throttle
from drover.steps.admission import InFlight
from drover.steps.throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS, merged_list, wanted_throttle

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BY = OperatorAction(actor="ops", reason="test")


def move(topic: str, p: int, original: list[int], target: list[int]) -> MoveSpec:
    return MoveSpec(topic=topic, partition=p, original=original, target=target)


def join(s: ClusterState, mid: str, topic: str, parts, cluster_id: str = "abc", priority: int = 0) -> str | None:
    return s.join(
        JoinRequest(
            migration_id=mid, cluster="prod", cluster_id=cluster_id, partitions={topic: list(parts)}, priority=priority
        ),
        NOW,
    )


def demand(
    s: ClusterState,
    mid: str,
    moves: list[MoveSpec],
    seq: int,
    limits: Limits | None = None,
    released=(),
    rate: int | None = None,
) -> None:
    assert s.demand(
        Demand(
            migration_id=mid,
            seq=seq,
            candidates=moves,
            released=list(released),
            limits=limits or Limits(),
            throttle=Throttle.fixed(rate),
        )
    )


def spread(topic: str, n: int) -> list[MoveSpec]:
    """n moves of one replica each, from broker 1-3 to 4-6."""
    return [move(topic, p, [1 + p % 3, 1 + (p + 1) % 3], [1 + p % 3, 4 + p % 3]) for p in range(n)]


def test_the_name_is_bound_to_the_first_kafka_cluster_id_and_another_is_refused_with_both():
    s = ClusterState(name="prod-eu")
    assert join(s, "m1", "a", [0], cluster_id="abc") is None
    refused = join(s, "m2", "b", [0], cluster_id="xyz")
    assert refused is not None and "abc" in refused and "xyz" in refused and "prod-eu" in refused
    assert "m2" not in s.holders


def test_a_partition_belongs_to_one_running_migration_at_a_time():
    s = ClusterState(name="prod")
    assert join(s, "m1", "orders", [0, 1, 2]) is None
    refused = join(s, "m2", "orders", [2, 3])
    assert refused is not None and "orders-2 (m1)" in refused and "orders-3" not in refused
    s.leave("m1", NOW)
    assert join(s, "m2", "orders", [2, 3]) is None


def test_unset_cluster_limits_are_the_highest_any_migration_asks_for_and_an_operators_override_them():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(10))
    join(s, "m2", "b", range(10))
    demand(s, "m1", [], 1, Limits(max_partitions=3, max_per_broker=1))
    demand(s, "m2", [], 1, Limits(max_partitions=2, max_per_broker=4))
    assert s.effective_limits() == Limits(max_partitions=3, max_per_broker=4, max_replicas=10, max_leaders=5)
    s.setting(ClusterLimitsChange(limits=Limits(max_partitions=1), **BY.model_dump()), NOW)
    assert s.effective_limits() == Limits(max_partitions=1)
    assert s.actions[-1].action == "limits" and s.actions[-1].actor == "ops"


def test_two_migrations_never_exceed_the_limits_together_and_share_evenly():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(20))
    join(s, "m2", "b", range(20))
    limits = Limits(max_partitions=4, max_per_broker=4, max_replicas=10, max_leaders=5)
    demand(s, "m1", spread("a", 20), 1, limits)
    demand(s, "m2", spread("b", 20), 1, limits)
    granted = s.allocate()
    assert [len(granted["m1"]), len(granted["m2"])] == [2, 2]
    assert len(s.in_flight()) == 4
    # Nothing more fits until a move is released.
    assert s.allocate() == {}
    done = granted["m1"][0]
    demand(s, "m1", spread("a", 20)[2:], 2, limits, released=[(done.topic, done.partition)])
    again = s.allocate()
    # The freed slot goes to the migration now holding fewer.
    assert list(again) == ["m1"] and len(again["m1"]) == 1


def test_each_migration_stays_within_its_own_lower_limits():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(20))
    join(s, "m2", "b", range(20))
    demand(s, "m1", spread("a", 20), 1, Limits(max_partitions=1))
    demand(s, "m2", spread("b", 20), 1, Limits(max_partitions=6, max_per_broker=6))
    granted = s.allocate()
    assert len(granted["m1"]) == 1 and len(granted["m2"]) == 5


def test_a_higher_priority_migration_is_served_first():
    s = ClusterState(name="prod")
    join(s, "batch", "a", range(20))
    join(s, "decommission", "b", range(20), priority=10)
    limits = Limits(max_partitions=3, max_per_broker=3)
    demand(s, "batch", spread("a", 20), 1, limits)
    demand(s, "decommission", spread("b", 20), 1, limits)
    assert {k: len(v) for k, v in s.allocate().items()} == {"decommission": 3}


def test_nothing_is_granted_while_frozen():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(5))
    demand(s, "m1", spread("a", 5), 1)
    assert s.freeze(True, BY, NOW) is None
    assert s.allocate() == {}
    assert s.freeze(True, BY, NOW) == "the cluster is already frozen"
    s.freeze(False, BY, NOW)
    assert s.allocate()["m1"]
    # The refused freeze is in the audit with its reason.
    assert [(a.action, a.refused) for a in s.actions if "freeze" in a.action] == [
        ("freeze", None),
        ("freeze", "the cluster is already frozen"),
        ("unfreeze", None),
    ]


def test_a_migration_gone_without_leaving_keeps_its_moves_held_until_they_end():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(5))
    demand(s, "m1", spread("a", 5), 1, Limits(max_partitions=2), rate=1000)
    held = s.allocate()["m1"]
    s.gone("m1", NOW)
    assert "m1" not in s.holders and len(s.orphans) == 2
    # Its moves still count, are still throttled, and their partitions are still taken.
    assert len(s.in_flight()) == 2 and s.wanted().topics["a"]
    assert "a-" in (join(s, "m2", "a", [held[0].partition]) or "")
    for m in held:
        s.orphan_ended((m.topic, m.partition))
    assert s.in_flight() == [] and s.wanted().topics == {}
    assert join(s, "m2", "a", [held[0].partition]) is None


def test_a_demand_older_than_the_last_one_or_for_moves_already_granted_changes_nothing():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(5))
    demand(s, "m1", spread("a", 5), 2)
    granted = s.allocate()["m1"]
    assert not s.demand(Demand(migration_id="m1", seq=1, candidates=spread("a", 5)))
    # A newer demand sent before the grant reached the migration names the granted moves again: not granted twice.
    demand(s, "m1", spread("a", 5), 3)
    again = s.allocate().get("m1", [])
    assert not {(m.topic, m.partition) for m in granted} & {(m.topic, m.partition) for m in again}
    # A move of a partition it did not register is never granted.
    assert not s.demand(Demand(migration_id="nobody", seq=1, candidates=spread("a", 1)))


def test_random_demands_and_releases_never_exceed_the_cluster_limits():
    rng = random.Random(7)
    for _ in range(30):
        s = ClusterState(name="prod")
        limits = Limits(
            max_partitions=rng.randint(1, 6),
            max_per_broker=rng.randint(1, 3),
            max_replicas=rng.randint(1, 6),
            max_leaders=rng.randint(1, 3),
        )
        s.setting(ClusterLimitsChange(limits=limits, **BY.model_dump()), NOW)
        waiting: dict[str, list[MoveSpec]] = {}
        for i in range(3):
            topic = f"t{i}"
            join(s, f"m{i}", topic, range(30))
            waiting[f"m{i}"] = [
                move(topic, p, rng.sample(range(1, 9), 3), rng.sample(range(1, 9), 3)) for p in range(30)
            ]
        seq = Counter()
        for _ in range(40):
            for mid in waiting:
                h = s.holders[mid]
                released = [(m.topic, m.partition) for m in h.in_flight if rng.random() < 0.4]
                seq[mid] += 1
                demand(s, mid, waiting[mid], seq[mid], Limits(max_partitions=10, max_per_broker=10), released=released)
            for mid, moves in s.allocate().items():
                taken = {(m.topic, m.partition) for m in moves}
                waiting[mid] = [m for m in waiting[mid] if (m.topic, m.partition) not in taken]
            flight = [m for _, m in s.in_flight()]
            c = InFlight()
            for m in flight:
                c.add(m, 1)
            if len(flight) > 1:
                assert c.partitions <= limits.max_partitions
                assert max(c.per_broker.values(), default=0) <= limits.max_per_broker
                assert c.replicas <= limits.max_replicas and c.leaders <= limits.max_leaders


def test_the_leader_side_lists_every_replica_so_a_new_leader_is_throttled_too():
    m = move("orders", 3, [1, 2, 3], [4, 5, 1])
    wanted = wanted_throttle([(m, Throttle.fixed(1000))])
    assert wanted.topics["orders"][LEADER_REPLICAS] == ["3:1", "3:2", "3:3", "3:4", "3:5"]
    assert wanted.topics["orders"][FOLLOWER_REPLICAS] == ["3:4", "3:5"]
    assert wanted.brokers == {b: (1000, 1000) for b in (1, 2, 3, 4, 5)}


def test_a_brokers_rate_is_the_highest_asked_and_a_move_without_a_throttle_is_not_listed():
    a = move("a", 0, [1, 2], [1, 3])
    b = move("b", 0, [2, 4], [2, 5])
    c = move("c", 0, [6, 7], [6, 8])
    wanted = wanted_throttle(
        [(a, Throttle.fixed(1000)), (b, Throttle(rate=5000, per_broker={3: (7000, 7000)})), (c, Throttle())]
    )
    assert wanted.brokers[2] == (5000, 5000) and wanted.brokers[1] == (1000, 1000)
    assert "c" not in wanted.topics and 6 not in wanted.brokers


def test_an_operators_own_throttled_replicas_are_kept_beside_drovers():
    assert merged_list("0:9,1:9", ["0:1", "0:2"]) == "0:1,0:2,0:9,1:9"
    assert merged_list("*", ["0:1"]) == "*"
    assert merged_list(None, []) == ""


def test_a_move_whose_leader_movement_is_done_no_longer_counts_against_the_leader_limit():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(3))
    one_leader = Limits(max_partitions=5, max_per_broker=5, max_replicas=10, max_leaders=1)
    leader_moves = [move("a", p, [1, 2], [3 + p, 2]) for p in range(3)]
    demand(s, "m1", leader_moves, seq=1, limits=one_leader)
    assert [m.partition for m in s.allocate()["m1"]] == [0]
    assert s.allocate() == {}
    # Its next demand says partition 0's leader has moved: the slot goes to the next leader movement.
    assert s.demand(
        Demand(migration_id="m1", seq=2, candidates=leader_moves[1:], leaders_moved=[("a", 0)], limits=one_leader)
    )
    assert [m.partition for m in s.allocate()["m1"]] == [1]
    assert [m.leader_moved for m in s.holders["m1"].in_flight] == [True, False]


def test_a_free_slot_goes_to_the_move_whose_copy_uses_the_least_busy_throttles():
    """The makespan benchmark's case: every move goes from brokers 1-2 to 3-4, half first copying 1 -> 3 (led by 1,
    then by 3) and half 2 -> 4. With one copying 1 -> 3 in flight, the next slot goes to a move copying 2 -> 4 though
    another 1 -> 3 comes first in order, so both receiving brokers' throttles are used rather than one shared by two
    copies. Once partition 0's leader has moved (it copies 3 -> 4) and partition 1 is done, the slot goes to a copy
    into broker 3."""
    limits = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)
    moves = [
        move("a", 0, [1, 2], [3, 4]),
        move("a", 2, [1, 2], [3, 4]),
        move("a", 1, [2, 1], [4, 3]),
        move("a", 3, [2, 1], [4, 3]),
    ]
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(4))
    demand(s, "m1", moves, seq=1, limits=limits)
    assert [m.partition for m in s.allocate()["m1"]] == [0, 1]
    assert s.allocate() == {}
    assert s.demand(
        Demand(
            migration_id="m1",
            seq=2,
            candidates=[moves[3], moves[1]],
            released=[("a", 1)],
            leaders_moved=[("a", 0)],
            limits=limits,
        )
    )
    assert [m.partition for m in s.allocate()["m1"]] == [2]


def test_grants_taken_back_are_no_longer_in_flight_and_are_granted_first_again():
    s = ClusterState(name="prod")
    join(s, "m1", "a", range(4))
    moves = [move("a", p, [1, 2], [1, 3]) for p in range(4)]
    demand(s, "m1", moves, seq=1, limits=Limits(max_partitions=2, max_per_broker=4))
    granted = s.allocate()["m1"]
    assert [m.partition for m in granted] == [0, 1]
    s.freeze(True, BY, NOW)
    s.take_back("m1", granted)
    assert s.in_flight() == [] and s.allocate() == {}
    s.freeze(False, BY, NOW)
    assert [m.partition for m in s.allocate()["m1"]] == [0, 1]


def test_a_reused_migration_id_is_a_new_holder_once_the_earlier_ones_moves_have_ended():
    s = ClusterState(name="prod")
    first = JoinRequest(migration_id="m1", run="r1", cluster="prod", cluster_id="abc", partitions={"a": [0, 1]})
    assert s.join(first, NOW) is None and s.join(first, NOW) is None
    s.demand(Demand(migration_id="m1", run="r1", seq=5, candidates=spread("a", 2), limits=Limits(max_partitions=2)))
    assert len(s.allocate()["m1"]) == 2
    again = first.model_copy(update={"run": "r2"})
    assert s.reused(again)
    # The earlier migration's moves are orphans now: they hold the partitions until they end.
    assert "belong to another running migration" in (s.join(again, NOW) or "")
    assert len(s.orphans_of("m1")) == 2 and "m1" not in s.holders
    for o in list(s.orphans):
        s.orphan_ended((o.move.topic, o.move.partition))
    assert s.join(again, NOW) is None and s.holders["m1"].in_flight == []
    # Demands of the earlier run are not taken; the new run's first is.
    assert not s.demand(Demand(migration_id="m1", run="r1", seq=6, candidates=spread("a", 2)))
    assert s.demand(Demand(migration_id="m1", run="r2", seq=1, candidates=spread("a", 2)))


def test_every_name_a_migration_joins_under_is_an_alias_of_the_one_coordinator():
    s = ClusterState(name="audit-a", cluster_id="abc", aliases=["audit-a"])
    first = JoinRequest(migration_id="m1", cluster="audit-a", cluster_id="abc", partitions={"a": [0]})
    assert s.join(first, NOW) is None
    # A partition registered under one name is refused under another: the registry is the Kafka cluster's.
    again = JoinRequest(migration_id="m2", cluster="audit-b", cluster_id="abc", partitions={"a": [0]})
    refused = s.join(again, NOW)
    assert refused is not None and "m1" in refused
    req = JoinRequest(migration_id="m3", cluster="audit-b", cluster_id="abc", partitions={"b": [0]})
    assert s.join(req, NOW) is None
    assert s.aliases == ["audit-a", "audit-b"] and s.holders["m3"].cluster == "audit-b"
    assert s.actions[-1].action == "join" and any(a.action == "alias" for a in s.actions)
    for i in range(60):
        s.alias(f"n{i}", NOW)
    assert len(s.aliases) == 50 and s.aliases[-1] == "n59"


def test_a_plan_by_reference_is_registered_by_its_file_and_joins_only_against_the_registry_it_was_checked_with():
    s = ClusterState(name="prod")
    big = JoinRequest(
        migration_id="big", cluster="prod", cluster_id="abc", partitions_ref="/work/big/moves.jsonl", partition_count=9
    )
    # Nothing registered: nothing to check against.
    assert not s.recheck(big, "run1") and s.join(big, NOW) is None
    assert s.holders["big"].partitions == {} and s.holders["big"].partition_count == 9
    (entry,) = s.registry("run1").entries
    assert entry.ref == "/work/big/moves.jsonl" and entry.partitions == {}
    # Beside a plan by reference, a join is taken only against the registry it was checked with, and only by the
    # coordinator run that answered the check.
    small = JoinRequest(migration_id="small", cluster="prod", cluster_id="abc", partitions={"a": [1]})
    assert s.recheck(small, "run1")
    version = s.registry("run1").version
    assert not s.recheck(small.model_copy(update={"checked": version}), "run1")
    assert s.recheck(small.model_copy(update={"checked": version}), "run2")
    # Another join in between: checked against an older registry, it is checked again.
    join(s, "other", "b", [0])
    assert s.recheck(small.model_copy(update={"checked": version}), "run1")
    # Between listed plans the coordinator checks overlaps itself, without a version.
    t = ClusterState(name="prod")
    join(t, "m1", "a", [0])
    assert not t.recheck(small, "run1") and "a-1" not in (t.join(small, NOW) or "")


def test_each_move_in_flight_is_told_to_hold_once_and_told_again_when_the_hold_ends():
    notices = FreezeNotices()
    in_flight = {("a", 0), ("b", 1)}
    assert notices.due(in_flight, holding=True) == [("a", 0), ("b", 1)]
    notices.told_one(("a", 0), holding=True)
    assert notices.due(in_flight, holding=True) == [("b", 1)]
    notices.forget_ended({("b", 1)})
    assert notices.told == [] and notices.due({("b", 1)}, holding=False) == []
    notices.told_one(("b", 1), holding=True)
    assert notices.due({("b", 1)}, holding=False) == [("b", 1)]
    notices.told_one(("b", 1), holding=False)
    assert notices.told == []


def test_moves_brought_along_by_a_migration_joining_again_are_told_either_way():
    """A coordinator that took over from a lost one does not know which moves the lost one told to hold: the moves
    in flight a migration brings as it joins again are told the freeze state, held or not, once."""
    notices = FreezeNotices()
    notices.rejoined([("a", 0)])
    assert notices.due({("a", 0)}, holding=False) == [("a", 0)]
    assert notices.due({("a", 0), ("b", 1)}, holding=True) == [("a", 0), ("b", 1)]
    notices.told_one(("a", 0), holding=False)
    assert notices.due({("a", 0)}, holding=False) == [] and notices.unsure == []
