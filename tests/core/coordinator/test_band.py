"""The coordinator's throttle band (drover.core.coordinator.band), pure: the rate between floor and ceiling that leaves
the headroom free, smoothing, starvation, the reasons told, and the band inside the coordinator's throttle."""

from datetime import UTC, datetime, timedelta

from drover.core.coordinator.band import MIN_RATE, ThrottleBand, other_traffic
from drover.core.coordinator.band_latency import Law
from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits, MoveSpec
from drover.models.band import BandSettings
from drover.models.coordination import ClusterBandChange, ClusterThrottleChange, Demand, JoinRequest, Takeover
from drover.models.throttle import Throttle

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MB = 10**6
FLOOR = (2 * MB, 2 * MB)


def band(ceiling=100 * MB, capacity=100 * MB, headroom=30.0, when_starved="floor", **kw) -> ThrottleBand:
    settings = BandSettings(
        ceiling=ceiling, capacity=capacity, headroom=headroom, when_starved=when_starved, capacities=kw
    )
    return ThrottleBand(settings=settings)


def traffic(bytes_in=0.0, bytes_out=0.0, **more) -> dict[str, float]:
    return {"bytes_in": bytes_in, "bytes_out": bytes_out, **more}


def test_the_rate_leaves_the_headroom_free_after_the_traffic_measured():
    b = band()
    # 70 MB/s free of 100; 10 MB/s in (clients and ordinary replication), 25 MB/s out.
    told = b.read({3: traffic(6 * MB, 25 * MB, replication_in=4 * MB)}, "metrics", {3: FLOOR}, T0)
    assert b.brokers[3].rates == (45 * MB, 60 * MB)
    assert told == [
        "traffic read from metrics",
        "broker 3: client and replication bytes in 10.0 MB/s; client and replication bytes out 25.0 MB/s; "
        "follower rate 2.0 MB/s → 60.0 MB/s; leader rate 2.0 MB/s → 45.0 MB/s",
    ]


def test_the_copies_themselves_are_not_counted_as_traffic():
    # Kafka counts reassignment bytes within replication bytes.
    rates = traffic(1 * MB, 2 * MB, replication_in=30 * MB, reassignment_in=28 * MB, replication_out=5 * MB)
    assert other_traffic(rates) == (3 * MB, 7 * MB)


def test_the_ceiling_caps_the_rate_and_capacity_differs_per_broker():
    b = band(ceiling=20 * MB, capacity=100 * MB, **{"4": 10 * MB})
    b.read({3: traffic(), 4: traffic(1 * MB, 1 * MB)}, "metrics", {3: FLOOR, 4: FLOOR}, T0)
    assert b.brokers[3].rates == (20 * MB, 20 * MB)
    # 7 MB/s free of 10, less 1 MB/s each way.
    assert b.brokers[4].rates == (6 * MB, 6 * MB)


def test_a_rise_counts_at_once_a_fall_half_and_small_changes_are_not_made():
    b = band()
    b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0)
    assert b.brokers[3].rates[1] == 60 * MB
    (told,) = b.read({3: traffic(40 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=10))
    assert b.brokers[3].rates[1] == 30 * MB
    assert told == ("broker 3: client and replication bytes in rose to 40.0 MB/s; follower rate 60.0 MB/s → 30.0 MB/s")
    # Back to 10: counted half (25 MB/s), then 17.5, then 13.75 MB/s.
    b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=20))
    assert b.brokers[3].rates[1] == 45 * MB
    b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=30))
    assert b.brokers[3].rates[1] == int(52.5 * MB)
    # 56.25 is within 10% of 52.5: not written, nothing told.
    assert b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=40)) == []
    assert b.brokers[3].rates[1] == int(52.5 * MB)


def test_a_starved_broker_keeps_its_floor_with_a_warning():
    b = band(capacity=10 * MB)
    (_, told) = b.read({3: traffic(6 * MB)}, "log growth", {3: (2 * MB, 3 * MB)}, T0)
    assert b.brokers[3].starved and b.brokers[3].rates == (7 * MB, 3 * MB)
    assert told == (
        "broker 3: client and replication bytes in 6.0 MB/s; client and replication bytes out 0 B/s; "
        "follower rate 3.0 MB/s; leader rate 2.0 MB/s → 7.0 MB/s; STARVED: headroom leaves 1.0 MB/s, under the "
        "3.0 MB/s its moves need: "
        "the floor holds"
    )
    m = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=1)
    assert not b.holds(m, {})
    (told,) = b.read({3: traffic(0)}, "log growth", {3: (2 * MB, 3 * MB)}, T0 + timedelta(seconds=10))
    assert told.endswith("; no longer starved") and not b.brokers[3].starved


