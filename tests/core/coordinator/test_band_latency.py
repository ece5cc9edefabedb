"""The throttle band's latency law (drover.core.coordinator.band), pure: the quiet p99 measured before a broker's
first move, the target as a ratio of it or in ms, the rate halved over the target and raised a step under it (held
between), the moves through a broker following the same law, the floor when the floor itself is too much, and the
floor when the signal stays stale."""

from datetime import UTC, datetime, timedelta

import pytest

from drover.core.coordinator.band import MIN_RATE, STEADY, ThrottleBand, through
from drover.core.coordinator.band_latency import (
    BUSY_READINGS,
    LATENCY_EASE,
    LATENCY_EASE_MIN,
    LATENCY_START,
    LATENCY_STEP,
    QUIET_READINGS,
    STALE_READINGS,
    TAIL_SDS,
    Law,
)
from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits, MoveSpec
from drover.models.band import MIN_LATENCY_TARGET_MS, BandSettings, ClientLatency, LatencyTarget, ProduceLatency
from drover.models.coordination import ClusterBandChange, Demand, JoinRequest
from drover.models.throttle import Throttle
from drover.steps.admission import InFlight

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MB = 10**6
FLOOR = (1 * MB, 1 * MB)
CEILING = 20 * MB
TWICE = LatencyTarget(ratio=2)
BY = {"actor": "ops", "reason": "r"}
QUIET = {3: {"bytes_in": 0.0, "bytes_out": 0.0}}
# A first move's rate, and the rise a calm reading gives.
START = int(LATENCY_START * CEILING)
STEP = int(LATENCY_STEP * CEILING)
UP = START + int(LATENCY_EASE * START)


def band(target=TWICE, when_starved="floor", steady=True) -> ThrottleBand:
    """A band of the coordinator's law now (``steady``), or of one started before the steady law."""
    settings = BandSettings(
        ceiling=CEILING, capacity=1000 * MB, headroom=0, when_starved=when_starved, latency_max=target
    )
    b = ThrottleBand(settings=settings)
    b.begin(busy=False, law=Law.FROM_BELOW if steady else Law.EASED)
    return b


class Clock:
    """Readings 10 s apart."""

    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        self.at += timedelta(seconds=10)
        return self.at


def p99(ms: float | None, broker: int = 3) -> dict[int, ProduceLatency]:
    return {broker: ProduceLatency(p99_ms=ms) if ms is not None else ProduceLatency(missing="page did not answer")}


def moving(b: ThrottleBand, clock: Clock, ms: float | None, floor=FLOOR, moves: int = 1) -> list[str]:
    return b.read(QUIET, "metrics", {3: floor}, clock(), latency=p99(ms), moves={3: moves})


def started(target=TWICE, quiet_ms=15.0, when_starved="floor", steady=True) -> tuple[ThrottleBand, Clock]:
    """A band whose broker 3 read ``quiet_ms`` before its first move, then started that move and climbed, its p99
    still quiet, to the ceiling."""
    b, clock = band(target, when_starved, steady), Clock()
    assert b.read(QUIET, "metrics", {}, clock(), latency=p99(quiet_ms)) == ["traffic read from metrics"]
    assert b.brokers[3].quiet_ms == quiet_ms
    for _ in range(40):
        moving(b, clock, quiet_ms)
    assert b.brokers[3].rates == (CEILING, CEILING) and (b.brokers[3].peak_ms, b.brokers[3].over_s) == (quiet_ms, 0)
    return b, clock


