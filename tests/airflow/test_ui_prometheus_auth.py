"""The tab's calls from a Prometheus that wants credentials, or TLS with a CA of its own.

A real HTTP server on 127.0.0.1 stands in for a Prometheus behind an authenticating proxy (as
Grafana's data source meets one): it answers ``POST /api/v1/query`` with a vector only to the
bearer token or basic authentication it expects, and ``401`` otherwise; over TLS with a server
certificate signed by a CA made in the test (``cryptography``). The tab's query (through
``Sources``, as the route calls it) succeeds only with the
``ui_prometheus_*`` options set, and a bad value is refused naming the option.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from store_metrics import logs
from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.errors import ConfigError
from store_metrics.ui.sources import Sources

TOKEN = "tok-3f9a.Zk"
HOST = "127.0.0.1"
USER, PASSWORD = "airflow-ui", "pa:ss wörd"
SAMPLE = {"metric": {"task_id": "load", "store": "task", "outcome": "write"}, "value": [1765000000, "3"]}


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


class Guarded(ThreadingHTTPServer):
    """Answers queries only to ``expected`` (the whole ``Authorization`` header); keeps what it got."""

    daemon_threads = True

    def __init__(self, expected: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.expected = expected
        self.seen: list[str | None] = []
        #: Answer every query with a redirect there (another server).
        self.redirect_to = ""

    @property
    def url(self) -> str:
        scheme = "https" if isinstance(self.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Guarded

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        got = self.headers.get("Authorization")
        self.server.seen.append(got)
        if self.server.redirect_to:
            self.send_response(307)
            self.send_header("Location", f"{self.server.redirect_to}/api/v1/query")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if got != self.server.expected:
            body, status = b'{"status":"error","error":"unauthorized"}', 401
        else:
            result = {"resultType": "vector", "result": [SAMPLE]}
            body, status = json.dumps({"status": "success", "data": result}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(server: Guarded) -> Iterator[Guarded]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def bearer() -> Iterator[Guarded]:
    yield from serve(Guarded(f"Bearer {TOKEN}"))


@pytest.fixture
def basic() -> Iterator[Guarded]:
    pair = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    yield from serve(Guarded(f"Basic {pair}"))


@pytest.fixture(autouse=True)
def said_afresh() -> Iterator[None]:
    logs.forget("ui:")
    yield
    logs.forget("ui:")


def secret(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return str(path)


def calls_of(options: OptionValues) -> tuple[object, str]:
    """What the tab's calls route reads for DAG ``orders`` over 1h: (per task, problem)."""
    answer = Sources(options).calls("orders", "1h")
    assert answer is not None
    return (answer.value.tasks if answer.value else None), answer.problem


READ = {"load": {"task_state_store.write": 3.0}}


def test_the_tab_reads_a_prometheus_that_wants_a_bearer_token_only_with_the_tokens_file(
    bearer: Guarded, tmp_path: Path
) -> None:
    assert calls_of(settings(ui_prometheus_url=bearer.url)) == (
        None,
        "Prometheus refused the credentials (HTTP 401)",
    )
    token_file = secret(tmp_path, "token", TOKEN + "\n")
    options = settings(ui_prometheus_url=bearer.url, ui_prometheus_bearer_token_file=token_file)
    assert calls_of(options) == (READ, "")
    assert bearer.seen == [None, f"Bearer {TOKEN}"]  # the token's file without its line end

    Path(token_file).write_text("rotated\n")  # read at each query: a rotated token is sent as it is
    assert calls_of(options) == (None, "Prometheus refused the credentials (HTTP 401)")
    assert bearer.seen[-1] == "Bearer rotated"


def test_the_tab_reads_a_prometheus_behind_basic_authentication(basic: Guarded, tmp_path: Path) -> None:
    right = settings(
        ui_prometheus_url=basic.url,
        ui_prometheus_basic_auth_user=USER,
        ui_prometheus_basic_auth_password_file=secret(tmp_path, "password", PASSWORD),
    )
    wrong = settings(
        ui_prometheus_url=basic.url,
        ui_prometheus_basic_auth_user=USER,
        ui_prometheus_basic_auth_password_file=secret(tmp_path, "old-password", "old"),
    )
    assert calls_of(right) == (READ, "")
    assert calls_of(wrong) == (None, "Prometheus refused the credentials (HTTP 401)")
    assert calls_of(settings(ui_prometheus_url=basic.url))[0] is None


