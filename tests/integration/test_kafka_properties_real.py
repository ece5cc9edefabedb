"""A Kafka client properties file (as Kafka's tools take with --command-config) on the SASL listener of the test
sandbox: SASL/PLAIN and SASL/SCRAM-SHA-512 (a user created through the admin API), each through both client
libraries (librdkafka describes the cluster, kafka-python lists reassignments and reads log dirs); a wrong password
is refused by both."""

import time

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_port import KafkaAdminError
from drover.settings import Settings
from tests.conftest import TEST_SANDBOX, TEST_SASL_PASSWORD

pytestmark = pytest.mark.integration

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def settings_from(tmp_path, mechanism: str, module: str, user: str, password: str) -> Settings:
    path = tmp_path / f"{mechanism}-{password}.properties"
    path.write_text(
        "# as for kafka-reassign-partitions --command-config\n"
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={module} required \\\n    username="{user}" \\\n    password="{password}";\n'
    )
    return Settings(
        cluster_name="proptest",
        kafka_bootstrap=TEST_SANDBOX.sasl_bootstrap,
        kafka_request_timeout_s=5.0,
        kafka_properties=path,
    )


def through_both_libraries(settings: Settings, topic: str) -> tuple[list[int], int]:
    admin = KafkaAdmin(settings)
    try:
        brokers = sorted(admin.describe_cluster().broker_ids)  # librdkafka
        admin.list_reassignments()  # kafka-python
        replicas = [s for s in admin.describe_log_dirs([1, 2]) if s.topic == topic]  # kafka-python
        return brokers, len(replicas)
    finally:
        admin.close()


def kafka_python_refuses(settings: Settings) -> None:
    admin = KafkaAdmin(settings)
    try:
        with pytest.raises(KafkaAdminError):
            admin.list_reassignments()
    finally:
        admin.close()


def test_plain_and_scram_from_a_properties_file_through_both_libraries(stack, admin, topic_name, tmp_path):
    admin.create_topic(topic_name, [[1, 2]])

    plain = settings_from(tmp_path, "PLAIN", PLAIN, "drover", TEST_SASL_PASSWORD)
    assert through_both_libraries(plain, topic_name) == ([1, 2, 3, 4], 2)
    wrong = settings_from(tmp_path, "PLAIN", PLAIN, "drover", "not-the-password")
    with pytest.raises(KafkaAdminError):
        through_both_libraries(wrong, topic_name)
    kafka_python_refuses(wrong)

    # A SCRAM user, created as an operator would, through the admin API on the plain listener.
    creator = AdminClient({"bootstrap.servers": TEST_SANDBOX.bootstrap})
    upsert = UserScramCredentialUpsertion("ops", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"ops-pw")
    for future in creator.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    scram = settings_from(tmp_path, "SCRAM-SHA-512", SCRAM, "ops", "ops-pw")
    deadline = time.monotonic() + 30
    while True:  # the credential reaches every broker with the metadata
        try:
            found = through_both_libraries(scram, topic_name)
            break
        except KafkaAdminError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    assert found == ([1, 2, 3, 4], 2)
    wrong = settings_from(tmp_path, "SCRAM-SHA-512", SCRAM, "ops", "not-ops-pw")
    with pytest.raises(KafkaAdminError):
        through_both_libraries(wrong, topic_name)
    kafka_python_refuses(wrong)