def test_a_brokers_first_moves_start_low_and_climb_by_a_share_of_their_rate_a_calm_reading():
    b, clock = band(), Clock()
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    # Read before its first move, the broker's band is at the start rate: that move starts there.
    assert b.brokers[3].rates == (START, START) and b.rates_for(3, FLOOR) == (START, START)
    # A calm reading raises it by LATENCY_EASE of the rate in force, where a step of the ceiling would double it: the
    # copies reach what the clients bear a little at a time, not three times it before a reading says so.
    (told,) = moving(b, clock, 15.0)
    up = UP
    assert b.brokers[3].rates == (up, up)
    assert told.startswith("broker 3: produce p99 15 ms under the 30 ms target;")
    assert told.endswith("follower rate 2.0 MB/s → 2.3 MB/s; leader rate 2.0 MB/s → 2.3 MB/s")
    # Between the calm share and the target it holds; over it, it halves, and climbs by the same share again.
    assert moving(b, clock, 27.0) == [] and b.brokers[3].rates == (up, up)
    moving(b, clock, 41.0)
    climbed = up // 2
    assert b.brokers[3].rates == (climbed, climbed)
    for _ in range(3):
        (told,) = moving(b, clock, 15.0)
        # (At least LATENCY_EASE_MIN of the ceiling.)
        climbed += max(int(LATENCY_EASE * climbed), int(LATENCY_EASE_MIN * CEILING))
        assert b.brokers[3].rates == (climbed, climbed)
    assert told.endswith("follower rate 1.6 MB/s → 1.8 MB/s; leader rate 1.6 MB/s → 1.8 MB/s")
    # Its moves all ended, it starts low again at its next.
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    assert b.brokers[3].rates == (START, START)
    moving(b, clock, 15.0)
    assert b.brokers[3].rates == (up, up)
    # Climbing so, it reaches the ceiling itself, not a rate within the band's dead band (STEADY) of it.
    while b.brokers[3].latency_cap is not None:
        moving(b, clock, 15.0)
    assert b.brokers[3].rates == (CEILING, CEILING)


def test_a_coordinator_started_before_the_from_below_climbs_a_step_of_the_ceiling_until_over_the_target():
    b, clock = band(), Clock()
    b.begin(busy=False, law=Law.STEADY)  # no band-law-from-below marker
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    for climbed in (1, 2):
        moving(b, clock, 15.0)
        assert b.brokers[3].rates == (START + climbed * STEP,) * 2
    moving(b, clock, 41.0)
    went = (START + 2 * STEP) // 2
    assert b.brokers[3].rates == (went, went)
    moving(b, clock, 15.0)
    assert b.brokers[3].rates == (went + int(LATENCY_EASE * went),) * 2


