"""The tiered sandbox's brokers (`drover sandbox up --tiered`): a file-system remote storage manager of the
sandbox's own, compiled against the brokers' jars and loaded from its jar, with its remote log in the sandbox's
folder."""

from pathlib import Path

import pytest

from drover.sandbox import SandboxError, SandboxSettings
from drover.sandbox.kafka_nodes import REMOTE_STORAGE_CLASS, node_configs
from drover.sandbox.layout import made_layout


def test_a_tiered_sandbox_gives_every_broker_its_remote_storage_manager(tmp_path):
    jar = Path("/cache/remote-storage/drover-remote-storage-0.jar")
    configs = node_configs(SandboxSettings(state_dir=tmp_path, brokers=3, tiered=True), tmp_path, 3, jar)
    for name in ("broker-1", "broker-2", "broker-3"):
        config = configs[name]
        assert config["remote.log.storage.system.enable"] == "true"
        assert config["remote.log.storage.manager.class.name"] == REMOTE_STORAGE_CLASS
        assert config["remote.log.storage.manager.class.path"] == jar
        assert config["rsm.config.dir"] == tmp_path / "remote"
        assert config["rlmm.config.remote.log.metadata.topic.replication.factor"] == 3
    assert configs["controller"]["remote.log.storage.system.enable"] == "true"
    assert "remote.log.storage.manager.class.name" not in configs["controller"]
    plain = node_configs(SandboxSettings(state_dir=tmp_path, brokers=3), tmp_path, 3, jar)
    assert "remote.log.storage.system.enable" not in plain["broker-1"]


def test_tiered_and_secure_together_are_refused_in_one_line(tmp_path):
    with pytest.raises(SandboxError, match="a tiered sandbox runs unsecured"):
        node_configs(SandboxSettings(state_dir=tmp_path, tiered=True, secure=True), tmp_path, 4, Path("x.jar"))


def test_a_sandbox_made_without_tiered_storage_asks_for_a_wipe_to_add_it(tmp_path):
    made_layout(tmp_path, SandboxSettings(state_dir=tmp_path), {}, formatted=False)
    with pytest.raises(SandboxError, match="run 'drover sandbox down --wipe' to start over with .*, tiered storage"):
        made_layout(tmp_path, SandboxSettings(state_dir=tmp_path, tiered=True), {}, formatted=True)
