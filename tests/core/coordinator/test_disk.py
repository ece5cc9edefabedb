"""The coordinator's disk gate (drover.core.coordinator.disk), pure: the projection at a broker's peak, the write rate
measured between readings, what the operator is told, and the gate inside the coordinator's allocation."""

from datetime import UTC, datetime, timedelta

from drover.core.coordinator.disk import UNTHROTTLED_HORIZON_S, DiskGate
from drover.core.coordinator.gates import disk_news
from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits, MoveSpec
from drover.models.coordination import ClusterDiskChange, Demand, DiskLimits, DiskReading, JoinRequest, Takeover
from drover.models.throttle import Throttle

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GB = 10**9


def move(p: int, onto: int, size: int = GB, original: tuple[int, ...] = (1, 2)) -> MoveSpec:
    return MoveSpec(topic="t", partition=p, original=list(original), target=[original[0], onto], size_bytes=size)


def gate(used: int, total: int = 100 * GB, broker: int = 3, copied=(), limit: float = 85.0) -> DiskGate:
    g = DiskGate(limits=DiskLimits(percent=limit))
    g.read([DiskReading(broker=broker, total_bytes=total, used_bytes=used, copied=list(copied))], T0)
    return g


def test_a_move_that_fits_under_the_limit_is_not_refused():
    assert gate(used=80 * GB).refusal(move(0, onto=3, size=4 * GB), {}, {3: None}) is None


def test_a_move_that_would_pass_the_limit_is_refused_naming_the_broker_and_the_figures():
    refused = gate(used=80 * GB).refusal(move(0, onto=3, size=6 * GB), {}, {3: None})
    assert refused is not None
    broker, why = refused
    assert broker == 3
    assert why.startswith("broker 3: 86.0% of 100.0 GB projected (in use 80.0%, copies to come 6.0 GB")
    assert why.endswith("would pass its disk limit of 85%")


def test_copies_in_flight_count_for_what_is_still_to_come_of_them():
    # 3 GB of a 4 GB copy already on the broker: 1 GB to come, plus this 4 GB: 85 GB, at the limit.
    in_flight = [move(1, onto=3, size=4 * GB)]
    g = gate(used=80 * GB, copied=[("t", 1, 3 * GB)])
    assert g.coming(in_flight)[3] == GB
    assert g.refusal(move(0, onto=3, size=4 * GB), g.coming(in_flight), {3: None}) is None
    assert g.refusal(move(0, onto=3, size=4 * GB + 1), g.coming(in_flight), {3: None}) is not None


def test_only_the_brokers_a_move_adds_a_replica_to_are_gated():
    # Broker 3 is full, but this move only leaves it.
    g = gate(used=99 * GB)
    leaving = MoveSpec(topic="t", partition=0, original=[3, 1], target=[1, 4], size_bytes=GB)
    assert g.refusal(leaving, {}, {}) is None


def test_a_per_broker_limit_replaces_the_cluster_one_for_that_broker():
    g = gate(used=60 * GB)
    g.limits = DiskLimits(percent=85, brokers={3: 60.5})
    refused = g.refusal(move(0, onto=3, size=GB), {}, {3: None})
    assert refused is not None and "disk limit of 60.5%" in refused[1]
    assert DiskLimits(percent=85, brokers={3: 60.5}).text() == "85% (broker 3: 60.5%)"


def test_the_write_rate_is_the_growth_less_what_the_copies_onto_the_broker_grew_by():
    # 10 s later: 2 GB more on disk, 1 GB of it the copy in flight: 1 GB of the broker's own writes, 100 MB/s,
    # weighed half against the last rate (none yet).
    fresh = gate(used=50 * GB, copied=[("t", 1, 0)])
    fresh.read(
        [DiskReading(broker=3, total_bytes=100 * GB, used_bytes=52 * GB, copied=[("t", 1, GB)])],
        T0 + timedelta(seconds=10),
    )
    assert fresh.disks[3].write_rate == 0.5 * 10**8
    # The copy grew by 1 GB in those 10 s: 100 MB/s copied onto the broker.
    assert fresh.disks[3].copy_rate == 10**8
    # Once no copy is in flight, none is copying.
    idle = fresh.model_copy(deep=True)
    idle.idle()
    assert idle.disks[3].copy_rate == 0 and idle.disks[3].copied == []
    # Retention shrinking the log counts as no growth, never as room.
    fresh.read([DiskReading(broker=3, total_bytes=100 * GB, used_bytes=40 * GB)], T0 + timedelta(seconds=20))
    assert fresh.disks[3].write_rate == 0.25 * 10**8


