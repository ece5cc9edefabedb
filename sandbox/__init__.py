"""The local stack: a KRaft Kafka cluster, the Temporal dev server and the Drover worker, started by PID."""

from sandbox.stack import Sandbox, SandboxError, SandboxSettings

__all__ = ["Sandbox", "SandboxError", "SandboxSettings"]
