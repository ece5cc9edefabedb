"""A coordinator's take-over from a lost run: whom it waits for, and how long it keeps the lost run's throttle."""

from datetime import UTC, datetime, timedelta

from drover.core.coordinator.takeover import TakeOver

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WAIT = timedelta(seconds=60)


def test_running_migrations_that_have_not_joined_are_waited_for_until_they_join():
    t = TakeOver()
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
    t = TakeOver()
    t.found(["m-1"], [], T0, WAIT)
    assert t.waiting(T0 + WAIT - timedelta(seconds=1))
    assert not t.waiting(T0 + WAIT)
    assert t.awaiting == set()
    assert not t.keeps_lost_throttle(T0 + WAIT)


def test_a_coordinator_that_took_nothing_over_waits_for_nobody():
    t = TakeOver()
    assert not t.waiting(T0) and not t.keeps_lost_throttle(T0) and not t.done
