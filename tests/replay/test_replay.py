"""Committed histories of representative migrations (tests/replay/histories, made by tests/replay/record.py) replay
against today's workflow code: a change that would make a running migration nondeterministic fails here."""

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from drover.workflows import WORKFLOWS

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
        "band",
    ):
        assert {f"{scenario}-run1.json", f"{scenario}-move.json", f"{scenario}-cluster.json"} <= names
    assert "continued-run2.json" in names
    flows = ("decommission", "demote", "undo-demote", "decommission-rolled-back", "decommission-refused")
    assert {f"{flow}-flow.json" for flow in flows} <= names
    # One version of each workflow: no history is kept to replay an older one.
    assert not [n for n in names if n.startswith("before-")]


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path):
    saved = json.loads(path.read_text())
    history = WorkflowHistory.from_json(saved["workflow_id"], saved["history"])
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter, debug_mode=True)  # no 2 s limit
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
