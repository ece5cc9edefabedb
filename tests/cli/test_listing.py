"""`drover list`'s state column, from Temporal's status and the state the migration last published."""

import pytest

from drover.cli.listing import _state


@pytest.mark.parametrize(
    ("temporal", "drover", "shown"),
    [
        ("running", "paused", "paused"),
        ("running", None, "running"),
        ("completed", "completed", "completed"),
        # Stopped, reverted or rolled back by the operator: Canceled in Temporal, Drover's end in the list.
        ("canceled", "stopped", "stopped"),
        ("canceled", "rolled_back", "rolled_back"),
        ("canceled", "reverted", "reverted"),
        ("canceled", "cancelling", "canceled"),
        ("failed", "failed", "failed"),
        ("terminated", "running", "terminated"),
    ],
)
def test_the_state_listed_is_drovers_end_or_temporals(temporal, drover, shown):
    assert _state(temporal, drover) == shown