def test_paused_when_starved_the_copies_slow_and_no_new_move_goes_through_the_broker():
    b = band(capacity=10 * MB, when_starved="pause")
    (_, told) = b.read({3: traffic(6.5 * MB)}, "metrics", {3: (2 * MB, 3 * MB)}, T0)
    assert b.brokers[3].rates == (7 * MB, int(0.5 * MB))
    assert told.endswith("its copies run at what headroom leaves and no new move goes through it")
    through = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=1)
    elsewhere = MoveSpec(topic="t", partition=1, original=[1, 2], target=[1, 4], size_bytes=1)
    assert b.holds(through, {}) and not b.holds(elsewhere, {})
    assert b.rates_for(3, (2 * MB, 3 * MB)) == (7 * MB, int(0.5 * MB))
    b.read({3: traffic(20 * MB)}, "metrics", {3: (2 * MB, 3 * MB)}, T0 + timedelta(seconds=10))
    assert b.brokers[3].rates[1] == MIN_RATE


def test_a_broker_the_reading_lacks_keeps_its_floor():
    b = band()
    b.read({3: traffic()}, "metrics", {3: FLOOR, 4: FLOOR}, T0)
    assert 4 not in b.brokers and b.rates_for(4, FLOOR) == FLOOR


def test_a_failed_reading_is_told_once_and_changes_no_rate():
    b = band()
    b.read({3: traffic()}, "metrics", {3: FLOOR}, T0)
    assert b.failed("broker 3: connection refused", T0) is True
    assert b.failed("broker 3: connection refused", T0) is False
    assert b.brokers[3].rates == (70 * MB, 70 * MB)
    assert not b.due(T0 + timedelta(seconds=5), timedelta(seconds=10))
    assert b.due(T0 + timedelta(seconds=10), timedelta(seconds=10))


# -- inside the coordinator -----------------------------------------------------------------------------------


def coordinator() -> ClusterState:
    """Two migrations: m1 estimated (2 MB/s on its brokers), m2 at a fixed 5 MB/s, each with a move in flight."""
    s = ClusterState(name="c")
    for mid, p in (("m1", 0), ("m2", 1)):
        s.join(JoinRequest(migration_id=mid, cluster="c", cluster_id="k", partitions={"t": [p]}), T0)
    estimated = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=10)
    fixed = MoveSpec(topic="t", partition=1, original=[4, 5], target=[4, 6], size_bytes=10)
    rates = {b: FLOOR for b in (1, 2, 3)}
    s.demand(
        Demand(migration_id="m1", seq=1, candidates=[estimated], limits=Limits(), throttle=Throttle(per_broker=rates))
    )
    s.demand(Demand(migration_id="m2", seq=1, candidates=[fixed], limits=Limits(), throttle=Throttle.fixed(5 * MB)))
    assert sorted(s.allocate()) == ["m1", "m2"]
    return s


def test_the_band_throttles_estimated_moves_and_leaves_fixed_rates_alone():
    s = coordinator()
    assert s.wanted().brokers == {
        1: FLOOR,
        2: FLOOR,
        3: FLOOR,
        4: (5 * MB, 5 * MB),
        5: (5 * MB, 5 * MB),
        6: (5 * MB, 5 * MB),
    }
    s.setting(ClusterBandChange(band=BandSettings(ceiling=50 * MB, capacity=100 * MB), actor="ops", reason="r"), T0)
    assert (
        s.actions[-1].detail
        == "up to 50.0 MB/s, leaving 30% of 100.0 MB/s per broker; bytes only, no latency target; starved: floor"
    )
    from drover.core.coordinator.band import floors

    assert floors(s.asked()) == {1: FLOOR, 2: FLOOR, 3: FLOOR}
    s.band.read({b: traffic(30 * MB) for b in (1, 2, 3)}, "metrics", floors(s.asked()), T0)
    wanted = s.wanted().brokers
    assert wanted[3] == (50 * MB, 40 * MB) and wanted[4] == (5 * MB, 5 * MB)
    # The operator's cluster-wide rate replaces the band as it replaces every migration's own.
    s.setting(ClusterThrottleChange(rate_bytes_per_s=9 * MB, actor="ops", reason="r"), T0)
    assert set(s.wanted().brokers.values()) == {(9 * MB, 9 * MB)}
    s.setting(ClusterThrottleChange(rate_bytes_per_s=None, actor="ops", reason="r"), T0)
    s.setting(ClusterBandChange(band=None, actor="ops", reason="r"), T0)
    assert s.wanted().brokers[3] == FLOOR and s.band.brokers == {}


