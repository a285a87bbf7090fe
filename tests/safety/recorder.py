"""A local HTTP server that records what it was sent, and a resolver that records what it was asked.

Both stand in for the outside world in the tests of outgoing URLs (a Pushgateway, a
webhook): the server listens on 127.0.0.1 on a free port and answers every PUT or POST
with 200; :func:`recording_resolver` wraps :func:`socket.getaddrinfo`, notes every name it
is asked for and refuses any but this host's own, so that no test ever sends a DNS query.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class Request:
    method: str
    path: str
    authorization: str | None

    @property
    def credentials(self) -> tuple[str, str] | None:
        """The (user, password) of a Basic ``Authorization`` header, decoded."""
        if self.authorization is None or not self.authorization.startswith("Basic "):
            return None
        user, _, password = base64.b64decode(self.authorization[6:]).decode("utf-8").partition(":")
        return user, password


@dataclass
class Recorder:
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return f"127.0.0.1:{self.port}"


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or 0)
            self.rfile.read(length)
            with recorder.lock:
                recorder.requests.append(Request(self.command, self.path, self.headers.get("Authorization")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@contextlib.contextmanager
def recording_server() -> Iterator[Recorder]:
    """A :class:`Recorder` listening on 127.0.0.1 until the block ends."""
    recorder = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = True
    recorder.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextlib.contextmanager
def recording_resolver() -> Iterator[list[str]]:
    """Every host name given to :func:`socket.getaddrinfo` in the block; names other than
    this host's own are refused (``socket.gaierror``), never looked up."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        asked.append(name)
        if name not in LOCAL_NAMES:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    with mock.patch("socket.getaddrinfo", getaddrinfo):
        yield asked
