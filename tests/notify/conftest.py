"""Local stand-ins for the notification targets: an HTTP receiver, a silent server, an SMTP server.

Everything listens on 127.0.0.1 on a free port and records what it received. The SMTP
server offers STARTTLS with a self-signed certificate made here (``cryptography``) and
requires AUTH over TLS; the client trusts that certificate through ``smtp_cafile``, so
verification stays on.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from perfgate.core.codec import run_from_dict
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.policy import Policy

SECRET_TOKEN = "XSECRETTOKEN7f3a9c"  # stands in for the secret part of a Slack webhook URL
SMTP_USER = "perfgate-bot"
SMTP_PASSWORD = "hunter2-PASSWORD-9b1e"

HOSTILE = [
    "<!channel> training_step_time_ms",
    "<script>alert('x')</script>_ms",
    "*bold* _it_ `code` [click](http://evil.example)",
    "<http://evil.example|click here>",
    "line\nbreak & ampersand",
]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


# --- HTTP --------------------------------------------------------------------------------------


@dataclass
class Receiver:
    """A webhook receiver answering with the scripted statuses in turn (the last one repeats)."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            n = len(self.requests)
        return self.statuses[min(n, len(self.statuses) - 1)]

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(r["body"]) for r in self.requests]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status = receiver.next_status()
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length).decode("utf-8")
            with receiver.lock:
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status < 400 else b"no")

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    rec.url = f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/{SECRET_TOKEN}"
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@dataclass
class Silent:
    """Accepts connections and never answers."""

    url: str
    connections: list[socket.socket]


@pytest.fixture
def silent_server() -> Iterator[Silent]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        yield Silent(url=f"http://127.0.0.1:{port}/hook/{SECRET_TOKEN}", connections=held)
    finally:
        stop.set()
        thread.join(10)
        for conn in held:
            conn.close()
        listener.close()


@pytest.fixture
def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    return f"http://127.0.0.1:{port}/hook/{SECRET_TOKEN}"


# --- SMTP --------------------------------------------------------------------------------------


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "perfgate test SMTP")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Mailbox:
    host: str
    port: int
    cafile: Path
    messages: list[dict[str, Any]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    rcpt_status: list[str] = field(default_factory=list)  # scripted RCPT replies, consumed in turn


@pytest.fixture
def smtp_server(tmp_path) -> Iterator[Mailbox]:
    try:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword
    except ImportError:
        if in_ci():
            pytest.fail("aiosmtpd is required in CI (pip install -e .[dev])")
        pytest.skip("aiosmtpd is not installed")
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Mailbox(host="127.0.0.1", port=_free_port(), cafile=cert)

    class Handler:
        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            if box.rcpt_status:
                return box.rcpt_status.pop(0)
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            box.messages.append(
                {
                    "from": envelope.mail_from,
                    "to": list(envelope.rcpt_tos),
                    "data": envelope.content.decode("utf-8", "replace"),
                    "tls": session.ssl is not None,
                }
            )
            return "250 Message accepted"

    def authenticator(server, session, envelope, mechanism, auth_data):
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        user, password = auth_data.login.decode(), auth_data.password.decode()
        box.logins.append((user, password))
        # handled=False: aiosmtpd answers 535 itself on failure
        return AuthResult(success=(user, password) == (SMTP_USER, SMTP_PASSWORD), handled=False)

    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=box.port,
        tls_context=context,
        require_starttls=True,
        authenticator=authenticator,
        auth_required=True,
        auth_require_tls=True,
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


# --- check results -----------------------------------------------------------------------------


def _samples(median: float, n: int, spread: float = 0.01) -> list[float]:
    return [median * (1 + spread * ((i % 7) - 3) / 3) for i in range(n)]


def make_result(
    *,
    regress: float = 1.3,
    names: list[str] | None = None,
    improve: bool = False,
    commit: str = "def4567890abcdef",
) -> CheckResult:
    """A check of two 30-sample runs: every metric in ``names`` scaled by ``regress`` (1.0: unchanged)."""
    names = names or ["training_step_time_ms", *HOSTILE]
    base, cur = {}, {}
    for i, name in enumerate(names):
        med = 10.0 + i
        factor = 0.7 if improve and i == 0 else regress
        base[name] = {"unit": "ms", "direction": "lower_is_better", "samples": _samples(med, 30)}
        cur[name] = {"unit": "ms", "direction": "lower_is_better", "samples": _samples(med * factor, 30)}

    def doc(metrics: dict, c: str) -> dict:
        return {
            "schema_version": 1,
            "model": "dqn",
            "git": {"commit": c, "branch": "feature/<b>x</b>"},
            "metrics": metrics,
        }

    baseline = run_from_dict(doc(base, "abc1234"))
    current = run_from_dict(doc(cur, commit))
    return compare_runs(baseline, current, Policy.quiet(), baseline_source="file `base.json`")
