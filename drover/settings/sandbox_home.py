"""Where the local sandbox keeps its state, and the ports it recorded there when it started: a shell that did not
export the sandbox's settings (DROVER_SANDBOX_*) still reaches this clone's sandbox, not another on the default
ports."""

import json
import os
from pathlib import Path


def data_home() -> Path:
    """The folder that holds the sandbox's ``.drover/`` (state) and ``.cache/`` (jars), and where its worker runs: the
    source checkout when Drover runs from one, else ``$XDG_DATA_HOME/drover`` (``~/.local/share/drover``) for an
    installed Drover, whose package folder is no place for data."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "drover"


def recorded_port(name: str) -> int | None:
    """The port ``name`` (``port_base``, ``temporal_port``, ``ui_port``) the sandbox recorded in its state folder
    (DROVER_SANDBOX_STATE_DIR, else the default one), or None if it has not started there."""
    state = Path(os.environ.get("DROVER_SANDBOX_STATE_DIR") or data_home() / ".drover" / "sandbox")
    try:
        value = json.loads((state / "layout.json").read_text()).get(name)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None