def test_a_coordinator_started_before_the_slow_start_starts_first_moves_at_the_ceiling():
    b, clock = band(), Clock()
    b.begin(busy=False, law=Law.CEILING_START)  # its history has no band-slow-start marker
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    assert b.brokers[3].rates == (CEILING, CEILING)
    moving(b, clock, 15.0)
    assert b.brokers[3].rates == (CEILING, CEILING) and b.brokers[3].latency_cap is None
    moving(b, clock, 41.0)
    assert b.brokers[3].rates == (CEILING // 2, CEILING // 2)


def test_a_coordinator_started_before_the_eased_climb_climbs_a_step_of_the_ceiling_after_a_reading_over_the_target():
    b, clock = band(), Clock()
    b.begin(busy=False, law=Law.SLOW_START)  # its history has no band-climb-eases marker
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    moving(b, clock, 41.0)
    assert b.brokers[3].rates == (START // 2, START // 2) and not b.brokers[3].gone_over
    for climbed in (1, 2):
        moving(b, clock, 15.0)
        assert b.brokers[3].rates == (START // 2 + climbed * STEP,) * 2


def test_a_first_move_whose_floor_is_over_the_start_rate_starts_at_its_floor_and_is_not_starved():
    b, clock = band(), Clock()
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    floor = (5 * MB, 5 * MB)
    assert b.rates_for(3, floor) == floor
    (told,) = moving(b, clock, 27.0, floor=floor)
    assert told.endswith("; follower rate 5.0 MB/s; leader rate 5.0 MB/s")
    assert b.brokers[3].rates == floor and not b.brokers[3].starved
    moving(b, clock, 15.0, floor=floor)
    assert b.brokers[3].rates == (5_750_000, 5_750_000)


def test_over_the_target_the_rate_halves_at_the_next_reading_and_the_audit_says_why():
    b, clock = started(quiet_ms=15.0)
    (told,) = moving(b, clock, 41.0)
    assert told == (
        "broker 3: produce p99 41 ms over the 30 ms target; follower rate 20.0 MB/s → 10.0 MB/s; "
        "leader rate 20.0 MB/s → 10.0 MB/s"
    )
    assert b.brokers[3].rates == (10 * MB, 10 * MB)
    moving(b, clock, 35.0)
    assert b.brokers[3].rates == (5 * MB, 5 * MB)
    # Between the calm share of the target and the target: held, nothing told.
    assert moving(b, clock, 27.0) == []
    assert b.brokers[3].rates == (5 * MB, 5 * MB)
    # Under it: up by a share of the rate a reading (it went over the target), until the ceiling lifts the bound.
    (told,) = moving(b, clock, 12.0)
    assert b.brokers[3].rates == (5_750_000, 5_750_000)
    # (A reading under the quiet value while the moves run is taken among the quiet readings: the target is twice
    # the median of 15 and 12 ms.)
    assert told.startswith("broker 3: produce p99 12 ms under the 27 ms target; follower rate 5.0 MB/s → 5.8 MB/s")
    for _ in range(10):
        moving(b, clock, 12.0)
    # (A rate within STEADY of the ceiling is not rewritten.)
    assert b.brokers[3].latency_cap is None and min(b.brokers[3].rates) >= (1 - STEADY) * CEILING
    # The report: quiet, the highest while moving, and the time over the target (two readings 10 s apart).
    assert (b.brokers[3].quiet_ms, b.brokers[3].peak_ms, b.brokers[3].over_s) == (12.0, 41.0, 20.0)
    assert "produce p99 12 ms (quiet 12 ms, target 24 ms, over it 20s)" in b.brokers[3].text()


def test_once_over_the_target_a_rate_at_the_floor_climbs_by_at_least_a_small_share_of_the_ceiling():
    b, clock = started(quiet_ms=15.0)
    for _ in range(6):
        moving(b, clock, 90.0)
    assert b.brokers[3].rates == FLOOR and b.brokers[3].gone_over
    # A share of 1 MB/s is under LATENCY_EASE_MIN of the ceiling; either is more than the band's dead band (STEADY:
    # a change it does not write).
    (told,) = moving(b, clock, 10.0)
    rose = FLOOR[0] + int(LATENCY_EASE_MIN * CEILING)
    assert b.brokers[3].rates == (rose, rose) and "leader rate 1.0 MB/s → 1.2 MB/s;" in told
    assert LATENCY_EASE > STEADY


def test_the_rate_never_goes_under_the_floor_and_a_floor_over_the_target_starves_the_broker():
    b, clock = started(quiet_ms=15.0)
    told = [t for _ in range(6) for t in moving(b, clock, 90.0, floor=(2 * MB, 2 * MB))]
    assert b.brokers[3].rates == (2 * MB, 2 * MB) and b.brokers[3].starved
    assert "STARVED: the clients' latency leaves" in told[-1] and "the floor holds" in told[-1]


def test_when_starved_pause_the_copies_slow_below_the_floor_and_new_moves_wait():
    b, clock = started(quiet_ms=15.0, when_starved="pause")
    for _ in range(12):
        moving(b, clock, 90.0, floor=(2 * MB, 2 * MB))
    assert b.brokers[3].starved and b.brokers[3].rates == (MIN_RATE, MIN_RATE)
    assert b.holds(MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3]), {})


def test_the_moves_through_a_broker_follow_the_same_law_once_its_rate_is_at_its_floor():
    """Kafka's throttle bounds a broker's bytes across all its moves: the rate falls first, and only a reading over the
    target with the rate at its floor cuts the moves (cut sooner, moves that share brokers run one at a time)."""
    b, clock = started(quiet_ms=15.0)
    through, elsewhere = (
        MoveSpec(topic="t", partition=9, original=[1, 2], target=[1, 3]),
        MoveSpec(topic="t", partition=8, original=[1, 2], target=[1, 4]),
    )
    # 20 → 10 → 5 → 2.5 → 1.25 → 1 MB/s (the floor), the moves uncapped.
    for _ in range(5):
        (told,) = moving(b, clock, 50.0, moves=6)
        assert b.brokers[3].moves_cap is None and "moves through it" not in told
    assert b.brokers[3].rates == FLOOR
    (told,) = moving(b, clock, 50.0, moves=6)
    assert b.brokers[3].moves_cap == 3 and "over the 30 ms target; moves through it at most 3;" in told
    assert b.holds(through, {3: 3}) and not b.holds(through, {3: 2}) and not b.holds(elsewhere, {3: 3})
    moving(b, clock, 50.0, moves=3)
    assert b.brokers[3].moves_cap == 1
    # Under the target: one more a reading, lifted once it is above the moves in flight.
    moving(b, clock, 5.0, moves=3)
    assert b.brokers[3].moves_cap == 2
    moving(b, clock, 5.0, moves=3)
    assert b.brokers[3].moves_cap == 3
    moving(b, clock, 5.0, moves=3)
    assert b.brokers[3].moves_cap is None and not b.holds(through, {3: 50})


def test_a_coordinator_started_before_the_steady_law_cuts_the_moves_at_the_first_reading_over_the_target():
    b, clock = started(quiet_ms=15.0, steady=False)
    b.begin(busy=False, law=Law.EASED)  # its history has no band-law-steady marker
    (told,) = moving(b, clock, 50.0, moves=6)
    assert b.brokers[3].rates == (CEILING // 2, CEILING // 2) and b.brokers[3].moves_cap == 3
    assert told.endswith("moves through it at most 3")


def test_a_moves_leader_counts_among_the_brokers_it_goes_through():
    # Broker 1 keeps its replica and sends the copy to broker 3: its clients feel it.
    m = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3])
    assert through([(m, Throttle(per_broker={1: FLOOR}))]) == {1: 1, 2: 1, 3: 1}
    # Counted as the admission counts the moves in flight through a broker.
    counted = InFlight()
    counted.add(m, 1)
    assert counted.touching == through([(m, Throttle.fixed(MB))])