def test_an_unreadable_credentials_file_is_named_on_the_page_and_its_path_only_in_the_log(
    bearer: Guarded, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-token")
    shown = calls_of(settings(ui_prometheus_url=bearer.url, ui_prometheus_bearer_token_file=missing))
    assert shown == (None, "the file of [store_metrics] ui_prometheus_bearer_token_file could not be read")
    assert bearer.seen == []  # nothing sent without the credentials


@pytest.fixture
def elsewhere() -> Iterator[Guarded]:
    yield from serve(Guarded("anything"))


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(
    bearer: Guarded, elsewhere: Guarded, tmp_path: Path
) -> None:
    bearer.redirect_to = elsewhere.url
    token = secret(tmp_path, "token", TOKEN)
    options = settings(ui_prometheus_url=bearer.url, ui_prometheus_bearer_token_file=token)
    assert calls_of(options) == (None, "Prometheus refused the query (HTTP 307)")
    assert elsewhere.seen == []


# -- TLS with a CA of the deployment's own ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 it signed: (ca.pem, server.pem, server.key)."""
    crypto = pytest.importorskip("cryptography")
    del crypto
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = tmp_path_factory.mktemp("pki")
    now = dt.datetime.now(dt.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("store-metrics test CA"))
        .issuer_name(name("store-metrics test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("prometheus"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = out / "ca.pem", out / "server.pem", out / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.fixture
def over_tls(pki: tuple[Path, Path, Path]) -> Iterator[Guarded]:
    server = Guarded(f"Bearer {TOKEN}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki[1], pki[2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    yield from serve(server)


def test_the_tab_reads_a_prometheus_over_tls_with_the_deployments_own_ca(
    over_tls: Guarded, pki: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    token = secret(tmp_path, "token", TOKEN)
    base = {"ui_prometheus_url": over_tls.url, "ui_prometheus_bearer_token_file": token}
    assert over_tls.url.startswith("https://127.0.0.1:")

    untrusted = calls_of(settings(**base))
    assert untrusted == (
        None,
        "Prometheus's TLS certificate could not be verified (see ui_prometheus_ca_file)",
    )
    assert calls_of(settings(**base, ui_prometheus_ca_file=str(pki[0]))) == (READ, "")
    assert calls_of(settings(**base, ui_prometheus_tls_skip_verify="true")) == (READ, "")
    assert over_tls.seen == [f"Bearer {TOKEN}"] * 2  # nothing sent before the certificate was trusted

    not_a_ca = settings(**base, ui_prometheus_ca_file=str(tmp_path / "token"))
    assert calls_of(not_a_ca) == (None, "the file of [store_metrics] ui_prometheus_ca_file could not be read")


# -- bad values -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "option", "accepted"),
    [
        (
            {"ui_prometheus_bearer_token_file": "token.txt"},
            "ui_prometheus_bearer_token_file",
            "an absolute path",
        ),
        ({"ui_prometheus_ca_file": "certs/ca.pem"}, "ui_prometheus_ca_file", "an absolute path"),
        ({"ui_prometheus_tls_skip_verify": "maybe"}, "ui_prometheus_tls_skip_verify", "true"),
        (
            {"ui_prometheus_basic_auth_user": "airflow-ui"},
            "ui_prometheus_basic_auth_password_file",
            "when ui_prometheus_basic_auth_user is set",
        ),
        (
            {"ui_prometheus_basic_auth_password_file": "/run/secrets/password"},
            "ui_prometheus_basic_auth_user",
            "a user name",
        ),
        (
            {
                "ui_prometheus_bearer_token_file": "/run/secrets/token",
                "ui_prometheus_basic_auth_user": "u",
                "ui_prometheus_basic_auth_password_file": "/run/secrets/password",
            },
            "ui_prometheus_bearer_token_file",
            "one way to authenticate",
        ),
    ],
)
def test_a_bad_prometheus_auth_option_is_refused_naming_it(
    env: dict[str, str], option: str, accepted: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        settings(**env)
    assert refused.value.option == option
    assert str(refused.value).startswith(f"[store_metrics] {option} = ")
    assert accepted in refused.value.accepted
