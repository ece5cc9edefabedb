"""A Kafka client properties file, as Kafka's own tools take it (``--command-config admin.properties``), turned into
the configurations of Drover's two client libraries: librdkafka (confluent-kafka) and kafka-python. It takes what
both of them support (the README's table says what each library supports):

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL;
- ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with ``sasl.jaas.config`` (``PlainLoginModule`` or
  ``ScramLoginModule`` with ``username`` and ``password``);
- ``sasl.mechanism=OAUTHBEARER`` by OIDC client credentials: ``sasl.oauthbearer.token.endpoint.url`` and
  ``OAuthBearerLoginModule`` with ``clientId``, ``clientSecret`` and ``scope`` (librdkafka's ``oidc`` method;
  for kafka-python, ``drover.adapters.kafka_properties.ClientCredentials``, made from the ``OAuthClient`` here);
- TLS in PEM: ``ssl.truststore.location`` with ``ssl.truststore.type=PEM``, ``ssl.keystore.location`` with
  ``ssl.keystore.type=PEM`` (key and certificate in one file) and ``ssl.key.password``; librdkafka's own names
  ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location`` too;
  ``ssl.endpoint.identification.algorithm`` https or empty.

Refused with the reason: JKS stores (neither library reads them), PKCS12 key stores (kafka-python does not),
GSSAPI (neither has Kerberos here), and any other setting by its name, so that none is silently dropped."""

import re
from dataclasses import dataclass
from pathlib import Path


class KafkaPropertiesError(ValueError):
    """The file cannot be read or names something Drover cannot pass to both libraries; the message says which."""


MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file: ``key=value`` or ``key: value`` lines, ``#`` and ``!`` comments, ``\\`` at the end of
    a line continuing it."""
    try:
        text = path.read_text()
    except OSError as e:
        raise KafkaPropertiesError(f"{path}: {e.strerror}") from None
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.lstrip() if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*(?:[=:]\s*|\s+|$)(.*)$", line)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        props[key] = value
    return props


def jaas_options(config: str) -> tuple[str, dict[str, str]]:
    """The login module's class name and its options, from ``sasl.jaas.config``."""
    m = _JAAS.match(config)
    if m is None:
        raise KafkaPropertiesError("sasl.jaas.config does not read as 'LoginModule required key=\"value\" ...;'")
    options = {k: quoted if quoted is not None and bare is None else bare for k, quoted, bare in _options(m.group(3))}
    return m.group(1).rsplit(".", 1)[-1], options


def _options(text: str):
    for m in _JAAS_OPTION.finditer(text):
        quoted = m.group(2).replace('\\"', '"').replace("\\\\", "\\") if m.group(2) is not None else None
        yield m.group(1), quoted, None if quoted is not None else m.group(3)


@dataclass(frozen=True)
class OAuthClient:
    """OIDC client credentials for kafka-python's OAUTHBEARER; the Kafka adapter makes its token provider of them."""

    endpoint: str
    client_id: str
    secret: str
    scope: str | None = None

    def __repr__(self) -> str:  # never the secret
        return f"OAuthClient({self.endpoint!r}, {self.client_id!r})"


