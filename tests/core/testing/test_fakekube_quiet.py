"""The fake API server stays quiet when clients drop connections, and loud on its own bugs."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest
from clusterscaler.testing.fakekube import ApiError, FakeKubeServer

LIST_PODS = b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: fake\r\n\r\n"


def _connect(kube: FakeKubeServer) -> socket.socket:
    host, port = kube.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _reset(sock: socket.socket) -> None:
    # SO_LINGER with a zero timeout: close() sends RST, as a client dropping a pooled
    # connection at process exit or on a timeout does.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def _wait_connections_closed(kube: FakeKubeServer) -> None:
    """Until every handler has finished (and so reported any error)."""
    deadline = time.monotonic() + 5
    while kube.open_connections():
        assert time.monotonic() < deadline, "the server kept the connection open"
        time.sleep(0.01)


def _reset_when_idle(kube: FakeKubeServer) -> None:
    sock = _connect(kube)
    sock.sendall(LIST_PODS)
    assert _read_response(sock).startswith(b"HTTP/1.1 200")
    # The server now waits for the next request on the keep-alive connection.
    _reset(sock)


def _reset_before_answer(kube: FakeKubeServer) -> None:
    gone = threading.Event()

    def refuse_after_client_left(method: str, path: str) -> None:
        kube.on_request = None
        assert gone.wait(5)
        time.sleep(0.05)
        raise ApiError(404, "not found")  # its answer goes to a reset connection

    kube.on_request = refuse_after_client_left
    sock = _connect(kube)
    sock.sendall(LIST_PODS)
    _reset(sock)
    gone.set()


@pytest.mark.parametrize(
    "drop",
    [_reset_when_idle, _reset_before_answer],
    ids=["reset-idle-keepalive", "reset-before-answer"],
)
def test_dropped_client_connections_print_nothing(
    drop: Callable[[FakeKubeServer], None], capfd: pytest.CaptureFixture[str]
) -> None:
    with FakeKubeServer() as kube:
        drop(kube)
        _wait_connections_closed(kube)
        # The server still answers other clients.
        sock = _connect(kube)
        sock.sendall(LIST_PODS)
        assert _read_response(sock).startswith(b"HTTP/1.1 200")
        sock.close()
    out, err = capfd.readouterr()
    assert "Traceback" not in err
    assert "Exception occurred" not in err
    assert "ConnectionReset" not in out + err and "BrokenPipe" not in out + err


def test_server_errors_still_print_their_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    with FakeKubeServer() as kube:
        sock = _connect(kube)
        # A chunk size that is not hexadecimal fails the fake before any answer is made.
        sock.sendall(
            b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: fake\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
        )
        assert sock.recv(65536) == b""  # closed without an answer
        sock.close()
        _wait_connections_closed(kube)
    err = capfd.readouterr().err
    assert "Traceback" in err
    assert "ValueError" in err
