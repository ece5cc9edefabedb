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


def broker_ids(option: str, text: str) -> list[int]:
    """ "4,5" -> [4, 5], sorted and once each; anything but whole numbers is a one-line refusal naming ``option``."""
    ids = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if not re.fullmatch(r"\d+", part):
            raise DroverError(f"{option}: {part!r} is not a broker id (a whole number)", exit_code=2)
        ids.append(int(part))
    return sorted(set(ids))


def failure_message(e: BaseException) -> str:
    """A workflow's or an update's failure, as the client raises it, in one line: its cause's own message."""
    from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

    from drover.workflows.failures import failure_message as told

    while isinstance(e, WorkflowFailureError | WorkflowUpdateFailedError) and e.cause is not None:
        e = e.cause
    return told(e)
