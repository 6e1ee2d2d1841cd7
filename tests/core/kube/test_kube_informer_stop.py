"""Stopping an informer: whatever it is doing when `stop()` comes, its thread ends at once,
the runtime's shutdown and a lost leadership do not wait on a quiet watch."""

from __future__ import annotations

import threading
import time
from typing import Any

from clusterscaler.testing.fakekube import FakeKubeServer
from test_kube_source import node, node_informer


def test_an_informer_stopped_while_its_watch_opens_ends_at_once() -> None:
    # No event and no bookmark for a minute: a watch left open blocks that long.
    with FakeKubeServer(bookmark_interval=60) as kube:
        kube.create(node("n1"))
        informer = node_informer(kube)
        opening = threading.Event()
        call = informer._call

        def call_and_watch(**kwargs: Any) -> Any:
            if kwargs.get("watch"):
                opening.set()
                # The watch is sent only once `stop()` has looked for a response to shut
                # down and found none.
                while not informer._stop.is_set():
                    time.sleep(0.001)
                time.sleep(0.05)
            return call(**kwargs)

        informer._call = call_and_watch  # type: ignore[method-assign]
        informer.start()
        thread = informer._thread
        assert thread is not None
        assert opening.wait(10)
        started = time.monotonic()
        informer.stop(timeout=5)
        assert not thread.is_alive()
        assert time.monotonic() - started < 5
        assert not informer.watching