def test_the_latency_bound_is_lifted_once_headroom_binds_tighter():
    settings = BandSettings(ceiling=CEILING, capacity=10 * MB, headroom=0, latency_max=TWICE)
    b, clock = ThrottleBand(settings=settings, slow_start=True, eased=True), Clock()
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    # From the start, 2 MB/s, up 2 MB/s a calm reading: 4, 6 and 8 are under the 10 MB/s headroom leaves; 10 reaches
    # it: lifted.
    for climbed in (4 * MB, 6 * MB, 8 * MB):
        moving(b, clock, 5.0)
        assert b.brokers[3].rates == (climbed, climbed) and b.brokers[3].latency_cap is not None
    moving(b, clock, 5.0)
    assert b.brokers[3].latency_cap is None and b.brokers[3].rates == (10 * MB, 10 * MB)
    assert moving(b, clock, 5.0) == []


def test_a_stale_signal_puts_the_rates_back_to_the_floor_never_to_nothing_and_a_reading_resumes_the_law():
    b, clock = started(quiet_ms=15.0)
    # One reading missed: the rates stand.
    assert moving(b, clock, None) == []
    assert b.brokers[3].rates == (CEILING, CEILING)
    for _ in range(STALE_READINGS - 1):
        (told,) = moving(b, clock, None)
    assert b.brokers[3].rates == FLOOR
    assert "produce latency not read 2 times in a row (page did not answer): back to the floor" in told
    # Read again, the law climbs from the floor it ran at (a share of 1 MB/s is under LATENCY_EASE_MIN of the ceiling).
    (told,) = moving(b, clock, 10.0)
    rose = FLOOR[0] + int(LATENCY_EASE_MIN * CEILING)
    assert b.brokers[3].rates == (rose, rose) and b.brokers[3].stale == 0


def test_without_latency_at_all_the_band_says_so_once_and_follows_bytes():
    b, clock = band(), Clock()
    off = "no broker metrics (DROVER_BROKER_METRICS): Kafka's Admin API has no latency"
    told = b.read(QUIET, "log growth", {3: FLOOR}, clock(), latency_off=off)
    assert f"{off}: the band follows bytes alone, not the clients' latency" in told
    assert b.brokers[3].rates == (CEILING, CEILING)
    assert b.read(QUIET, "log growth", {3: FLOOR}, clock(), latency_off=off) == []
    assert b.brokers[3].rates == (CEILING, CEILING)