def test_growth_over_the_copy_time_at_the_throttle_counts_and_unthrottled_copies_use_the_horizon():
    g = gate(used=80 * GB)
    g.disks[3] = g.disks[3].model_copy(update={"write_rate": 10**7})
    # 4 GB at 10 MB/s: 400 s at 10 MB/s of the broker's own writes, 4 GB more: 88 GB projected.
    assert g.refusal(move(0, onto=3, size=4 * GB), {}, {3: 10**7}) is not None
    # At 1 GB/s the copy takes 4 s: 40 MB of growth, 84.04 GB.
    assert g.refusal(move(0, onto=3, size=4 * GB), {}, {3: GB}) is None
    # Unthrottled, the growth is taken over the horizon: 300 s x 10 MB/s = 3 GB, 87 GB.
    assert UNTHROTTLED_HORIZON_S == 300.0
    assert g.refusal(move(0, onto=3, size=4 * GB), {}, {3: None}) is not None


def test_a_broker_that_does_not_report_its_disk_is_not_gated_and_not_read_again_at_every_pass():
    g = DiskGate()
    g.read([DiskReading(broker=3, total_bytes=None, used_bytes=None)], T0)
    assert g.refusal(move(0, onto=3, size=10**15), {}, {3: None}) is None
    assert not g.due([3], T0 + timedelta(seconds=1), timedelta(seconds=10))
    assert g.due([3, 4], T0 + timedelta(seconds=1), timedelta(seconds=10))
    assert g.due([3], T0 + timedelta(seconds=10), timedelta(seconds=10))


def test_a_failed_reading_is_told_once_and_tried_again_after_the_period():
    g = gate(used=10 * GB)
    assert g.failed("describe log dirs failed", T0)
    assert not g.failed("describe log dirs failed", T0 + timedelta(seconds=10))
    assert not g.due([3, 4], T0 + timedelta(seconds=11), timedelta(seconds=10))
    assert 3 in g.disks


def test_the_operator_is_told_once_when_a_broker_starts_waiting_and_once_when_it_goes_on():
    g = DiskGate()
    assert g.tell({3: "broker 3: 90% projected"}) == ["new copies onto broker 3: 90% projected; they wait"]
    assert g.tell({3: "broker 3: 91% projected"}) == []
    assert g.tell({}) == ["broker 3: new copies onto it go on"]


def joined(s: ClusterState, candidates: list[MoveSpec], rate: int | None = None) -> None:
    s.join(JoinRequest(migration_id="m1", cluster="c", cluster_id="k", partitions={"t": [0, 1, 2, 3]}), T0)
    s.demand(
        Demand(
            migration_id="m1",
            seq=1,
            candidates=candidates,
            limits=Limits(max_partitions=5),
            throttle=Throttle.fixed(rate),
        )
    )


def test_the_coordinator_grants_the_moves_that_fit_and_holds_those_onto_a_full_disk_until_the_limit_is_raised():
    s = ClusterState(name="c")
    onto_full, onto_free = move(0, onto=3, size=6 * GB), move(1, onto=4, size=6 * GB)
    joined(s, [onto_full, onto_free])
    s.disk.read(
        [
            DiskReading(broker=3, total_bytes=100 * GB, used_bytes=80 * GB),
            DiskReading(broker=4, total_bytes=100 * GB, used_bytes=10 * GB),
        ],
        T0,
    )
    assert s.allocate() == {"m1": [onto_free]}
    news = disk_news(s, T0)
    assert [e.reason for e in news] == [
        "new copies onto broker 3: 86.0% of 100.0 GB projected (in use 80.0%, copies to come 6.0 GB, growth 0 B) "
        "would pass its disk limit of 85%; they wait"
    ]
    assert news[0].action == "disk" and s.actions[-1] == news[0]
    assert disk_news(s, T0) == []
    s.setting(ClusterDiskChange(disk_max=DiskLimits(percent=90), actor="ops", reason="room"), T0)
    assert s.allocate() == {"m1": [onto_full]}
    assert [e.reason for e in disk_news(s, T0)] == ["broker 3: new copies onto it go on"]


def test_moves_granted_in_one_pass_count_against_each_others_room():
    s = ClusterState(name="c")
    first, second = move(0, onto=3, size=3 * GB), move(1, onto=3, size=3 * GB)
    joined(s, [first, second])
    s.disk.read([DiskReading(broker=3, total_bytes=100 * GB, used_bytes=80 * GB)], T0)
    assert s.allocate() == {"m1": [first]}
    # The operator's limit is taken over, and carried: the one from the lost run is set again.
    s.took_over(Takeover(disk_max=DiskLimits(percent=95)))
    assert s.disk.limits.percent == 95 and s.allocate() == {"m1": [second]}


def test_a_move_onto_two_full_disks_names_both_brokers():
    s = ClusterState(name="c")
    both = MoveSpec(topic="t", partition=0, original=[1, 2], target=[3, 4], size_bytes=6 * GB)
    joined(s, [both])
    full = [DiskReading(broker=b, total_bytes=100 * GB, used_bytes=80 * GB) for b in (3, 4)]
    s.disk.read(full, T0)
    assert s.allocate() == {}
    told = [e.reason for e in disk_news(s, T0)]
    assert [t.split(":")[0] for t in told] == ["new copies onto broker 3", "new copies onto broker 4"], told
