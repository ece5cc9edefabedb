"""Errors a person reads: one line, no traceback."""

import re


class DroverError(Exception):
    """A problem the user can fix; ``exit_code`` 2 for bad input, 1 for everything else."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def cluster_name(name: str) -> str:
    """``name`` if it is a usable cluster name (letters, digits, '.', '_' and '-'); a one-line refusal otherwise."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise DroverError(f"--cluster {name!r}: use letters, digits, '.', '_' and '-' only", exit_code=2)
    return name
