"""The HTTP plumbing of the fake servers: the fake Kubernetes API server (`fakekube`), the
fake Compute API of the `gce` provider, the fake ARM of the `azure` provider, and the proxy
in front of moto of the `aws` provider's tests. Each fake keeps its own routing, state,
request log and error bodies; what they share is here:

- `FakeHttpServer`: the base of a fake served on 127.0.0.1 at a free port, by a daemon
  thread: `start`, `stop`, the with-statement and `url`. A subclass gives its handler class
  (`handler()`).
- `LocalServer`: that server and its thread, for a fake that is no `FakeHttpServer`
  subclass (the aws proxy). It keeps the open connections: `stop` closes them, so no
  keep-alive or watch connection outlives the server.
- `FakeHttpHandler`: HTTP/1.1 with keep-alive and no Nagle delay, no log lines on stderr,
  the request body (by Content-Length, or chunked), replies with a length, and every method
  routed to `serve(method)`.

A client that drops its connection (pooled keep-alive connections at exit, a timeout, a
watch it stops reading) prints nothing; any other exception in a handler still prints its
traceback: it is a bug of the fake.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# A client closing or resetting its connection: what HTTP clients do with idle keep-alive
# connections (urllib3's pool) and with watches they stop reading. Not a server error.
CLIENT_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class _QuietServer(ThreadingHTTPServer):
    """The threaded server, quiet when a client drops its connection, keeping the open ones.

    `socketserver` prints a traceback to stderr for any exception a handler lets escape;
    dropped connections are normal client behaviour and pass silently.
    """

    daemon_threads = True
    block_on_close = False

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], CLIENT_GONE):
            # Not even logged: it happens at the end of most tests, after their output is
            # captured, and would land in the middle of the test run's report.
            return
        super().handle_error(request, client_address)


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 at a free port, serving `handler` from a daemon
    thread named `name` from construction until `stop()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str = "fake-http-server") -> None:
        self._httpd = _QuietServer(handler)
        # A short poll interval: `stop()` returns within it (tests start and stop thousands).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True, name=name
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open_connections(self) -> int:
        """How many client connections a handler still serves."""
        with self._httpd.lock:
            return len(self._httpd.connections)

    def stop(self) -> None:
        """Stop accepting, close the connections still open (their handlers end), release
        the port and wait for the serving thread."""
        self._httpd.shutdown()
        with self._httpd.lock:
            connections = list(self._httpd.connections)
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(timeout=5)


class FakeHttpServer:
    """The base of a fake served over HTTP: `with Fake() as fake:` starts it on a free port
    of 127.0.0.1 (`fake.url`) and stops it on exit. A subclass returns its handler class
    from `handler()`, and may extend `start` and `stop` (calling these)."""

    # The name of the serving thread.
    thread_name = "fake-http-server"
    _local: LocalServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def started(self) -> bool:
        return self._local is not None

    def start(self) -> Self:
        """Start serving (a started fake stays as it is)."""
        if self._local is None:
            self._local = LocalServer(self.handler(), name=self.thread_name)
        return self

    def stop(self) -> None:
        """Stop serving (a stopped fake stays as it is)."""
        local, self._local = self._local, None
        if local is not None:
            local.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        if self._local is None:
            raise RuntimeError(f"{type(self).__name__} is not started: use it as a context manager")
        return self._local.url

    def open_connections(self) -> int:
        """How many client connections the server still serves (0 when stopped)."""
        return self._local.open_connections() if self._local is not None else 0


class FakeHttpHandler(BaseHTTPRequestHandler):
    """The request handler of a fake: a subclass implements `serve(method)`, reading the
    request with `read_body` and answering with `send_body` or `send_json`."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: with Nagle's algorithm, the body waits
    # for the client's delayed ACK (40 ms on Linux) on every keep-alive request.
    disable_nagle_algorithm = True
    server: _QuietServer

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        # The fakes record the requests they care about; stderr stays quiet.
        return

    def serve(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self.serve("GET")

    def do_POST(self) -> None:
        self.serve("POST")

    def do_PUT(self) -> None:
        self.serve("PUT")

    def do_PATCH(self) -> None:
        self.serve("PATCH")

    def do_DELETE(self) -> None:
        self.serve("DELETE")

    def read_body(self) -> bytes:
        """The request's body: chunked, or as long as its Content-Length (none: empty)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_body(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer with `status`, `data` of that content type (and its length), and `headers`."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_json(
        self,
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
        *,
        content_type: str = "application/json",
    ) -> None:
        """Answer with `payload` as JSON."""
        self.send_body(status, json.dumps(payload).encode(), content_type, headers)
