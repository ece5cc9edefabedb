"""No secret in any history: a worker with SASL credentials runs a migration (with its estimate) on the real cluster
through the brokers' SASL listener; the exported histories of the migration and of every move, payloads decoded,
do not contain the password."""

import base64
import binascii
import contextlib
import json
import uuid

import pytest

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_port import KafkaAdminError
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.settings import Settings
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import TEST_SANDBOX, TEST_SASL_PASSWORD, worker_for

pytestmark = pytest.mark.integration


def history_text(history_json: dict) -> str:
    """The exported history as text, with every payload's base64 data decoded beside it (a secret inside a
    payload would not show in the raw export)."""
    decoded: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    with contextlib.suppress(binascii.Error, ValueError):
                        decoded.append(base64.b64decode(value, validate=True).decode("utf-8", "replace"))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(history_json)
    return json.dumps(history_json) + "\n" + "\n".join(decoded)


def sasl_settings(password: str) -> Settings:
    return Settings(
        cluster_name="sasltest",
        kafka_bootstrap=TEST_SANDBOX.sasl_bootstrap,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="drover",
        kafka_sasl_password=password,
    )


async def test_no_secret_in_any_history(real_client, admin, topic_name, tmp_path):
    # The SASL listener really checks the password.
    wrong = KafkaAdmin(sasl_settings("not-the-password").model_copy(update={"kafka_request_timeout_s": 5.0}))
    with pytest.raises(KafkaAdminError):
        wrong.describe_cluster()
    wrong.close()

    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    sasl_admin = KafkaAdmin(sasl_settings(TEST_SASL_PASSWORD))
    assert sorted(sasl_admin.describe_cluster().broker_ids) == [1, 2, 3, 4]
    moves = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 4]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[4, 3]),
    ]
    migration = MigrationInput(
        cluster="sasltest", moves=moves, throttle_bytes_per_s=10_000_000, estimate=EstimateSettings(sample_s=2)
    )
    migration_id = f"migration-{uuid.uuid4().hex[:8]}"
    try:
        async with worker_for(real_client, activities_for(sasl_admin, tmp_path / "work")) as worker:
            result = await real_client.execute_workflow(
                MigrationWorkflow.run,
                migration,
                id=migration_id,
                task_queue=worker.task_queue,
                result_type=MigrationResult,
            )
    finally:
        sasl_admin.close()
    assert result.verified and result.moves_done == 2

    ids = [migration_id, *[move_workflow_id("sasltest", topic_name, p) for p in (0, 1)]]
    texts = []
    for workflow_id in ids:
        history = await real_client.get_workflow_handle(workflow_id).fetch_history()
        texts.append(history_text(json.loads(history.to_json())))
    assert all(len(t) > 1000 for t in texts)
    for workflow_id, text in zip(ids, texts, strict=False):
        assert TEST_SASL_PASSWORD not in text, workflow_id
        assert base64.b64encode(TEST_SASL_PASSWORD.encode()).decode() not in text, workflow_id
    # The scan does find a secret inside a payload: one planted in the migration's history is caught.
    planted = json.loads((await real_client.get_workflow_handle(migration_id).fetch_history()).to_json())
    payload = planted["events"][0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]
    payload["data"] = base64.b64encode(json.dumps({"password": TEST_SASL_PASSWORD}).encode()).decode()
    assert TEST_SASL_PASSWORD in history_text(planted)
    print(
        f"\nhistories of {len(ids)} workflows ({sum(len(t) for t in texts)} characters, payloads decoded) "
        f"scanned: no SASL password"
    )