@pytest.mark.parametrize(
    ("target", "quiet", "goal"),
    [
        (LatencyTarget(ratio=2), 15.0, 30.0),
        # A broker with next to no produce requests reads a p99 of 0: the target is never under the minimum.
        (LatencyTarget(ratio=2), 0.0, MIN_LATENCY_TARGET_MS),
        (LatencyTarget(ms=50), 30.0, 50.0),
    ],
)
def test_the_target_is_a_ratio_of_the_quiet_p99_or_a_value(target, quiet, goal):
    b, clock = started(target, quiet_ms=quiet)
    moving(b, clock, goal * 0.9)
    assert b.brokers[3].target_ms == goal and b.brokers[3].rates == (CEILING, CEILING)
    moving(b, clock, goal * 1.1)
    assert b.brokers[3].rates == (CEILING // 2, CEILING // 2)


def test_a_band_without_a_target_ignores_latency():
    b, clock = band(target=None), Clock()
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=p99(5.0), moves={3: 1})
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=p99(500.0), moves={3: 1})
    assert b.brokers[3].rates == (CEILING, CEILING) and b.brokers[3].target_ms is None


def test_a_broker_whose_latency_was_never_read_runs_at_its_floor_from_its_first_reading():
    b, clock = band(), Clock()
    _, told = moving(b, clock, None)
    assert b.brokers[3].rates == FLOOR
    assert told.startswith("broker 3: produce latency not read (page did not answer): back to the floor")
    assert "produce p99 not read" in b.brokers[3].text()


def test_time_over_the_target_counts_across_a_change_of_the_bands_settings():
    s = ClusterState(name="c")
    settings = BandSettings(ceiling=CEILING, capacity=1000 * MB, headroom=0, latency_max=TWICE)
    s.setting(ClusterBandChange(band=settings, actor="ops", reason="r"), T0)
    s.band.begin(busy=False, law=Law.EASED)
    s.band.read(QUIET, "metrics", {3: FLOOR}, T0, latency=p99(15.0), moves={3: 1})
    lower = settings.model_copy(update={"latency_max": LatencyTarget(ms=5)})
    s.setting(ClusterBandChange(band=lower, actor="ops", reason="clients complain"), T0)
    s.band.read(QUIET, "metrics", {3: FLOOR}, T0 + timedelta(seconds=10), latency=p99(15.0), moves={3: 1})
    assert s.band.brokers[3].over_s == 10.0
    # (The band anew keeps the law the reading under way began with.)
    assert s.band.slow_start and s.band.eased


def test_with_a_latency_target_estimated_moves_wait_for_the_bands_first_reading_and_fixed_ones_do_not():
    s = ClusterState(name="c")
    s.setting(ClusterBandChange(band=BandSettings(ceiling=CEILING, capacity=CEILING, latency_max=TWICE), **BY), T0)
    for mid, p in (("m1", 0), ("m2", 1)):
        s.join(JoinRequest(migration_id=mid, cluster="c", cluster_id="k", partitions={"t": [p]}), T0)
    estimated = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=10)
    fixed = MoveSpec(topic="t", partition=1, original=[4, 5], target=[4, 6], size_bytes=10)
    s.demand(
        Demand(
            migration_id="m1", seq=1, candidates=[estimated], limits=Limits(), throttle=Throttle(per_broker={3: FLOOR})
        )
    )
    s.demand(Demand(migration_id="m2", seq=1, candidates=[fixed], limits=Limits(), throttle=Throttle.fixed(MB)))
    assert s.allocate() == {"m2": [fixed]}
    # The first reading measures broker 1, 2 and 3's quiet p99 before the move through them.
    quiet = {b: {"bytes_in": 0.0, "bytes_out": 0.0} for b in (1, 2, 3)}
    s.band.read(quiet, "metrics", {}, T0, latency={b: ProduceLatency(p99_ms=4.0) for b in (1, 2, 3)})
    assert s.allocate() == {"m1": [estimated]}
    assert {b: s.band.brokers[b].quiet_ms for b in (1, 2, 3)} == {1: 4.0, 2: 4.0, 3: 4.0}


