"""Kafka client properties files (as Kafka's tools take with --command-config) turned into both libraries' settings;
what neither takes is refused in one line naming it. The SASL listener of the real cluster: tests/integration."""

import json
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from drover.adapters.kafka_admin import client_configs
from drover.adapters.kafka_properties import ClientCredentials, KafkaPropertiesError, client_properties, read_properties
from drover.settings import Settings, SettingsError, load_settings


def props(tmp_path, text: str):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_java_properties_syntax(tmp_path):
    path = props(
        tmp_path,
        "# a comment\n! another\n  security.protocol = SASL_SSL\nsasl.mechanism:PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="ops" \\\n    password="p=w \\"q\\"";\n\nssl.endpoint.identification.algorithm=\n',
    )
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="ops" '
        'password="p=w \\"q\\"";',
        "ssl.endpoint.identification.algorithm": "",
    }
    ck, kp = client_properties(path)
    assert ck == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "ops",
        "sasl.password": 'p=w "q"',
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert kp == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "ops",
        "sasl_plain_password": 'p=w "q"',
        "ssl_check_hostname": False,
    }


def test_scram_and_mutual_tls_in_pem(tmp_path):
    path = props(
        tmp_path,
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=ops "
        'password="s3cret";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/etc/kafka/client.pem\nssl.key.password=kp\n",
    )
    ck, kp = client_properties(path)
    assert ck == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ops",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.pem",
        "ssl.key.password": "kp",
    }
    assert kp == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "ops",
        "sasl_plain_password": "s3cret",
        "ssl_cafile": "/etc/kafka/ca.pem",
        "ssl_certfile": "/etc/kafka/client.pem",
        "ssl_keyfile": "/etc/kafka/client.pem",
        "ssl_password": "kp",
    }


def test_the_file_wins_over_the_drover_settings_and_adds_to_them(tmp_path):
    path = props(tmp_path, "security.protocol=SSL\nssl.ca.location=/ca.pem\n")
    settings = Settings(kafka_bootstrap="b:9093", kafka_request_timeout_s=5, kafka_properties=path)
    ck, kp = client_configs(settings)
    assert (
        ck["bootstrap.servers"] == "b:9093" and ck["security.protocol"] == "SSL" and ck["ssl.ca.location"] == "/ca.pem"
    )
    assert kp["request_timeout_ms"] == 5000 and kp["security_protocol"] == "SSL" and kp["ssl_cafile"] == "/ca.pem"


class TokenEndpoint(BaseHTTPRequestHandler):
    forms: list[dict] = []

    def do_POST(self):  # noqa: N802 (the http.server interface)
        length = int(self.headers["Content-Length"])
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        TokenEndpoint.forms.append(form)
        ok = form.get("client_secret") == "shh"
        body = {"access_token": f"token-{len(TokenEndpoint.forms)}", "expires_in": 3600} if ok else {"error": "nope"}
        data = json.dumps(body).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def token_endpoint():
    server = HTTPServer(("127.0.0.1", 0), TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    TokenEndpoint.forms = []
    yield f"http://127.0.0.1:{server.server_address[1]}/token"
    server.shutdown()


def test_oauthbearer_client_credentials_for_both_libraries(tmp_path, token_endpoint):
    path = props(
        tmp_path,
        f"security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token.endpoint.url={token_endpoint}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="drover" clientSecret="shh" scope="kafka";\n',
    )
    ck, kp = client_properties(path)
    assert ck == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint,
        "sasl.oauthbearer.client.id": "drover",
        "sasl.oauthbearer.client.secret": "shh",
        "sasl.oauthbearer.scope": "kafka",
    }
    provider = kp["sasl_oauth_token_provider"]
    assert isinstance(provider, ClientCredentials) and "shh" not in repr(provider)
    # kafka-python's provider: the client-credentials grant, and the token kept until it nears its expiry.
    assert provider.token() == "token-1" and provider.token() == "token-1"
    assert TokenEndpoint.forms == [
        {"grant_type": "client_credentials", "client_id": "drover", "client_secret": "shh", "scope": "kafka"}
    ]
    wrong = ClientCredentials(token_endpoint, "drover", "not-it")
    with pytest.raises(KafkaPropertiesError, match="no OAuth token from http://127.0.0.1:.*/token"):
        wrong.token()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "ssl.truststore.location=/ts.jks\nssl.truststore.password=x\n",
            "is a JKS store, which neither client library",
        ),
        ("ssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n", "kafka-python reads PEM only"),
        ("sasl.mechanism=GSSAPI\n", "sasl.mechanism GSSAPI is not supported"),
        ("sasl.mechanism=PLAIN\n", "needs a username and a password"),
        ("sasl.jaas.config=x required;\n", "without sasl.mechanism"),
        ("security.protocol=SASL_PLAINTEXT\nbatch.size=1\nlinger.ms=2\n", "not supported: batch.size, linger.ms"),
        ("security.protocol=TLS\n", "security.protocol 'TLS' is not"),
        ("sasl.mechanism=OAUTHBEARER\n", "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url"),
    ],
)
def test_what_neither_library_takes_is_refused_by_name(tmp_path, text, says):
    with pytest.raises(KafkaPropertiesError, match=says):
        client_properties(props(tmp_path, text))


def test_a_bad_file_is_a_one_line_settings_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DROVER_KAFKA_PROPERTIES", str(tmp_path / "missing.properties"))
    with pytest.raises(SettingsError) as e:
        load_settings()
    assert str(e.value).startswith("bad setting: DROVER_KAFKA_PROPERTIES")
    assert "No such file or directory" in str(e.value) and "\n" not in str(e.value)


def test_command_config_on_the_command_line(tmp_path):
    bad = props(tmp_path, "sasl.mechanism=GSSAPI\n")
    result = subprocess.run(
        [sys.executable, "-m", "drover.cli.app", "--command-config", str(bad), "list"], capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: bad setting: --command-config: sasl.mechanism GSSAPI is not supported; Drover takes "
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
    ]
