"""The secured sandbox (``secure``): Kafka as production runs it.

- Clients reach each broker on its port (port_base+N-1) over SASL_SSL only, as SCRAM-SHA-512 users: ``admin`` (a
  super user, for the sandbox's own reads and a test's setup) and ``drover``, with exactly the ACLs that
  docs/operations.md lists as Drover's minimum (``drover.adapters.kafka_acls.REQUIRED``).
- The brokers and the controller talk to each other as the super user ``broker`` (SASL/PLAIN on loopback; KRaft's
  controller listener takes no SCRAM); brokers on port_base+50+N-1.
- KRaft's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: what is not granted is refused.
- A CA and the brokers' certificate (for 127.0.0.1 and localhost) are made with openssl at the first start, and the
  users' passwords drawn then, in ``<state>/secure``; beside them the client properties files that Kafka's tools
  (``--command-config``) and Drover (``DROVER_KAFKA_PROPERTIES``) take: ``admin.properties``, ``drover.properties``.
"""

import json
import secrets
import shutil
import subprocess
from pathlib import Path

from drover.adapters.kafka_acls import REQUIRED
from drover.sandbox.settings import SandboxError

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = ("admin", "drover")


def folder(state: Path) -> Path:
    return state / "secure"


def properties_path(state: Path, user: str) -> Path:
    """The client properties file of ``user`` (admin or drover)."""
    return folder(state) / f"{user}.properties"


def passwords(state: Path) -> dict[str, str]:
    """The passwords of broker, admin and drover: drawn once, kept in the state folder (readable by its owner only)."""
    path = folder(state) / "passwords.json"
    if path.exists():
        return json.loads(path.read_text())
    folder(state).mkdir(parents=True, exist_ok=True, mode=0o700)
    drawn = {user: secrets.token_urlsafe(18) for user in ("broker", *USERS)}
    path.touch(mode=0o600)
    path.write_text(json.dumps(drawn))
    return drawn


def make_material(state: Path) -> None:
    """The CA, the brokers' key and certificate, and the users' properties files, once."""
    where = folder(state)
    keystore = where / "broker-keystore.pem"
    if not keystore.exists():
        _certificates(where)
    words = passwords(state)
    for user in USERS:
        path = properties_path(state, user)
        path.touch(mode=0o600)
        path.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            f'sasl.jaas.config={SCRAM} required username="{user}" password="{words[user]}";\n'
            f"ssl.truststore.location={where / 'ca.pem'}\n"
            "ssl.truststore.type=PEM\n"
        )


def _certificates(where: Path) -> None:
    openssl = shutil.which("openssl")
    if not openssl:
        raise SandboxError("openssl is not installed; the secured sandbox makes its certificates with it")
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    (where / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=Drover sandbox CA"]
        + ["-keyout", "ca.key", "-out", "ca.pem"],
        [
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
        ],
        ["x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "3650"]
        + ["-extfile", "san.cnf", "-out", "broker.crt"],
    ]
    for step in steps:
        done = subprocess.run([openssl, *step], cwd=where, capture_output=True, text=True)
        if done.returncode != 0:
            raise SandboxError(f"openssl {step[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    # Kafka's PEM key store: the (unencrypted PKCS#8) key, then the certificate.
    keystore = where / "broker-keystore.pem"
    keystore.touch(mode=0o600)
    keystore.write_text((where / "broker.key").read_text() + (where / "broker.crt").read_text())


def controller_config(state: Path) -> dict[str, object]:
    """The controller's settings beside its listener: SASL/PLAIN for the brokers, the authorizer."""
    broker = passwords(state)["broker"]
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _plain_jaas(broker),
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:broker;User:admin",
    }


def broker_listeners(client_port: int, internal_port: int) -> str:
    """SASL_SSL for clients, BROKER (SASL/PLAIN) between the brokers."""
    return f"SASL_SSL://127.0.0.1:{client_port},BROKER://127.0.0.1:{internal_port}"


def broker_config(state: Path) -> dict[str, object]:
    """A broker's security beside its listeners: SASL_SSL with SCRAM for clients, SASL/PLAIN between the nodes."""
    where = folder(state)
    return controller_config(state) | {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,BROKER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.broker.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.broker.plain.sasl.jaas.config": _plain_jaas(passwords(state)["broker"]),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": where / "broker-keystore.pem",
    }


def _plain_jaas(password: str) -> str:
    return f'{PLAIN} required username="broker" password="{password}" user_broker="{password}";'


def scram_users(state: Path) -> list[str]:
    """``kafka-storage format`` arguments that create the SCRAM users in the cluster's first metadata."""
    words = passwords(state)
    return [a for user in USERS for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={words[user]}]")]


def drover_binding(resource: str, op: str):
    """The ACL that grants User:drover ``op`` on ``resource`` (Cluster, or every topic), as REQUIRED names them."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    cluster = resource == "Cluster"
    return AclBinding(
        ResourceType.BROKER if cluster else ResourceType.TOPIC,
        "kafka-cluster" if cluster else "*",
        ResourcePatternType.LITERAL,
        "User:drover",
        "*",
        AclOperation[op],
        AclPermissionType.ALLOW,
    )


def grant_drover(admin_config: dict) -> None:
    """Drover's minimum ACLs (docs/operations.md) for User:drover, as the admin: creating one that exists is a
    no-op."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient(admin_config)
    bindings = [drover_binding(resource, op) for resource, op, _ in REQUIRED]
    for binding, future in client.create_acls(bindings, request_timeout=15).items():
        try:
            future.result(timeout=20)
        except Exception as e:  # noqa: BLE001 - any failure stops the start with Kafka's words
            raise SandboxError(f"granting Drover's ACL {binding} failed: {e}") from None
