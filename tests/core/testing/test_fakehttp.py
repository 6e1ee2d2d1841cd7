"""The HTTP plumbing the fake servers share (`clusterscaler.testing.fakehttp`): a fake on a
free port of 127.0.0.1 for the time of a with-statement, its handler's request body and
replies, and a stop that ends the connections still open."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler

import pytest
from clusterscaler.testing.fakehttp import FakeHttpHandler, FakeHttpServer, LocalServer


class EchoHandler(FakeHttpHandler):
    def serve(self, method: str) -> None:
        body = self.read_body()
        if self.path == "/text":
            self.send_body(200, body, "text/plain", {"X-Echo": "yes"})
            return
        self.send_json(201, {"method": method, "path": self.path, "body": body.decode()})


class Echo(FakeHttpServer):
    thread_name = "echo"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return EchoHandler


def _request(url: str, method: str, path: str, body: bytes | Iterable[bytes] | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        chunked = (headers or {}).get("Transfer-Encoding") == "chunked"
        conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_every_method_reaches_serve_with_its_body(method: str) -> None:
    with Echo() as echo:
        status, headers, data = _request(echo.url, method, "/a/b?c=d", b'{"x": 1}')
    assert status == 201
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(data)
    assert json.loads(data) == {"method": method, "path": "/a/b?c=d", "body": '{"x": 1}'}


def test_a_chunked_body_is_read_whole() -> None:
    with Echo() as echo:
        status, headers, data = _request(
            echo.url, "POST", "/text", iter([b"hello ", b"world"]), {"Transfer-Encoding": "chunked"}
        )
    assert (status, data) == (200, b"hello world")
    assert headers["Content-Type"] == "text/plain" and headers["X-Echo"] == "yes"


def test_the_url_is_there_while_started_only() -> None:
    echo = Echo()
    with pytest.raises(RuntimeError, match="Echo is not started"):
        _ = echo.url
    assert echo.start() is echo
    url = echo.url
    assert url.startswith("http://127.0.0.1:")
    assert echo.start().url == url  # a started fake stays as it is
    echo.stop()
    assert not echo.started
    echo.stop()
    with pytest.raises(RuntimeError):
        _ = echo.url


def test_stop_closes_the_keep_alive_connections_and_frees_the_port() -> None:
    echo = Echo().start()
    port = int(echo.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /x HTTP/1.1\r\nHost: fake\r\n\r\n")
    answer = b""
    while not answer.endswith(b"}"):  # headers and body may come apart
        answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201")
    # The handler now waits for the next request on this connection.
    assert echo.open_connections() == 1
    echo.stop()
    assert sock.recv(65536) == b""  # closed by the server
    sock.close()
    assert echo.open_connections() == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_local_server_serves_any_handler() -> None:
    server = LocalServer(EchoHandler, name="echo")
    try:
        status, _, data = _request(server.url, "GET", "/")
    finally:
        server.stop()
    assert status == 201 and json.loads(data)["method"] == "GET"