def test_a_reading_begun_while_a_migration_estimated_is_not_quiet_and_moves_wait_for_one_that_is():
    """On the sandbox a migration's estimate (its Spark job beside the brokers) lifts the clients' p99 from 10 ms to
    a second: a quiet value read then would let the copies take everything."""
    s = ClusterState(name="c")
    s.setting(ClusterBandChange(band=BandSettings(ceiling=CEILING, capacity=CEILING, latency_max=TWICE), **BY), T0)
    s.join(JoinRequest(migration_id="m1", cluster="c", cluster_id="k", partitions={"t": [0]}), T0)
    move = MoveSpec(topic="t", partition=0, original=[1, 2], target=[1, 3], size_bytes=10)
    clock = Clock()
    s.band.begin(busy=True)
    s.band.read(QUIET, "canary", {}, clock(), latency=p99(400.0))
    assert s.band.brokers[3].p99_ms == 400.0 and s.band.brokers[3].quiet_ms is None
    s.demand(
        Demand(migration_id="m1", seq=1, candidates=[move], limits=Limits(), throttle=Throttle(per_broker={3: FLOOR}))
    )
    assert s.allocate() == {}
    # The reading taken once the estimate is done is the quiet one, and the move goes.
    s.band.begin(busy=False)
    s.band.read(QUIET, "canary", {}, clock(), latency=p99(12.0))
    assert s.band.brokers[3].quiet_ms == 12.0 and s.band.brokers[3].target_ms == 24.0
    assert s.allocate() == {"m1": [move]}


def test_busy_readings_hold_the_moves_no_longer_than_a_few_readings():
    b, clock = band(), Clock()
    b.begin(busy=True)
    for _ in range(BUSY_READINGS):
        b.read(QUIET, "metrics", {}, clock(), latency=p99(300.0))
        assert b.unread() and b.brokers[3].quiet_ms is None
    b.read(QUIET, "metrics", {}, clock(), latency=p99(250.0))
    assert not b.unread() and b.brokers[3].quiet_ms == 250.0
    # Nor do readings that fail.
    b, clock = band(), Clock()
    b.begin(busy=True)
    b.read(QUIET, "metrics", {}, clock(), latency=p99(300.0))
    b.failed("pages did not answer", clock())
    assert not b.unread()


