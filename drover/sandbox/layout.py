"""What a sandbox was made with, recorded in its state folder, and what `drover sandbox status` reports."""

from pathlib import Path

from pydantic import BaseModel

from drover.sandbox.kafka_nodes import new_cluster_id
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
    # SASL_SSL and an authorizer (layouts written by earlier versions: neither).
    secure: bool = False
    # Tiered storage (layouts written by earlier versions: none).
    tiered: bool = False
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


def as_recorded(given: SandboxSettings) -> SandboxSettings:
    """``given`` with the layout its state folder records (ports, brokers, secured...), if it was ever started."""
    recorded = recorded_layout(given.state_dir.resolve())
    return given if recorded is None else recorded.settings(given)


def _made_with(
    brokers: int, racks: int, port_base: int, kafka_version: str, temporal: str, secure: bool, tiered: bool
) -> str:
    made = f"{brokers} brokers, {racks} racks, ports from {port_base}, Kafka {kafka_version}, Temporal {temporal}"
    return made + (", secured" if secure else "") + (", tiered storage" if tiered else "")


def made_layout(state: Path, s: SandboxSettings, started_ports: dict[str, int], formatted: bool) -> Layout:
    """The layout of the sandbox in ``state`` (recorded now if it is new), once it matches what ``s`` asks for;
    ``formatted`` says whether any Kafka node's storage is formatted."""
    path = state / "layout.json"
    fields = ("brokers", "racks", "port_base", "kafka_version", "temporal", "secure", "tiered")
    if not path.exists():
        layout = Layout(cluster_id=new_cluster_id(), **{f: getattr(s, f) for f in fields}, **started_ports)
        state.mkdir(parents=True, exist_ok=True)
        path.write_text(layout.model_dump_json(indent=2))
        return layout
    layout = Layout.model_validate_json(path.read_text())
    asked, made = ({f: getattr(x, f) for f in fields} for x in (s, layout))
    if layout.cluster_id.startswith("-") and not formatted:
        # Written by an earlier version that could draw such an ID, which kafka-storage reads as an option.
        layout = layout.model_copy(update={"cluster_id": new_cluster_id()})
        path.write_text(layout.model_dump_json(indent=2))
    if asked != made:
        raise SandboxError(
            f"the sandbox in {state} was made with {_made_with(**made)}; run 'drover sandbox down --wipe' to start "
            f"over with {_made_with(**asked)}"
        )
    if layout.model_dump(include=set(started_ports)) != started_ports:
        layout = layout.model_copy(update=started_ports)
        path.write_text(layout.model_dump_json(indent=2))
    return layout
