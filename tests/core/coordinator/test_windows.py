"""Time windows (drover.models.windows) and the coordinator under them (drover.core.coordinator.state,
drover.core.coordinator.gates), pure:
when a window is open, its next edge across midnight and daylight saving, the texts refused, and what the
coordinator grants, writes and tells inside and outside them."""

from datetime import UTC, datetime

import pytest

from drover.core.coordinator.gates import window_news
from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits, MoveSpec
from drover.models.coordination import ClusterWindowsChange, Demand, JoinRequest
from drover.models.throttle import Throttle
from drover.models.windows import Windows, parse_window

BERLIN_NIGHTS = "Mon-Fri 22:00-06:00 Europe/Berlin"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_night_window_opens_on_its_days_and_closes_the_morning_after():
    w = Windows(texts=[BERLIN_NIGHTS])
    # 2026-11-27 is a Friday; Berlin is UTC+1 in November.
    assert w.is_open(utc(2026, 11, 27, 21, 0))  # Friday 22:00 Berlin
    assert w.is_open(utc(2026, 11, 28, 4, 59))  # Saturday 05:59 Berlin: Friday's night
    assert not w.is_open(utc(2026, 11, 28, 5, 0))  # Saturday 06:00 Berlin
    assert not w.is_open(utc(2026, 11, 28, 21, 30))  # Saturday night: not a window day
    assert not w.is_open(utc(2026, 11, 30, 20, 59))  # Monday 21:59 Berlin
    assert w.next_change(utc(2026, 11, 28, 12, 0)) == utc(2026, 11, 30, 21, 0)
    assert w.next_change(utc(2026, 11, 27, 21, 0)) == utc(2026, 11, 28, 5, 0)


def test_a_window_keeps_its_wall_clock_times_across_daylight_saving():
    w = Windows(texts=["daily 01:00-05:00 Europe/Berlin"])
    # Summer time ends on 2026-10-25: 01:00 Berlin is 23:00 UTC the day before, then 00:00 UTC.
    assert w.next_change(utc(2026, 10, 24, 12, 0)) == utc(2026, 10, 24, 23, 0)
    assert w.next_change(utc(2026, 10, 24, 23, 30)) == utc(2026, 10, 25, 4, 0)
    assert w.next_change(utc(2026, 10, 25, 12, 0)) == utc(2026, 10, 26, 0, 0)


def test_overlapping_windows_add_up_and_no_window_is_always_open():
    w = Windows(texts=["daily 10:00-12:00", "Thu 11:00-14:00"])
    # 2026-11-26 is a Thursday: open 10:00-14:00 UTC, one edge at 12:00 inside the other window is no edge.
    assert w.next_change(utc(2026, 11, 26, 10, 30)) == utc(2026, 11, 26, 14, 0)
    assert Windows().is_open(utc(2026, 11, 26, 3, 0)) and Windows().next_change(utc(2026, 11, 26)) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("weekdays 22:00-06:00", "days are Mon..Sun"),
        ("Mon 25:00-06:00", "times run from 00:00 to 23:59"),
        ("Mon 22:00-06:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("22:00-06:00", "give DAYS HH:MM-HH:MM [ZONE]"),
    ],
)
def test_a_bad_window_is_refused_naming_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_window(text)


def test_day_ranges_wrap_and_lists_add_up():
    assert parse_window("Fri-Mon 00:00-01:00").days == (0, 4, 5, 6)
    assert parse_window("Sat,Sun 00:00-00:00").days == (5, 6)


def coordinator(windows: Windows) -> ClusterState:
    s = ClusterState(name="c")
    s.join(JoinRequest(migration_id="m1", cluster="c", cluster_id="k", partitions={"t": [0, 1]}), utc(2026, 1, 1))
    moves = [MoveSpec(topic="t", partition=p, original=[1, 2], target=[1, 3], size_bytes=10) for p in (0, 1)]
    s.demand(
        Demand(
            migration_id="m1",
            seq=1,
            candidates=moves,
            limits=Limits(max_partitions=1),
            throttle=Throttle.fixed(50_000_000),
        )
    )
    s.setting(ClusterWindowsChange(windows=windows, actor="ops", reason="nights only"), utc(2026, 1, 1))
    return s


def test_outside_its_windows_the_coordinator_grants_nothing_and_holds_the_moves_in_flight():
    s = coordinator(Windows(texts=[BERLIN_NIGHTS]))
    noon = utc(2026, 11, 27, 12, 0)
    (told,) = window_news(s, noon)
    assert told.reason == "outside the time windows: no move takes a new step until Fri 2026-11-27 22:00 CET"
    assert s.holding and s.allocate() == {}
    assert window_news(s, noon) == []
    (told,) = window_news(s, utc(2026, 11, 27, 21, 0))
    assert told.reason == "inside the time windows: moves go on until Sat 2026-11-28 06:00 CET"
    assert not s.holding and list(s.allocate()) == ["m1"]


def test_outside_its_windows_with_a_cap_moves_go_on_under_it():
    s = coordinator(Windows(texts=[BERLIN_NIGHTS], outside_rate=10_000_000))
    assert list(s.allocate()) == ["m1"]
    assert set(s.wanted().brokers.values()) == {(50_000_000, 50_000_000)}
    (told,) = window_news(s, utc(2026, 11, 27, 12, 0))
    assert told.reason.startswith("outside the time windows: moves run under 10.0 MB/s until")
    # Not held: the move in flight goes on, under the cap.
    assert not s.holding
    assert set(s.wanted().brokers.values()) == {(10_000_000, 10_000_000)}


def test_a_run_that_continued_as_new_hands_its_disk_limit_and_windows_to_a_take_over():
    from drover.core.coordinator.takeover import run_start
    from drover.core.migration.runs import ClusterRun
    from drover.models.coordination import DiskLimits, Takeover

    s = coordinator(Windows(texts=[BERLIN_NIGHTS], outside_rate=10_000_000))
    s.disk.limits = DiskLimits(percent=90, brokers={4: 70})
    # As the next run takes it: the carry in JSON, taken back typed.
    carry = {"state": s.model_dump(mode="json"), "book": {}}
    took, carried = run_start(ClusterRun.model_validate({"name": "c", "cluster_id": "k", "carry": carry}), Takeover())
    assert carried and took.windows == s.windows and took.disk_max == s.disk.limits
    again = ClusterState(name="c")
    again.took_over(took)
    assert again.windows == s.windows and again.disk.limits == DiskLimits(percent=90, brokers={4: 70})
