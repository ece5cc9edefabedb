"""What a sandbox was made with, recorded in its state folder, and what `drover sandbox status` reports."""

from pathlib import Path

from pydantic import BaseModel

from drover.sandbox.settings import SandboxError, SandboxSettings


class Layout(BaseModel):
    """What a sandbox was made with (a different request needs `down --wipe` first), and the ports its Temporal and
    worker last started on: a shell that did not export the sandbox's settings reads them here."""

    cluster_id: str
    brokers: int
    racks: int
    port_base: int
    kafka_version: str
    # The dev server, or Temporal server with PostgreSQL (layouts written by earlier versions: the dev server).
    temporal: str = "dev"
    # Not in layouts written by earlier versions.
    temporal_port: int | None = None
    ui_port: int | None = None
    metrics_port: int | None = None

    def settings(self, given: SandboxSettings) -> SandboxSettings:
        """``given`` with what this layout recorded for every setting not given explicitly (in the environment or
        as an argument)."""
        recorded = self.model_dump(exclude={"cluster_id"}, exclude_none=True)
        taken = {k: v for k, v in recorded.items() if k not in given.model_fields_set}
        return given.model_copy(update=taken) if taken else given


class NodeStatus(BaseModel):
    name: str
    pid: int | None
    address: str
    rack: str | None = None
    registered: bool | None = None


class SandboxStatus(BaseModel):
    bootstrap: str
    temporal_address: str
    ui_url: str
    controller_id: int | None
    nodes: list[NodeStatus]

    @property
    def services_ready(self) -> bool:
        """Kafka and Temporal are up (the worker is waited for separately)."""
        return all(n.pid is not None and n.registered is not False for n in self.nodes if n.name != "worker")


def recorded_layout(state: Path) -> Layout | None:
    """The layout recorded in the sandbox's state folder, if it was ever started."""
    path = state / "layout.json"
    try:
        return Layout.model_validate_json(path.read_text()) if path.exists() else None
    except ValueError:
        raise SandboxError(f"{path} is not a sandbox layout; run 'drover sandbox down --wipe'") from None