def test_a_broker_with_no_produce_request_since_the_last_reading_has_no_client_waiting():
    # Kafka's percentiles keep the last requests' times while none comes in: 36 ms of old requests is no client's.
    b, clock = started(quiet_ms=4.0)
    idle = {3: ProduceLatency(p99_ms=36.0, count=445, requests=0)}
    assert b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=idle, moves={3: 1}) == []
    assert b.brokers[3].rates == (CEILING, CEILING) and b.brokers[3].p99_ms == 0.0
    busy = {3: ProduceLatency(p99_ms=36.0, count=460, requests=15)}
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=busy, moves={3: 1})
    assert b.brokers[3].rates == (CEILING // 2, CEILING // 2)


def test_what_a_migrations_moves_cost_the_clients_reads_as_a_person_reads_it():
    cost = ClientLatency()
    cost.add(41.0, 15.0, 30.0, 10.0)
    cost.add(21.0, 15.0, 30.0, 0.0)
    assert cost.text(3) == (
        "broker 3: produce p99 15 ms quiet, 31 ms during the moves (highest 41 ms); 10s over its target (30 ms at "
        "the end)"
    )
    assert ClientLatency(quiet_ms=0.0).text(4) == "broker 4: no produce request while the moves went through it"


def test_a_migrations_moves_carry_the_rates_the_band_ran_them_at_since_the_reading_before():
    b, clock = band(), Clock()
    b.read(QUIET, "metrics", {}, clock(), latency=p99(15.0))
    moving(b, clock, 15.0)  # its move started in this reading (at 2 MB/s, 2.3 from now): no time ran yet
    cost: dict[int, ClientLatency] = {}
    b.charge({3}, cost)
    assert 3 not in cost or cost[3].mean_rates() is None
    moving(b, clock, 15.0)
    b.charge({3}, cost)
    assert cost[3].mean_rates() == (UP, UP) and cost[3].banded_s == 10.0
    moving(b, clock, 41.0)  # over the target: 2.645 MB/s ran until now, halved from now
    b.charge({3}, cost)
    moving(b, clock, 41.0)
    b.charge({3}, cost)
    assert cost[3].banded_s == 30.0
    second = UP + int(LATENCY_EASE * UP)
    assert cost[3].mean_rates() == ((UP + second + second // 2) // 3,) * 2
    # A reading that ends after the band was turned off charges no rate.
    b.settings = None
    moving(b, clock, 41.0)
    b.charge({3}, cost)
    assert cost[3].banded_s == 30.0
    # Only the band's rates known, no produce latency: nothing to tell the operator about the clients.
    ran = ClientLatency()
    ran.ran(FLOOR, 10.0)
    assert not ran.measured and ran.mean_rates() == FLOOR


def test_with_the_mean_time_of_each_readings_requests_the_law_follows_it_not_kafkas_lagging_p99():
    """Kafka's p99 decays over minutes: after a load step it stays high for a minute after the clients are back to
    quiet, and rises late. With a ratio target the law follows the produce time of each reading's requests (their
    mean plus TAIL_SDS standard deviations), against the mean of the quiet readings'; the report is the p99's."""

    def timed(p99_ms: float, window_ms: float) -> dict[int, ProduceLatency]:
        # A mean of half the produce time, and a standard deviation that makes up the rest.
        sd = window_ms / 2 / TAIL_SDS
        return {3: ProduceLatency(p99_ms=p99_ms, window_ms=window_ms / 2, window_sd_ms=sd)}

    b, clock = band(), Clock()
    # Quiet: two readings of 2 and 4 ms; the target is twice their mean, 6 ms.
    for window in (2.0, 4.0):
        b.read(QUIET, "metrics", {}, clock(), latency=timed(20.0, window))
    assert b.brokers[3].quiet_window_ms == pytest.approx(3.0)
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=timed(20.0, 3.0), moves={3: 1})
    assert b.brokers[3].rates == (UP, UP)
    # The clients feel the copy at once (7 ms on average) while Kafka's p99 has not moved yet: halved.
    (told,) = b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=timed(21.0, 7.0), moves={3: 1})
    assert told.startswith("broker 3: produce time (the reading's requests' mean + 2.33 sd) 7 ms over the 6 ms target")
    assert b.brokers[3].rates == (UP // 2, UP // 2)
    # Back under the calm share of the target while the p99 still shows the step (90 ms, over its 40 ms target): up.
    (told,) = b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=timed(90.0, 3.0), moves={3: 1})
    assert "produce time (the reading's requests' mean + 2.33 sd) 3 ms under the 6 ms target" in told
    assert b.brokers[3].rates[0] > UP // 2
    # `drover cluster status` shows what the law follows beside the p99 it reports.
    assert "produce p99 90 ms (quiet 20 ms, target 40 ms, over it 10s); the band follows its produce time 3 ms " in (
        b.brokers[3].text()
    )
    assert "(quiet 3 ms, target 6 ms)" in b.brokers[3].text()
    # The report is the p99's: its quiet value, the highest, the time over its target.
    assert (b.brokers[3].quiet_ms, b.brokers[3].peak_ms, b.brokers[3].over_s) == (20.0, 90.0, 10.0)
    # An absolute target is on the p99, as the operator gave it.
    b, clock = band(target=LatencyTarget(ms=50)), Clock()
    b.read(QUIET, "metrics", {}, clock(), latency=timed(20.0, 2.0))
    # (a produce time of 30 ms, over twice the quiet 2 ms, but a p99 of 20 ms under 80% of 50 ms: it climbs)
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency=timed(20.0, 30.0), moves={3: 1})
    assert b.brokers[3].rates == (UP, UP)
    assert "follows its produce time" not in b.brokers[3].text()


