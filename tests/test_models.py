"""Models read what earlier versions of Drover wrote into histories and saved files."""

import json
from datetime import UTC, datetime

from drover.models.admission import Limits
from drover.models.moves import MoveReport, MoveResult
from drover.models.progress import MigrationProgress
from drover.models.results import MigrationResult, MoveOutcome


def outcome(**fields) -> dict:
    return {"topic": "t", "partition": 0, "original": [1, 2], "target": [3, 4], "final": [1, 2], **fields}


def test_the_stuck_revert_flag_and_rollback_outcomes_load_under_their_earlier_names():
    result = MigrationResult.model_validate(
        {
            "status": "rolled_back",
            "moves": [outcome(rolled_back=True)],
            "rolled_back": [outcome(partition=1)],
            "verified": True,
            "peak_in_flight": 1,
            "peak_per_broker": 1,
        }
    )
    assert result.moves[0].reverted_when_stuck
    assert [o.partition for o in result.rollback_outcomes] == [1]
    report = MoveReport.model_validate({"topic": "t", "partition": 0, "token": "x", "rolled_back": True})
    assert report.reverted_when_stuck
    moved = MoveResult.model_validate(
        {"topic": "t", "partition": 0, "original": [1], "final": [1], "steps": [], "rolled_back": True}
    )
    assert moved.reverted_when_stuck


def test_the_new_names_are_what_is_written():
    written = MoveOutcome(**outcome(reverted_when_stuck=True)).model_dump()
    assert written["reverted_when_stuck"] is True and "rolled_back" not in written
    again = MoveOutcome.model_validate(written)
    assert again.reverted_when_stuck


def test_progress_and_result_share_the_status_key_at_every_phase():
    progress = MigrationProgress(
        phase="preflight",
        waiting=1,
        in_flight=[],
        done=0,
        failed=0,
        limits=Limits(),
        throttle_bytes_per_s=None,
        peak_in_flight=0,
        peak_per_broker=0,
    )
    shown = json.loads(progress.model_dump_json())
    assert shown["status"] == shown["phase"] == "preflight"
    # Read back (by `drover watch --json` consumers, or the CLI itself), the key is not taken for a field.
    assert MigrationProgress.model_validate_json(progress.model_dump_json()).phase == "preflight"
    ended = MigrationResult(status="stopped", moves=[], verified=True, peak_in_flight=0, peak_per_broker=0)
    assert json.loads(ended.model_dump_json())["status"] == "stopped"


def test_people_read_rates_with_their_unit_and_counts_in_the_singular():
    from drover.cli.migration_view import show_actions
    from drover.cli.output import Output
    from drover.models.control import AuditEntry
    from drover.models.coordination import ClusterSettings, ClusterThrottleChange
    from drover.models.units import counted, human_rate

    assert (counted(1, "partition"), counted(2, "partition")) == ("1 partition", "2 partitions")
    assert (human_rate(5_000_000), human_rate(None)) == ("5.0 MB/s", "none")
    change = ClusterThrottleChange(rate_bytes_per_s=5_000_000, actor="ana", reason="night")
    assert ClusterSettings().apply(change).told(change) == ("throttle", "5.0 MB/s on every broker moving")
    shown: list[list[object]] = []

    class Rows(Output):
        def table(self, title, columns, rows):
            shown.extend(rows)

    at = datetime(2026, 1, 1, tzinfo=UTC)
    show_actions(Rows(), [AuditEntry(at=at, action="set_throttle", actor="ana", reason="faster", detail="2000")])
    assert shown[0][-1] == "2.0 KB/s"
