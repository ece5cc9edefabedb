"""The local stack: a KRaft Kafka cluster, the Temporal dev server and the Drover worker, started by PID."""

from drover.sandbox.settings import SandboxError, SandboxSettings

__all__ = ["Sandbox", "SandboxError", "SandboxSettings"]


def __getattr__(name: str):
    # The stack (processes, sockets, Maven) loads when it is used, not with the settings the CLI's help shows.
    if name == "Sandbox":
        from drover.sandbox.stack import Sandbox

        return Sandbox
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
