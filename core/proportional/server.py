"""`/healthz` and `/last-poll` for the proportional controller's liveness probes.

`/healthz` answers 200 while the process serves HTTP. `/last-poll` answers 200 when the
last poll succeeded (or none ran yet) and 500 with the error otherwise, as upstream does.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

log = structlog.get_logger()


class PollHealth:
    """Last poll error and the count of consecutive failed polls (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_error: str | None = None
        self._failures = 0

    def record(self, error: BaseException | None) -> int:
        """Record a poll's outcome; returns the consecutive failures so far."""
        with self._lock:
            if error is None:
                self._last_error = None
                self._failures = 0
            else:
                self._last_error = str(error) or type(error).__name__
                self._failures += 1
            return self._failures

    def snapshot(self) -> tuple[str | None, int]:
        with self._lock:
            return self._last_error, self._failures


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class HealthServer:
    """Serves the health endpoints from a daemon thread."""

    def __init__(self, address: str, health: PollHealth) -> None:
        self._bind = _split_address(address)
        self._health = health
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """`host:port` actually bound (a port of 0 picks a free one)."""
        if self._server is None:
            return f"{self._bind[0]}:{self._bind[1]}"
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        health = self._health

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._reply(200, "ok")
                elif self.path == "/last-poll":
                    error, _ = health.snapshot()
                    if error is None:
                        self._reply(200, "ok")
                    else:
                        self._reply(500, f"Encountered error at last poll cycle: {error}")
                else:
                    self._reply(404, "not found")

            def _reply(self, status: int, body: str) -> None:
                payload = (body + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                # Probes hit these every few seconds; access logs would drown the decisions.
                return

        self._server = ThreadingHTTPServer(self._bind, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="proportional-health", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None
