"""Shell completion: the requests the installed script makes (bash's protocol) complete commands and the values of
choice options. (Printing the script, --show-completion, detects the shell from the process tree, which a CI job
may not have.)"""

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
    done = subprocess.run([sys.executable, "-m", "drover.cli.app"], env=env, capture_output=True, text=True, timeout=60)
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
