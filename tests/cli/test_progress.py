"""What drover status and drover watch make of a migration's progress before printing it."""

from datetime import UTC, datetime, timedelta

from cli.status import as_of_now, summary
from models.admission import Limits
from models.progress import MigrationProgress

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def progress(phase: str, elapsed_s: float, eta_s: float | None) -> MigrationProgress:
    return MigrationProgress(
        phase=phase,
        started_at=START,
        elapsed_s=elapsed_s,
        eta_s=eta_s,
        waiting=1,
        in_flight=[],
        done=1,
        failed=0,
        limits=Limits(),
        throttle_bytes_per_s=None,
        peak_in_flight=1,
        peak_per_broker=1,
        moves_total=2,
    )


def test_elapsed_and_eta_of_a_running_migration_count_from_the_wall_clock():
    # The workflow last ran 1 s after the start; the query is read 18 s after it.
    seen = as_of_now(progress("running", 1.0, 30.0), now=START + timedelta(seconds=18))
    assert seen.elapsed_s == 18.0 and seen.eta_s == 13.0
    assert "elapsed 18s, ETA 13s" in summary("running", seen)
    # An ETA never goes below zero, and an unknown one stays unknown.
    assert as_of_now(progress("running", 1.0, 5.0), now=START + timedelta(seconds=60)).eta_s == 0.0
    assert as_of_now(progress("running", 1.0, None), now=START + timedelta(seconds=60)).eta_s is None


def test_an_ended_migration_keeps_the_elapsed_time_it_ended_with():
    ended = progress("completed", 42.0, 0.0)
    assert as_of_now(ended, now=START + timedelta(hours=3)) == ended
