"""Patience while Temporal restarts: calls are tried again while it does not answer, and said so once; a worker
started while Temporal restarts waits for it."""

import socket
import time

import pytest
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters import temporal
from drover.adapters.temporal import TemporalUnavailable, connect_options, connect_waiting, patiently
from drover.settings import Settings


def down() -> RPCError:
    return RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


async def test_a_call_is_tried_again_until_temporal_answers():
    answers = [down(), down(), "progress"]
    said = []

    async def call():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await patiently(call, "127.0.0.1:7233", said.append) == "progress"
    assert (
        len(said) == 2 and said[0].startswith("waiting for Temporal at 127.0.0.1:7233") and "answers again" in said[1]
    )


async def test_an_answer_that_is_an_error_is_not_tried_again():
    async def call():
        raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    with pytest.raises(RPCError):
        await patiently(call, "x:1", print)


async def test_temporal_away_too_long_is_one_error_naming_the_address():
    async def call():
        raise down()

    with pytest.raises(TemporalUnavailable, match="Temporal at x:1 has not answered for 1 s"):
        await patiently(call, "x:1", lambda _: None, limit_s=1)


def test_a_refused_update_or_a_failed_workflow_is_told_by_its_cause():
    from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
    from temporalio.exceptions import ApplicationError

    from drover.cli.errors import failure_message

    refused = WorkflowUpdateFailedError(ApplicationError("the cluster is already frozen", type="ValueError"))
    assert failure_message(refused) == "the cluster is already frozen"
    failed = WorkflowFailureError(cause=ApplicationError("preflight found 1 problem(s)", type="Preflight"))
    assert failure_message(failed) == "preflight found 1 problem(s)"


def settings_from(monkeypatch, **drover: str):
    from drover.settings import Settings

    for name in ("DROVER_TEMPORAL_ADDRESS", "DROVER_TEMPORAL_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in drover.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_tls_api_key_and_address_come_from_the_temporal_clis_variables(monkeypatch, tmp_path):
    for name in ("ca.pem", "client.pem", "client.key"):
        (tmp_path / name).write_bytes(f"-- {name} --".encode())
    environ = {
        "TEMPORAL_ADDRESS": "prod.tmprl.cloud:7233",
        "TEMPORAL_NAMESPACE": "payments.a1b2c",
        "TEMPORAL_API_KEY": "secret-key",
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "client.pem"),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(tmp_path / "client.key"),
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path / "ca.pem"),
        "TEMPORAL_TLS_SERVER_NAME": "prod.internal",
    }
    options = connect_options(settings_from(monkeypatch), environ)
    assert options["target_host"] == "prod.tmprl.cloud:7233" and options["namespace"] == "payments.a1b2c"
    assert options["api_key"] == "secret-key"
    tls = options["tls"]
    assert tls.client_cert == b"-- client.pem --" and tls.client_private_key == b"-- client.key --"
    assert tls.server_root_ca_cert == b"-- ca.pem --" and tls.domain == "prod.internal"


def test_drovers_own_address_wins_and_the_sandbox_default_comes_last(monkeypatch):
    environ = {"TEMPORAL_ADDRESS": "elsewhere:7233"}
    chosen = connect_options(settings_from(monkeypatch, DROVER_TEMPORAL_ADDRESS="mine:7233"), environ)
    assert chosen["target_host"] == "mine:7233"
    plain = connect_options(settings_from(monkeypatch), {})
    assert plain["target_host"] == "127.0.0.1:7233" and plain["namespace"] == "default" and "tls" not in plain


def test_a_profile_is_read_from_the_config_file(monkeypatch, tmp_path):
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.default]\naddress = "a:7233"\n\n'
        '[profile.staging]\naddress = "staging:7233"\nnamespace = "drover"\napi_key = "k"\n'
    )
    environ = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "staging"}
    options = connect_options(settings_from(monkeypatch), environ)
    assert (options["target_host"], options["namespace"], options["api_key"]) == ("staging:7233", "drover", "k")


def test_a_config_file_that_does_not_parse_is_one_error(monkeypatch, tmp_path):
    config = tmp_path / "temporal.toml"
    config.write_text("[profile.default\naddress = ")
    with pytest.raises(TemporalUnavailable) as failed:
        connect_options(settings_from(monkeypatch), {"TEMPORAL_CONFIG_FILE": str(config)})
    assert str(failed.value).startswith("the Temporal client configuration does not load")
    assert "\n" not in str(failed.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_worker_waits_for_temporal_to_answer_then_connects(monkeypatch):
    # Temporal restarting: the first two connections fail as the SDK fails them, the third is answered.
    answers: list = [RuntimeError("connection refused"), RuntimeError("connection refused"), "client"]
    said: list[str] = []

    async def connect(settings, serve_metrics=False):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise TemporalUnavailable(f"cannot reach Temporal ({answer})") from answer
        return answer

    monkeypatch.setattr(temporal, "connect", connect)
    assert await connect_waiting(Settings(), said.append, limit_s=30) == "client"
    assert (
        len(said) == 2 and said[0].startswith("waiting for Temporal, for up to 30 s") and said[1] == "Temporal answers"
    )


async def test_a_worker_gives_up_on_a_temporal_that_never_answers_and_does_not_wait_on_a_bad_config(monkeypatch):
    said: list[str] = []
    started = time.monotonic()
    nobody = Settings(temporal_address=f"127.0.0.1:{free_port()}")
    with pytest.raises(TemporalUnavailable, match="cannot reach Temporal at 127.0.0.1"):
        await connect_waiting(nobody, said.append, limit_s=1.5)
    assert time.monotonic() - started >= 1.5 and len(said) == 1

    async def bad_config(settings, serve_metrics=False):
        raise TemporalUnavailable("the Temporal client configuration does not load: x")

    monkeypatch.setattr(temporal, "connect", bad_config)
    with pytest.raises(TemporalUnavailable, match="does not load"):
        await connect_waiting(Settings(), said.append, limit_s=30)
    assert len(said) == 1
