"""Leaving a process that has used the Temporal SDK.

The SDK's Rust runtime keeps native threads that can crash CPython's finalization (SIGSEGV or "PyGILState_Release"
after the last line of output), turning a clean exit into a failure. Once the work is done and reported, the entry
points leave with os._exit, which skips finalization; output is flushed first so nothing is lost.
"""

import os
import sys


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