def parse_client_properties(path: Path) -> tuple[dict, dict]:
    """The librdkafka and kafka-python settings the file asks for (added over Drover's own); kafka-python's OAuth
    token provider as its ``OAuthClient``."""
    props = read_properties(path)
    ck: dict = {}
    kp: dict = {}
    take = dict(props)

    def pop(key: str) -> str | None:
        return take.pop(key, None)

    protocol = pop("security.protocol")
    if protocol is not None:
        if protocol.upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise KafkaPropertiesError(
                f"security.protocol {protocol!r} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )
        ck["security.protocol"] = kp["security_protocol"] = protocol.upper()
    _sasl(pop, ck, kp)
    _ssl(pop, ck, kp)
    if take:
        raise KafkaPropertiesError(
            f"not supported: {', '.join(sorted(take))} (Drover takes security.protocol, sasl.* and ssl.* settings "
            f"that both of its client libraries understand)"
        )
    return ck, kp


def _sasl(pop, ck: dict, kp: dict) -> None:
    mechanism = pop("sasl.mechanism")
    jaas = pop("sasl.jaas.config")
    username, password = pop("sasl.username"), pop("sasl.password")
    endpoint = pop("sasl.oauthbearer.token.endpoint.url")
    if mechanism is None:
        if jaas or username or endpoint:
            raise KafkaPropertiesError("SASL credentials are given without sasl.mechanism")
        return
    if mechanism not in MECHANISMS:
        raise KafkaPropertiesError(f"sasl.mechanism {mechanism} is not supported; Drover takes {', '.join(MECHANISMS)}")
    ck["sasl.mechanism"] = kp["sasl_mechanism"] = mechanism
    module, options = jaas_options(jaas) if jaas else ("", {})
    if mechanism == "OAUTHBEARER":
        if module and module != "OAuthBearerLoginModule":
            raise KafkaPropertiesError(f"sasl.mechanism OAUTHBEARER takes OAuthBearerLoginModule, not {module}")
        client_id, secret = options.get("clientId"), options.get("clientSecret")
        if not (endpoint and client_id and secret):
            raise KafkaPropertiesError(
                "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url and clientId and clientSecret in "
                "sasl.jaas.config (OIDC client credentials)"
            )
        scope = options.get("scope")
        ck |= {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": secret,
        } | ({"sasl.oauthbearer.scope": scope} if scope else {})
        kp["sasl_oauth_token_provider"] = OAuthClient(endpoint, client_id, secret, scope)
        return
    if module and module not in ("PlainLoginModule", "ScramLoginModule"):
        raise KafkaPropertiesError(
            f"sasl.mechanism {mechanism} takes PlainLoginModule or ScramLoginModule, not {module}"
        )
    username = options.get("username", username)
    password = options.get("password", password)
    if not username or password is None:
        raise KafkaPropertiesError(f"sasl.mechanism {mechanism} needs a username and a password (sasl.jaas.config)")
    ck |= {"sasl.username": username, "sasl.password": password}
    kp |= {"sasl_plain_username": username, "sasl_plain_password": password}


def _ssl(pop, ck: dict, kp: dict) -> None:
    trust, trust_type = pop("ssl.truststore.location"), (pop("ssl.truststore.type") or "JKS").upper()
    pop("ssl.truststore.password")  # a PEM trust store has none; JKS is refused below
    ca = pop("ssl.ca.location")
    if trust is not None:
        _pem_only(
            "ssl.truststore.location",
            trust,
            trust_type,
            ", which neither client library reads: give the CA certificates as PEM (ssl.truststore.type=PEM; "
            "keytool -exportcert -rfc writes them)",
        )
        ca = trust
    if ca is not None:
        ck["ssl.ca.location"] = kp["ssl_cafile"] = ca
    key_store, store_type = pop("ssl.keystore.location"), (pop("ssl.keystore.type") or "JKS").upper()
    store_password = pop("ssl.keystore.password")
    cert, key = pop("ssl.certificate.location"), pop("ssl.key.location")
    key_password = pop("ssl.key.password")
    if key_store is not None:
        _pem_only(
            "ssl.keystore.location",
            key_store,
            store_type,
            "; kafka-python reads PEM only: give the key and certificate as PEM (ssl.keystore.type=PEM, or "
            "ssl.certificate.location and ssl.key.location)",
        )
        cert, key = key_store, key or key_store
        key_password = key_password or store_password
    if cert is not None:
        ck["ssl.certificate.location"] = kp["ssl_certfile"] = cert
        ck["ssl.key.location"] = kp["ssl_keyfile"] = key or cert
    if key_password is not None:
        ck["ssl.key.password"] = kp["ssl_password"] = key_password
    check = pop("ssl.endpoint.identification.algorithm")
    if check is not None:
        if check.lower() not in ("", "https"):
            raise KafkaPropertiesError(f"ssl.endpoint.identification.algorithm is https or empty, not {check!r}")
        ck["ssl.endpoint.identification.algorithm"] = "https" if check else "none"
        kp["ssl_check_hostname"] = bool(check)


def _pem_only(setting: str, location: str, store_type: str, advice: str) -> None:
    """Refuse a key or trust store that is not PEM, saying which setting, file and type, and what to do instead."""
    if store_type != "PEM":
        raise KafkaPropertiesError(f"{setting} {location} is a {store_type} store{advice}")
