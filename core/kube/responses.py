"""Reading raw (``_preload_content=False``) responses of the kubernetes client.

A raw response must be read to the end before its connection goes back to the pool;
otherwise the next request on that connection reads the leftover bytes.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["discard", "read_json"]


def _read(response: Any) -> bytes:
    try:
        data = response.data if hasattr(response, "data") else response.read()
        return bytes(data or b"")
    finally:
        release = getattr(response, "release_conn", None)
        if release is not None:
            release()


def read_json(response: Any) -> dict[str, Any]:
    """The response body as a JSON object."""
    result: dict[str, Any] = json.loads(_read(response))
    return result


def discard(response: Any) -> None:
    """Read and drop the body, returning the connection to the pool."""
    _read(response)
