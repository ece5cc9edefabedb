"""The Kafka client properties file (``drover.settings.kafka_properties`` reads and checks it) as Drover's two client
libraries take it: for kafka-python's OAUTHBEARER, ``ClientCredentials``, a token provider by the OAuth 2
client-credentials grant (librdkafka does the same itself)."""

import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from kafka.net.sasl.oauth import AbstractTokenProvider

from drover.settings.kafka_properties import KafkaPropertiesError, OAuthClient, parse_client_properties, read_properties

__all__ = ["ClientCredentials", "KafkaPropertiesError", "client_properties", "read_properties"]

PROVIDER = "sasl_oauth_token_provider"


def client_properties(path: Path) -> tuple[dict, dict]:
    """The librdkafka and kafka-python settings the file asks for (added over Drover's own), ready for the clients."""
    ck, kp = parse_client_properties(path)
    oauth = kp.get(PROVIDER)
    if isinstance(oauth, OAuthClient):
        kp[PROVIDER] = ClientCredentials(oauth.endpoint, oauth.client_id, oauth.secret, oauth.scope)
    return ck, kp


class ClientCredentials(AbstractTokenProvider):
    """An OAuth 2 access token by the client-credentials grant, for kafka-python's OAUTHBEARER (librdkafka does the
    same itself): fetched when first needed and again a minute before it expires."""

    def __init__(self, endpoint: str, client_id: str, secret: str, scope: str | None = None, timeout_s: float = 10.0):
        super().__init__()
        self.endpoint, self.client_id, self.scope, self.timeout_s = endpoint, client_id, scope, timeout_s
        self._secret = secret
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the secret
        return f"ClientCredentials({self.endpoint!r}, {self.client_id!r})"

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() >= self._expires:
                self._token, lifetime = self._fetch()
                self._expires = time.monotonic() + max(lifetime - 60, lifetime / 2)
            return self._token

    def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", "client_id": self.client_id, "client_secret": self._secret}
        if self.scope:
            form["scope"] = self.scope
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = json.loads(response.read())
        except (OSError, ValueError) as e:
            raise KafkaPropertiesError(f"no OAuth token from {self.endpoint}: {e}") from None
        if "access_token" not in body:
            raise KafkaPropertiesError(f"no OAuth token from {self.endpoint}: {body.get('error', 'no access_token')}")
        return body["access_token"], float(body.get("expires_in", 3600))
