"""The Temporal client, always with the pydantic data converter, and patience while Temporal restarts."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import FailureError
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RPCError, RPCStatusCode

from settings import Settings

T = TypeVar("T")

# How long a command waits for Temporal to answer again: a restart takes seconds; a server still away after
# this is reported, in one line.
RECONNECT_S = 300.0


class TemporalUnavailable(Exception):
    pass


_runtime: Runtime | None = None


def runtime(metrics_port: int | None = None) -> Runtime:
    """The process's Temporal runtime, made on first use: the SDK core's own log lines (warnings and errors) are
    forwarded to the ``temporalio.core`` logger, so they are rendered like every other line (JSON included); with
    ``metrics_port``, the SDK's metrics and Drover's own (``workflows.metrics``) are served for Prometheus there."""
    global _runtime
    if _runtime is None:
        forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
        core_logs = LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding)
        metrics = PrometheusConfig(bind_address=f"0.0.0.0:{metrics_port}") if metrics_port else None
        _runtime = Runtime(telemetry=TelemetryConfig(logging=core_logs, metrics=metrics))
    return _runtime


async def connect(settings: Settings, identity: str | None = None, serve_metrics: bool = False) -> Client:
    """A client of Temporal at the settings' address; ``identity`` names who acts in the histories it writes
    (the CLI passes user@host; the SDK's default is the process ID and host). The worker asks to serve metrics
    (on the settings' metrics port, when one is set)."""
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            runtime=runtime(settings.metrics_port if serve_metrics else None),
            **({"identity": identity} if identity else {}),
        )
    except RuntimeError as e:
        raise TemporalUnavailable(
            f"cannot reach Temporal at {settings.temporal_address} ({e}); start it with 'drover sandbox up' "
            f"or set DROVER_TEMPORAL_ADDRESS"
        ) from e


def unreachable(e: BaseException) -> bool:
    """Temporal did not answer at all (down or restarting), as opposed to answering with an error."""
    return isinstance(e, RPCError) and (e.status == RPCStatusCode.UNAVAILABLE or "connect error" in str(e))


async def patiently(
    call: Callable[[], Awaitable[T]], address: str, say: Callable[[str], None], limit_s: float = RECONNECT_S
) -> T:
    """``call()``, tried again with backoff while Temporal is unreachable (a restart), saying once that it waits and
    once that Temporal is back; after ``limit_s`` without an answer, TemporalUnavailable."""
    delay, deadline, waiting = 0.5, time.monotonic() + limit_s, False
    while True:
        try:
            found = await call()
        except RPCError as e:
            if not unreachable(e):
                raise
            if time.monotonic() >= deadline:
                raise TemporalUnavailable(f"Temporal at {address} has not answered for {limit_s:.0f} s ({e})") from None
            if not waiting:
                say(f"waiting for Temporal at {address} (it does not answer: {e}); trying again")
                waiting = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if waiting:
            say(f"Temporal at {address} answers again")
        return found


def failure_message(e: BaseException) -> str:
    """A failure in one line: the innermost cause's own message, without the "Type: " prefix Temporal's errors
    put before it nor the "activity failed" layers around it."""
    while isinstance(e, (FailureError, WorkflowFailureError, WorkflowUpdateFailedError)) and e.cause is not None:
        e = e.cause
    return e.message if isinstance(e, FailureError) else str(e)
