"""Heartbeats from a helper thread while a blocking call runs (a Kafka describe of many topics, a Spark job): an
activity whose one call outlasts its heartbeat timeout is not taken for dead and tried again for ever."""

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import activity

# Well inside the shortest heartbeat timeout of the policies (20 s), and seldom enough to cost nothing.
BEAT_EVERY_S = 1.0
# A call still running after this is taken as hung: the beats stop, so the heartbeat timeout abandons the attempt
# and Temporal tries again. A Spark job over a million partitions takes about a minute; no admin call takes this long.
BEAT_FOR_S = 600.0


@contextmanager
def heartbeating(detail: str, for_s: float = BEAT_FOR_S) -> Iterator[None]:
    """Heartbeat every BEAT_EVERY_S while the block runs, for at most ``for_s``."""
    context, done = contextvars.copy_context(), threading.Event()
    until = time.monotonic() + for_s

    def beat() -> None:
        while not done.wait(BEAT_EVERY_S) and time.monotonic() < until:
            context.run(activity.heartbeat, detail)

    thread = threading.Thread(target=beat, name=f"heartbeat-{detail}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