def test_with_the_canarys_own_percentile_the_law_follows_it_against_the_quiet_ones():
    """The canary times each message (``ProduceLatency.tail_ms``): under a ratio target the law holds that 99th
    percentile under the ratio times the quiet readings' mean, and says it is the canary's."""

    def canary(tail_ms: float) -> dict[int, ProduceLatency]:
        return {3: ProduceLatency(p99_ms=tail_ms, requests=200.0, tail_ms=tail_ms)}

    b, clock = band(), Clock()
    for quiet in (20.0, 40.0):
        b.read(QUIET, "canary", {}, clock(), latency=canary(quiet))
    # The median of the two.
    assert b.brokers[3].quiet_window_ms == pytest.approx(30.0)
    b.read(QUIET, "canary", {3: FLOOR}, clock(), latency=canary(30.0), moves={3: 1})
    assert b.brokers[3].rates == (UP, UP)
    (told,) = b.read(QUIET, "canary", {3: FLOOR}, clock(), latency=canary(75.0), moves={3: 1})
    assert told.startswith("broker 3: canary's produce p99 75 ms over the 60 ms target")
    assert b.brokers[3].rates == (UP // 2, UP // 2)
    (told,) = b.read(QUIET, "canary", {3: FLOOR}, clock(), latency=canary(25.0), moves={3: 1})
    # Under the quiet value even with the copy: taken among the quiet readings, whose median (25 ms) sets the target.
    assert "canary's produce p99 25 ms under the 50 ms target" in told
    assert b.brokers[3].rates[0] > UP // 2
    # Its report is the canary's p99 too: quiet (the quiet readings' median), the highest.
    assert (b.brokers[3].quiet_ms, b.brokers[3].peak_ms) == (25.0, 75.0)


def test_the_quiet_value_is_the_median_of_the_last_quiet_readings_and_readings_under_it_during_the_moves():
    """One 5 s reading of a quiet cluster spreads twofold and more (the canary's, on the sandbox: 12.7 to 46.5 ms on
    one broker within 40 s). The quiet value is the median of the last QUIET_READINGS: a burst of the clients' own
    (450 ms) or a lull among them moves it little. The copies only add to the clients' time: a reading under the quiet
    value while the moves run says it is too high (read in the clients' own burst, or the writeback of a bulk load)
    and is taken among them; one over it is not."""
    b, clock = band(), Clock()
    for quiet in (12.0, 450.0, 10.0, 14.0, 11.0, 13.0, 3.0):
        b.read(QUIET, "metrics", {}, clock(), latency=p99(quiet))
    # The last five: 10, 14, 11, 13, 3.
    assert b.brokers[3].quiet_p99s == [10.0, 14.0, 11.0, 13.0, 3.0] and QUIET_READINGS == 5
    assert (b.brokers[3].quiet_ms, b.brokers[3].target_ms) == (11.0, 22.0)
    (told,) = moving(b, clock, 25.0)
    assert told.startswith("broker 3: produce p99 25 ms over the 22 ms target")
    assert b.brokers[3].quiet_p99s == [10.0, 14.0, 11.0, 13.0, 3.0]
    moving(b, clock, 6.0)
    assert b.brokers[3].quiet_p99s == [14.0, 11.0, 13.0, 3.0, 6.0] and b.brokers[3].quiet_ms == 11.0
    moving(b, clock, 8.0)
    assert (b.brokers[3].quiet_ms, b.brokers[3].target_ms) == (8.0, 16.0)
    # A coordinator started before the law from below leaves it.
    b.begin(busy=False, law=Law.STEADY)
    moving(b, clock, 2.0)
    assert (b.brokers[3].quiet_ms, b.brokers[3].target_ms) == (8.0, 16.0)


def test_before_the_steady_law_a_quiet_value_read_during_the_clients_own_burst_gives_way_to_a_lower_reading():
    """A migration started right after a bulk load reads a quiet p99 of the load's (450 ms): twice that would let the
    copies take everything. Coordinators started before the steady law take a lower reading while its moves run for a
    truer quiet value, and the target follows it."""
    b, clock = started(quiet_ms=450.0, steady=False)
    assert b.brokers[3].target_ms == 900.0
    assert moving(b, clock, 60.0) == []
    assert b.brokers[3].quiet_ms == 60.0 and b.brokers[3].target_ms == 120.0
    (told,) = moving(b, clock, 150.0)
    assert told.startswith("broker 3: produce p99 150 ms over the 120 ms target")
    assert b.brokers[3].rates == (CEILING // 2, CEILING // 2) and b.brokers[3].quiet_ms == 60.0
    # A broker with no produce request (p99 read as nothing) does not lower it.
    b.read(QUIET, "metrics", {3: FLOOR}, clock(), latency={3: ProduceLatency(p99_ms=5.0, requests=0.0)}, moves={3: 1})
    assert b.brokers[3].quiet_ms == 60.0


def test_under_a_target_in_ms_the_canarys_reading_is_named_as_the_canarys():
    b, clock = band(target=LatencyTarget(ms=30)), Clock()
    reading = {3: ProduceLatency(p99_ms=12.0, requests=500.0, tail_ms=12.0)}
    b.read(QUIET, "canary", {}, clock(), latency=reading)
    over = {3: ProduceLatency(p99_ms=45.0, requests=500.0, tail_ms=45.0)}
    (told,) = b.read(QUIET, "canary", {3: FLOOR}, clock(), latency=over, moves={3: 1})
    assert told.startswith("broker 3: canary's produce p99 45 ms over the 30 ms target"), told
