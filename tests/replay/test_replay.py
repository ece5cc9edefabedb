"""Committed histories of representative migrations (tests/replay/histories, made by tests/replay/record.py) replay
against today's workflow code: a change that would make a running migration nondeterministic fails here."""

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows import WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_every_scenario_has_histories():
    names = {p.name for p in HISTORIES}
    for scenario in (
        "completed",
        "rolled-back",
        "controls",
        "continued",
        "stuck-rollback",
        "auto-throttle",
        "revert-pending",
        "refused-signals",
        "shared",
        "leaders",
    ):
        assert {f"{scenario}-run1.json", f"{scenario}-move.json", f"{scenario}-cluster.json"} <= names
    assert "continued-run2.json" in names
    # Migrations started before the cluster coordinator existed (they throttle on their own) still replay.
    assert {
        f"before-coordinator-{s}.json"
        for s in ("completed-run1", "rolled-back-run1", "continued-run1", "continued-run2", "controls-run1")
    } <= names
    # Migrations (and a coordinator) from before leader movements were counted at the step still replay.
    assert {f"before-leaders-at-step-{s}.json" for s in ("completed-run1", "shared-run1", "shared-cluster")} <= names
    # Migrations from before granted moves started ahead of the demand that follows them still replay.
    assert {
        f"before-start-granted-first-{s}.json"
        for s in (
            "completed-run1",
            "shared-run1",
            "continued-run1",
            "continued-run2",
            "controls-run1",
            "rolled-back-run1",
        )
    } <= names
    # Moves started before their quick calls were local activities and a step's alter waited for it to settle.
    assert {
        f"before-fewer-round-trips-{s}-move.json" for s in ("completed", "stuck-rollback", "leaders", "rolled-back")
    } <= names
    # Moves that completed before their result was their only report (they also signalled it).
    assert {f"before-result-reports-{s}-move.json" for s in ("completed", "leaders", "auto-throttle")} <= names
    # Coordinators from before a free slot went to the move whose copy uses the least busy throttles.
    assert {f"before-spread-copies-{s}-cluster.json" for s in ("completed", "shared", "leaders")} <= names
    # Moves started before the migration became a state machine (their workflow kept its commands) still replay.
    assert {"before-state-machine-completed-move.json", "before-state-machine-stuck-rollback-move.json"} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path):
    saved = json.loads(path.read_text())
    history = WorkflowHistory.from_json(saved["workflow_id"], saved["history"])
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
