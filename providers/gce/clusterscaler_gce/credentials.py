"""Credentials for the Compute API clients."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog
from clusterscaler.api import ConfigurationError
from google.auth import credentials as gcred
from google.auth import default as auth_default
from google.auth import exceptions as auth_exc

from clusterscaler_gce.cloud_config import CloudConfig, fetch_alt_token

log = structlog.get_logger()

COMPUTE_SCOPE = "https://www.googleapis.com/auth/compute"


def build_credentials(config: CloudConfig) -> Any:
    """Anonymous for a plain-http loopback endpoint (an emulator), the alternative token source
    when `token-url` is set, Application Default Credentials otherwise (workload identity, the
    VM's service account, or a key file through GOOGLE_APPLICATION_CREDENTIALS)."""
    if config.anonymous:
        log.warning(
            "gce_anonymous_credentials",
            api_endpoint=config.api_endpoint,
            reason="plain http loopback endpoint: no credentials are sent",
        )
        return gcred.AnonymousCredentials()  # type: ignore[no-untyped-call]
    if config.token_url:
        return AltTokenCredentials(config.token_url, config.token_body)
    try:
        credentials, _ = auth_default(scopes=[COMPUTE_SCOPE])
    except auth_exc.DefaultCredentialsError as exc:
        raise ConfigurationError(
            f"gce provider: no Google credentials: {exc}; use workload identity, the VM's service "
            "account, or a key file through GOOGLE_APPLICATION_CREDENTIALS"
        ) from None
    return credentials


class AltTokenCredentials(gcred.Credentials):
    """Tokens from `token-url` (POST `token-body`, reply `{accessToken, expireTime}`), the
    alternative token source of the Kubernetes GCE cloud provider (GKE)."""

    def __init__(self, token_url: str, token_body: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._token_url = token_url
        self._token_body = token_body

    def refresh(self, request: object) -> None:
        token, expiry = fetch_alt_token(self._token_url, self._token_body)
        self.token = token
        self.expiry = parse_expiry(expiry)


def parse_expiry(text: str) -> datetime | None:
    """RFC 3339 -> naive UTC (google-auth compares expiry with a naive UTC clock)."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed
    return parsed.astimezone(UTC).replace(tzinfo=None)
