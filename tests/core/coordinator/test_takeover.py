"""A coordinator's take-over from a lost run: whom it waits for, how long it keeps the lost run's throttle, and the
operator's settings it takes over (one meaning per setting: ``ClusterSettings.apply``)."""

from datetime import UTC, datetime, timedelta

from drover.core.coordinator.state import ClusterState
from drover.core.coordinator.takeover import TakeoverWait, run_start
from drover.core.migration.runs import ClusterRun
from drover.models.admission import Limits
from drover.models.band import BandSettings
from drover.models.coordination import (
    CLUSTER_SETTINGS,
    ClusterBandChange,
    ClusterDiskChange,
    ClusterLimitsChange,
    ClusterSettings,
    ClusterThrottleChange,
    ClusterWindowsChange,
    DiskLimits,
    FreezeRequest,
    Takeover,
)
from drover.models.windows import Windows

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WAIT = timedelta(seconds=60)


def test_running_migrations_that_have_not_joined_are_waited_for_until_they_join():
    t = TakeoverWait()
    t.leaving("m-left")
    assert t.found(["m-1", "m-2", "m-joined", "m-left"], ["m-joined"], T0, WAIT) == {"m-1", "m-2"}
    assert t.waiting(T0 + timedelta(seconds=1))
    t.joined("m-1")
    t.leaving("m-2")
    assert not t.waiting(T0 + timedelta(seconds=2))
    # The lost run's throttle stays for the whole wait even with nobody left to wait for.
    assert t.keeps_lost_throttle(T0 + timedelta(seconds=2))
    assert not t.keeps_lost_throttle(T0 + WAIT)


def test_the_wait_ends_at_its_limit_and_then_nobody_is_waited_for():
    t = TakeoverWait()
    t.found(["m-1"], [], T0, WAIT)
    assert t.waiting(T0 + WAIT - timedelta(seconds=1))
    assert not t.waiting(T0 + WAIT)
    assert t.awaiting == set()
    assert not t.keeps_lost_throttle(T0 + WAIT)


def test_a_coordinator_that_took_nothing_over_waits_for_nobody():
    t = TakeoverWait()
    assert not t.waiting(T0) and not t.keeps_lost_throttle(T0) and not t.done


BY = {"actor": "ops", "reason": "r"}
CHANGES = [
    (FreezeRequest(frozen=True, **BY), "frozen", True),
    (ClusterLimitsChange(limits=Limits(max_partitions=3), **BY), "limits", Limits(max_partitions=3)),
    (ClusterThrottleChange(rate_bytes_per_s=5_000_000, **BY), "rate_bytes_per_s", 5_000_000),
    (ClusterDiskChange(disk_max=DiskLimits(percent=70), **BY), "disk_max", DiskLimits(percent=70)),
    (ClusterWindowsChange(windows=Windows(outside_rate=1000), **BY), "windows", Windows(outside_rate=1000)),
    (ClusterBandChange(band=BandSettings(ceiling=9, capacity=10), **BY), "band", BandSettings(ceiling=9, capacity=10)),
]


def test_each_change_sets_its_own_setting_and_nothing_else():
    # Every setting a command can send has its change here.
    assert {type(c) for c, _, _ in CHANGES} == {FreezeRequest, *CLUSTER_SETTINGS.values()}
    for change, field, value in CHANGES:
        after = ClusterSettings().apply(change)
        assert getattr(after, field) == value
        assert after.model_dump(exclude={field}) == ClusterSettings().model_dump(exclude={field}), field


def test_the_state_and_a_take_over_give_each_setting_the_same_meaning():
    # The coordinator applies each change as it comes; a take-over reads the same changes from the lost run's
    # history into a Takeover: a state that takes that over holds the same settings.
    live = ClusterState(name="c")
    took = Takeover()
    for change, _, _ in CHANGES:
        if isinstance(change, FreezeRequest):
            live.freeze(change.frozen, change, T0)
        else:
            live.setting(change, T0)
        took = took.apply(change)
    again = ClusterState(name="c")
    again.took_over(took)
    assert again.settings == live.settings == ClusterSettings(**{field: value for _, field, value in CHANGES})
    assert [a.action for a in live.actions] == ["freeze", "limits", "throttle", "disk-max", "windows", "band"]


def test_a_run_starts_from_its_carry_or_from_what_it_took_over_with_its_name_as_an_alias():
    s = ClusterState(name="a", aliases=["a"])
    s.setting(CHANGES[1][0], T0)
    carry = {"state": s.model_dump(mode="json"), "book": {}}
    took, carried = run_start(ClusterRun.model_validate({"name": "b", "carry": carry}), Takeover(frozen=True))
    assert carried and took.limits == Limits(max_partitions=3) and not took.frozen and took.aliases == ["a", "b"]
    took, carried = run_start(ClusterRun(name="b"), Takeover(frozen=True, aliases=["a"]))
    assert not carried and took.frozen and took.aliases == ["a", "b"]


def test_a_setting_other_than_the_band_leaves_the_bands_readings_as_they_are():
    s = ClusterState(name="c")
    s.setting(CHANGES[5][0], T0)
    s.band.source, s.band.read_at = "metrics pages", T0
    s.setting(CHANGES[1][0], T0)
    assert (s.band.source, s.band.read_at, s.band.settings) == ("metrics pages", T0, CHANGES[5][2])
    s.setting(ClusterBandChange(band=BandSettings(ceiling=5, capacity=10), **BY), T0)
    assert (s.band.source, s.band.read_at) == ("", None)
