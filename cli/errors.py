"""Errors a person reads: one line, no traceback."""


class DroverError(Exception):
    """A problem the user can fix; ``exit_code`` 2 for bad input, 1 for everything else."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
