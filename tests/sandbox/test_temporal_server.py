"""The sandbox with Temporal server and its PostgreSQL instead of the dev server (`drover sandbox up --temporal
server`): its ports, its config, and a request the sandbox was not made with."""

import json
import os

import pytest

from drover.sandbox import Sandbox, SandboxError, SandboxSettings
from tests.cli.test_cli import assert_one_line_error, drover


def test_every_port_of_the_server_and_its_database_is_its_own_and_in_its_config(tmp_path):
    settings = SandboxSettings(state_dir=tmp_path / "state", port_base=26092, temporal_port=27433, temporal="server")
    sandbox = Sandbox(settings)
    ports = sandbox._ports()
    assert len(set(ports.values())) == len(ports), ports
    assert ports["postgres"] == 26242 and max(ports.values()) < 32768
    config = sandbox.server.config() if sandbox.server else {}
    services = config["services"]
    served = [services["frontend"]["rpc"]["httpPort"]]
    for rpc in (s["rpc"] for s in services.values()):
        served += [rpc["grpcPort"], rpc["membershipPort"]]
    assert sorted(served) == sorted(p for name, p in ports.items() if name.startswith("temporal") and "UI" not in name)
    stores = config["persistence"]["datastores"].values()
    assert {s["sql"]["connectAddr"] for s in stores} == {"127.0.0.1:26242"}
    # The dev server's sandbox has none of them.
    assert Sandbox(settings.model_copy(update={"temporal": "dev"})).server is None


def test_a_sandbox_made_with_the_dev_server_is_not_taken_for_one_with_temporal_server(tmp_path):
    state = tmp_path / "state"
    layout = {"cluster_id": "AAAAAAAAAAAAAAAAAAAAAA", "brokers": 4, "racks": 2, "port_base": 26092}
    state.mkdir()
    (state / "layout.json").write_text(json.dumps(layout | {"kafka_version": "4.4.0"}))
    sandbox = Sandbox(SandboxSettings(state_dir=state, port_base=26092, temporal="server"))
    with pytest.raises(SandboxError, match="Temporal dev; run 'drover sandbox down --wipe' .* Temporal server$"):
        sandbox._layout()


def test_an_unknown_temporal_is_one_line_and_env_leaves_out_the_web_ui_temporal_server_lacks(tmp_path):
    env = os.environ | {"DROVER_SANDBOX_STATE_DIR": str(tmp_path / "state")}
    refused = drover("sandbox", "up", "--temporal", "cloud", env=env)
    assert_one_line_error(refused, 2, "--temporal: 'cloud' is neither dev nor server")
    assert not (tmp_path / "state").exists()
    exported = drover("sandbox", "env", env=env | {"DROVER_SANDBOX_TEMPORAL": "server"})
    assert exported.returncode == 0, exported.stderr
    assert "DROVER_TEMPORAL_UI_URL" not in exported.stdout and "DROVER_TEMPORAL_ADDRESS" in exported.stdout