def test_paused_for_starvation_the_coordinator_grants_no_move_through_the_broker():
    s = coordinator()
    settings = BandSettings(ceiling=50 * MB, capacity=10 * MB, when_starved="pause")
    s.setting(ClusterBandChange(band=settings, actor="ops", reason="r"), T0)
    s.band.read({3: traffic(8 * MB)}, "metrics", {3: FLOOR}, T0)
    s.join(JoinRequest(migration_id="m3", cluster="c", cluster_id="k", partitions={"u": [0, 1]}), T0)
    through = MoveSpec(topic="u", partition=0, original=[1, 2], target=[1, 3], size_bytes=10)
    elsewhere = MoveSpec(topic="u", partition=1, original=[1, 2], target=[1, 7], size_bytes=10)
    s.demand(Demand(migration_id="m3", seq=1, candidates=[through, elsewhere], limits=Limits()))
    assert s.allocate() == {"m3": [elsewhere]}


def test_a_take_over_keeps_the_band_and_continue_as_new_carries_it():
    from drover.core.coordinator.takeover import run_start
    from drover.core.migration.runs import ClusterRun

    s = coordinator()
    settings = BandSettings(ceiling=50 * MB, capacity=100 * MB, capacities={3: 10 * MB}, headroom=20)
    s.setting(ClusterBandChange(band=settings, actor="ops", reason="r"), T0)
    # As the next run takes it: the carry in JSON, taken back typed.
    carry = {"state": s.model_dump(mode="json"), "book": {}}
    took, carried = run_start(ClusterRun.model_validate({"name": "c", "cluster_id": "k", "carry": carry}), Takeover())
    assert carried and took.band == settings
    again = ClusterState(name="c")
    again.took_over(took)
    assert again.band.settings == settings


def test_a_reading_that_ends_after_the_band_was_turned_off_changes_nothing():
    b = ThrottleBand()
    assert b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0) == []
    assert b.brokers == {} and b.source == "" and b.read_at is None


def test_brokers_read_before_their_first_move_start_it_in_the_band_and_are_told_once_it_moves():
    b = band()
    # Read while the migration estimates: nothing is told but the source.
    assert b.read({3: traffic(10 * MB)}, "metrics", {}, T0) == ["traffic read from metrics"]
    assert not b.brokers[3].moving and b.rates_for(3, FLOOR) == (70 * MB, 60 * MB)
    m = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=1)
    assert not b.holds(m, {})
    (told,) = b.read({3: traffic(10 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=10))
    # Its move started at the band's rates, not at its floor: told as they are, not as a change from the floor.
    assert told.endswith("follower rate 60.0 MB/s; leader rate 70.0 MB/s")
    assert b.brokers[3].moving
    # A later reading that changes them is told against them.
    (told,) = b.read({3: traffic(40 * MB)}, "metrics", {3: FLOOR}, T0 + timedelta(seconds=20))
    assert told.endswith("follower rate 60.0 MB/s → 30.0 MB/s")


def test_a_broker_read_ahead_whose_floor_is_above_the_band_is_told_from_the_floor_its_move_started_at():
    b = band(capacity=10 * MB)
    b.read({3: traffic(6 * MB)}, "metrics", {}, T0)
    assert b.rates_for(3, (2 * MB, 3 * MB)) == (7 * MB, 3 * MB)
    (told,) = b.read({3: traffic(6 * MB)}, "metrics", {3: (2 * MB, 3 * MB)}, T0 + timedelta(seconds=10))
    assert "follower rate 3.0 MB/s; leader rate 7.0 MB/s; STARVED" in told


def test_the_law_a_reading_begins_with_is_the_one_the_band_runs_and_keeps_across_a_change_of_settings():
    s = ClusterState(name="c")
    s.setting(ClusterBandChange(band=band().settings, actor="ops", reason="r"), T0)
    for law in Law:
        s.band.begin(busy=False, law=law)
        assert s.band.law == law
    # (Markers are recorded in their order: a law is the last of them recorded in a row.)
    assert Law.of([True, True, False, True]) == Law.EASED
    lower = band(ceiling=50 * MB).settings
    s.setting(ClusterBandChange(band=lower, actor="ops", reason="slower"), T0)
    assert s.band.law == Law.FROM_BELOW
