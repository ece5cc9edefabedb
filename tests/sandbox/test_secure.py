"""The secured sandbox (`drover sandbox up --secure`): no listener takes a client without TLS and SCRAM, the
authorizer refuses what no ACL grants, the nodes authenticate to each other, its users' properties files are what
`drover sandbox env` points at, and a sandbox made without it is not taken for one with it."""

import json
import stat

import pytest

from drover.sandbox import Sandbox, SandboxError, SandboxSettings, secure
from drover.sandbox.kafka_nodes import node_configs
from drover.settings.kafka_properties import parse_client_properties, read_properties


def test_every_listener_authenticates_and_the_authorizer_refuses_by_default(tmp_path):
    s = SandboxSettings(state_dir=tmp_path, port_base=26092, brokers=3, secure=True)
    configs = node_configs(s, tmp_path, 3)
    for name, config in configs.items():
        protocols = dict(p.split(":") for p in str(config["listener.security.protocol.map"]).split(","))
        assert set(protocols.values()) <= {"SASL_SSL", "SASL_PLAINTEXT"}, name
        assert config["authorizer.class.name"] == secure.AUTHORIZER
        assert config["allow.everyone.if.no.acl.found"] == "false"
        assert config["super.users"] == "User:broker;User:admin"
    broker = configs["broker-2"]
    assert broker["listeners"] == "SASL_SSL://127.0.0.1:26093,BROKER://127.0.0.1:26143"
    assert broker["inter.broker.listener.name"] == "BROKER"
    assert broker["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    # Passwords are drawn once and kept where only their owner reads them.
    words = secure.passwords(tmp_path)
    assert secure.passwords(tmp_path) == words and len(set(words.values())) == 3
    assert stat.S_IMODE((tmp_path / "secure" / "passwords.json").stat().st_mode) == 0o600
    assert f'user_broker="{words["broker"]}"' in str(broker["listener.name.broker.plain.sasl.jaas.config"])
    assert secure.scram_users(tmp_path)[1] == f"SCRAM-SHA-512=[name=admin,password={words['admin']}]"


def test_the_users_properties_files_are_what_drover_takes(tmp_path):
    s = SandboxSettings(state_dir=tmp_path, secure=True)
    secure.make_material(tmp_path)
    assert (tmp_path / "secure" / "ca.pem").exists() and (tmp_path / "secure" / "broker-keystore.pem").exists()
    assert s.client_env()["DROVER_KAFKA_PROPERTIES"] == str(s.properties("drover"))
    assert s.properties("drover") == secure.properties_path(tmp_path.resolve(), "drover")
    props = read_properties(s.properties("drover"))
    assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["ssl.truststore.location"] == str(tmp_path / "secure" / "ca.pem")
    # Drover's own reading of it: SCRAM over TLS, trusting the sandbox's CA, for both client libraries.
    ck, kp = parse_client_properties(s.properties("drover"))
    assert ck["sasl.username"] == "drover" and kp["sasl_mechanism"] == "SCRAM-SHA-512"
    assert "DROVER_KAFKA_PROPERTIES" not in SandboxSettings(state_dir=tmp_path).client_env()


def test_a_sandbox_made_unsecured_is_not_taken_for_a_secured_one(tmp_path):
    state = tmp_path / "state"
    layout = {"cluster_id": "AAAAAAAAAAAAAAAAAAAAAA", "brokers": 4, "racks": 2, "port_base": 26092}
    state.mkdir()
    (state / "layout.json").write_text(json.dumps(layout | {"kafka_version": "4.4.0"}))
    sandbox = Sandbox(SandboxSettings(state_dir=state, port_base=26092, secure=True))
    with pytest.raises(SandboxError, match="Temporal dev; run 'drover sandbox down --wipe' .* Temporal dev, secured$"):
        sandbox._layout()
