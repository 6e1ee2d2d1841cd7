"""One-line descriptions of the errors the loop meets at its edges.

A kubernetes ``ApiException`` prints its HTTP headers and body; a log line or a status
message needs the status code and the reason only. Everything else is described by its
type and message.
"""

from __future__ import annotations

__all__ = ["describe_error"]


def describe_error(exc: BaseException) -> str:
    """``HTTP <status> <reason>`` for API errors, ``<Type>: <message>`` otherwise."""
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    if isinstance(status, int) and hasattr(exc, "headers"):
        return f"HTTP {status} {reason or ''}".rstrip()
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
