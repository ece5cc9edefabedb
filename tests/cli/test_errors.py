"""Temporal's refusals reach people as one line naming what failed, never "unexpected RPCError"."""

import subprocess
import sys

import pytest

SCRIPT = """
import sys
from drover.cli import migration_view
from temporalio.service import RPCError, RPCStatusCode

async def refused(*args, **kwargs):
    raise RPCError({message!r}, RPCStatusCode.{status}, b"")

migration_view.show_status = refused
sys.argv = ["drover", "status", "migration-1"]
from drover.cli.app import main
main()
"""


@pytest.mark.parametrize(
    ("message", "status", "says"),
    [
        (
            "Workflow Task in failed state",
            "FAILED_PRECONDITION",
            "error: Temporal refused (failed precondition): Workflow Task in failed state; the workflow's code fails "
            "on a worker: its history in the Web UI shows why",
        ),
        ("namespace not found", "NOT_FOUND", "error: Temporal refused (not found): namespace not found"),
    ],
)
def test_an_rpc_error_is_one_line_naming_it(message, status, says):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(message=message, status=status)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [says]


def test_ids_print_as_they_are_never_as_emoji(capsys):
    # Rich reads ":five:" as an emoji code: a flow on cluster "five" would print with a keycap in its ID.
    from drover.cli.output import Output

    Output().info("decommission:five:20261126-1 started")
    Output(as_json=True).data({"flow_id": "demote:fire:x"})
    captured = capsys.readouterr()
    assert "decommission:five:20261126-1 started" in captured.err
    assert '"demote:fire:x"' in captured.out
