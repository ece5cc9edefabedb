"""Shell completion: drover --show-completion prints the script, and the script's requests complete commands and the
values of choice options."""

import os
import subprocess
import sys

import pytest


def complete(words: str) -> list[str]:
    env = os.environ | {
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
        "_DROVER_COMPLETE": "complete_bash",
    }
    done = subprocess.run([sys.executable, "-m", "cli.app"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("drover st", ["start", "status"]),
        ("drover cluster f", ["freeze"]),
        ("drover start plan.json --order ", ["small-first", "large-first"]),
        ("drover cancel MIGRATION --mode ", ["stop", "revert-pending", "rollback"]),
        ("drover start plan.json --on-stuck ", ["wait", "rollback", "fail"]),
    ],
)
def test_bash_completion_of_commands_and_choices(words, expected):
    assert complete(words) == expected


def test_the_completion_script_for_bash():
    done = subprocess.run(
        [sys.executable, "-m", "cli.app", "--show-completion", "bash"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "complete -o default -F _drover_completion drover" in done.stdout
