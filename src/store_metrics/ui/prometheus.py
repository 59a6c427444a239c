"""The Prometheus the State store views query: how to reach it (authentication, TLS) and what failed.

Only the standard library talks to it: an instant query, ``POST /api/v1/query``, within
``ui_timeout``. What Grafana's Prometheus data source and Prometheus's own ``http_config`` offer,
as ``[store_metrics]`` options:

* ``ui_prometheus_bearer_token_file``: ``Authorization: Bearer <the file's content>`` (Prometheus's
  ``authorization.credentials_file``);
* ``ui_prometheus_basic_auth_user`` and ``ui_prometheus_basic_auth_password_file``: HTTP basic
  authentication (Grafana's ``basicAuthUser``, Prometheus's ``basic_auth.password_file``);
* ``ui_prometheus_ca_file``: the CA certificates (PEM) an ``https://`` Prometheus's certificate is
  checked against, instead of the system's (Grafana's ``tlsCACert``, Prometheus's
  ``tls_config.ca_file``);
* ``ui_prometheus_tls_skip_verify``: no certificate check at all (Grafana's ``tlsSkipVerify``).

Secrets are read from files, never from the option itself (it would show in ``airflow config
list``), at every query: a rotated token (a Kubernetes projected one) is picked up without a restart.
Redirects are not followed (they would carry the credentials to wherever they point).

A failure is a ``PrometheusError``: its text names the kind of problem (what the pages show any
signed-in user: never a host, an address or the server's own words), ``PrometheusError.detail``
says everything (what the API server's log says).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

#: The kinds of problem, as the pages show them.
UNREACHABLE: Final = "Prometheus could not be reached"
TIMEOUT: Final = "Prometheus did not answer within ui_timeout"
UNTRUSTED: Final = "Prometheus's TLS certificate could not be verified (see ui_prometheus_ca_file)"
UNAUTHORIZED: Final = "Prometheus refused the credentials (HTTP {status})"
REFUSED: Final = "Prometheus refused the query (HTTP {status})"
BAD_ANSWER: Final = "Prometheus's answer was not a query result"
UNREADABLE: Final = "the file of [store_metrics] {option} could not be read"


class PrometheusError(Exception):
    """Prometheus could not be reached, or refused the query: ``str()`` is the kind of problem (for
    the pages), ``detail`` what exactly happened (for the log)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class Prometheus:
    """One Prometheus (or compatible) server, and how to reach it."""

    url: str
    timeout: float
    bearer_token_file: str = ""
    basic_auth_user: str = ""
    basic_auth_password_file: str = ""
    ca_file: str = ""
    tls_skip_verify: bool = False

    @classmethod
    def from_options(cls, options: Any) -> Prometheus:
        """From ``OptionValues`` (``ui_prometheus_*``, ``ui_timeout``)."""
        return cls(
            url=options.ui_prometheus_url,
            timeout=options.ui_timeout,
            bearer_token_file=options.ui_prometheus_bearer_token_file,
            basic_auth_user=options.ui_prometheus_basic_auth_user,
            basic_auth_password_file=options.ui_prometheus_basic_auth_password_file,
            ca_file=options.ui_prometheus_ca_file,
            tls_skip_verify=options.ui_prometheus_tls_skip_verify,
        )

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query at Prometheus's now: the samples of its vector result."""
        request = urllib.request.Request(
            f"{self.url}/api/v1/query",
            data=urllib.parse.urlencode({"query": expr}).encode(),
            headers={"Accept": "application/json", **self._authorization()},
        )
        opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=self._tls()))
        try:
            with opener.open(request, timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # Prometheus answers 400/422/503 with a JSON error
            shown = UNAUTHORIZED if exc.code in (401, 403) else REFUSED
            raise PrometheusError(
                shown.format(status=exc.code), f"HTTP {exc.code}: {_error_of(exc)}"
            ) from None
        except (OSError, ValueError) as exc:
            raise PrometheusError(_kind_of(exc), f"{type(exc).__name__}: {exc}") from None
        if (
            not isinstance(body, dict)
            or body.get("status") != "success"
            or body.get("data", {}).get("resultType") != "vector"
        ):
            error = body.get("error") if isinstance(body, dict) else None
            raise PrometheusError(BAD_ANSWER, str(error or body)[:300])
        return list(body["data"]["result"])

    def _authorization(self) -> dict[str, str]:
        if self.bearer_token_file:
            token = _secret(self.bearer_token_file, "ui_prometheus_bearer_token_file")
            return {"Authorization": f"Bearer {token}"}
        if self.basic_auth_user:
            password = _secret(self.basic_auth_password_file, "ui_prometheus_basic_auth_password_file")
            pair = base64.b64encode(f"{self.basic_auth_user}:{password}".encode()).decode("ascii")
            return {"Authorization": f"Basic {pair}"}
        return {}

    def _tls(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https://"):
            return None
        if self.tls_skip_verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        try:
            return ssl.create_default_context(cafile=self.ca_file or None)
        except (OSError, ssl.SSLError) as exc:
            option = "ui_prometheus_ca_file"
            raise PrometheusError(UNREADABLE.format(option=option), f"{option}: {exc}") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the HTTP status it is: the credentials never follow it elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _secret(path: str, option: str) -> str:
    """The file at ``path`` (a token or a password), without surrounding white space (as Prometheus
    reads its ``credentials_file`` and ``password_file``)."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except (OSError, ValueError) as exc:
        raise PrometheusError(UNREADABLE.format(option=option), f"{option}: {exc}") from None


def _kind_of(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return TIMEOUT
    if isinstance(reason, ssl.SSLCertVerificationError):
        return UNTRUSTED
    if isinstance(exc, ValueError):
        return BAD_ANSWER
    return UNREACHABLE


def _error_of(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("error", exc.reason))[:300]
    except (OSError, ValueError, AttributeError):
        return str(exc.reason)
