"""The errors the loop meets at its edges: their Cluster Autoscaler type and a one-line
description.

A kubernetes ``ApiException`` prints its HTTP headers and body; a log line, an event or a
status message needs the status code and the reason only. ``describe`` is the one place
that turns an exception into that: CA's error type (``ErrorType``, the ``type`` label of
``cluster_autoscaler_errors_total``), the HTTP status, the reason and the server's short
message. Everything else is described by its type and the first line of its message.

An action on one object (a node's taint, a pod's eviction, a node's deletion in the cloud,
an event, the status ConfigMap) that fails is that action's failure only: it is logged on
one line with these fields, counted by its type, and the loop goes on. Only a
``LoopAbortedError`` (this process may not act any more) ends a loop early.
"""

from __future__ import annotations

import enum
import json
import sys
import traceback
from dataclasses import dataclass
from typing import Any

from clusterscaler.framework.clusteractions import EvictionError, NodeNotFoundError
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    ConfigurationError,
    NodeGroupNotFoundError,
)

__all__ = [
    "ErrorInfo",
    "ErrorType",
    "LoopAbortedError",
    "LoopError",
    "describe",
    "describe_error",
    "error_type_of",
    "format_traceback",
    "is_transport_error",
]

# The server's message is kept to this many characters: enough for "nodes "n1" is
# forbidden: User ... cannot update resource ...", never a whole body.
MESSAGE_LIMIT = 200


class ErrorType(enum.StrEnum):
    """CA's ``AutoscalerErrorType``: the ``type`` label of ``errors_total``."""

    CLOUD_PROVIDER = "cloudProviderError"
    API_CALL = "apiCallError"
    INTERNAL = "internalError"
    TRANSIENT = "transientError"
    CONFIGURATION = "configurationError"
    NODE_GROUP_DOES_NOT_EXIST = "nodeGroupDoesNotExistError"


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """One failure, described without HTTP headers or bodies.

    ``status`` is the HTTP status code of an API error (None otherwise), ``reason`` its
    reason phrase (or the exception's type), ``message`` the server's short message (or
    the exception's first line).
    """

    type: ErrorType
    reason: str
    status: int | None = None
    message: str = ""

    def __str__(self) -> str:
        head = self.reason if self.status is None else f"HTTP {self.status} {self.reason}"
        return f"{head.rstrip()}: {self.message}" if self.message else head.rstrip()

    def fields(self, exc: BaseException | None = None) -> dict[str, Any]:
        """The key-value pairs of a structured log line about this failure; given the
        exception, a bug (``internalError``) also gets its traceback (``format_traceback``,
        one value, so still one line)."""
        out: dict[str, Any] = {"error_type": self.type.value}
        if self.status is not None:
            out["status"] = self.status
        out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if exc is not None and self.type is ErrorType.INTERNAL:
            out["traceback"] = format_traceback(exc)
        return out


class LoopError(str):
    """One entry of ``LoopResult.errors``: the message users read, and CA's ``type``
    that labels ``errors_total``. A plain ``str`` entry counts as an internal error."""

    type: ErrorType

    def __new__(cls, message: str, error_type: ErrorType = ErrorType.INTERNAL) -> LoopError:
        error = super().__new__(cls, message)
        error.type = error_type
        return error

    def __reduce__(self) -> tuple[Any, ...]:
        return (LoopError, (str(self), self.type))


def error_type_of(error: str) -> ErrorType:
    """The type of a ``LoopResult.errors`` entry."""
    return error.type if isinstance(error, LoopError) else ErrorType.INTERNAL


class LoopAbortedError(Exception):
    """A failure of the whole loop rather than of one object's action: this process may
    not act any more (leadership lost). Per-action isolation lets it through, so the loop
    ends at once instead of failing every remaining action one by one."""

    error_type = ErrorType.TRANSIENT


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 3] + "..."


def _api_exception_class() -> type[BaseException] | None:
    # Without the kubernetes client loaded (simulate, explain, tests) no ApiException
    # exists, and importing it here would cost about a second.
    module = sys.modules.get("kubernetes.client.exceptions")
    found = getattr(module, "ApiException", None)
    return found if isinstance(found, type) else None


def _transport_classes() -> tuple[type[BaseException], ...]:
    module = sys.modules.get("urllib3.exceptions")
    http_error = getattr(module, "HTTPError", None)
    return (OSError, http_error) if isinstance(http_error, type) else (OSError,)


def is_transport_error(exc: BaseException) -> bool:
    """Whether `exc` failed talking to the server (no connection, a connection dropped, a
    timeout) rather than being the server's answer: what client-go retries when it cannot
    contact the server. A Kubernetes API error is an answer, never a transport error."""
    api_exception = _api_exception_class()
    if api_exception is not None and isinstance(exc, api_exception):
        return False
    return isinstance(exc, _transport_classes())


def _status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes ``Status`` body; empty for anything else."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.lstrip().startswith("{"):
        return ""
    try:
        status = json.loads(body)
    except ValueError:
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return _first_line(message) if isinstance(message, str) else ""


def _cloud_type(exc: BaseException) -> ErrorType | None:
    if isinstance(exc, NodeGroupNotFoundError):
        return ErrorType.NODE_GROUP_DOES_NOT_EXIST
    if isinstance(exc, ConfigurationError):
        return ErrorType.CONFIGURATION
    if isinstance(exc, CloudProviderError):
        return ErrorType.CLOUD_PROVIDER
    return None


def _describe_one(exc: BaseException, remote: ErrorType) -> ErrorInfo | None:
    """``exc`` alone, or None when its type tells nothing about the failure's kind."""
    declared = getattr(exc, "error_type", None)
    if isinstance(declared, ErrorType):
        return ErrorInfo(declared, type(exc).__name__, message=_first_line(str(exc)))
    cloud = _cloud_type(exc)
    if cloud is not None:
        return ErrorInfo(cloud, type(exc).__name__, message=_first_line(str(exc)))
    api_exception = _api_exception_class()
    if api_exception is not None and isinstance(exc, api_exception):
        status = getattr(exc, "status", None)
        return ErrorInfo(
            ErrorType.API_CALL,
            _first_line(str(getattr(exc, "reason", "") or "")) or type(exc).__name__,
            status if isinstance(status, int) and status > 0 else None,
            _status_message(getattr(exc, "body", None)),
        )
    if isinstance(exc, _transport_classes()):
        return ErrorInfo(remote, type(exc).__name__, message=_first_line(str(exc)))
    return None


def describe(
    exc: BaseException,
    *,
    remote: ErrorType = ErrorType.API_CALL,
    default: ErrorType = ErrorType.INTERNAL,
) -> ErrorInfo:
    """CA's type, the status, the reason and the message of ``exc``, without headers or
    bodies.

    The exception and then its causes are looked at, so a wrapper (an eviction refused
    with an ``ApiException`` as its cause) is described by the API error beneath. An
    exception declaring an ``error_type`` attribute has that type; cloud provider errors
    are ``cloudProviderError`` (``configurationError``, ``nodeGroupDoesNotExistError`` for
    those subclasses); Kubernetes API errors, and the actions' answers built from them
    (node not found, eviction refused), ``apiCallError``; connection errors and timeouts
    (urllib3, ``OSError``) are errors talking to ``remote``, the API server unless the
    caller says otherwise. Anything else has the type ``default``: ``internalError``, a
    bug, unless the caller knows better.
    """
    answer: ErrorInfo | None = None
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        found = _describe_one(link, remote)
        if found is not None:
            return found
        if answer is None and isinstance(link, NodeNotFoundError | EvictionError):
            answer = ErrorInfo(
                ErrorType.API_CALL,
                type(link).__name__,
                404 if isinstance(link, NodeNotFoundError) else None,
                _first_line(str(link)),
            )
        link = link.__cause__
    if answer is not None:
        return answer
    return ErrorInfo(default, type(exc).__name__, message=_first_line(str(exc)))


def describe_error(exc: BaseException) -> str:
    """One line: ``HTTP <status> <reason>: <message>`` for API errors, ``<Type>: <message>``
    otherwise (``str(describe(exc))``)."""
    return str(describe(exc))


def format_traceback(exc: BaseException) -> str:
    """The traceback of an unexpected exception (a bug), for its log line.

    As Python prints it, causes and contexts first, except that each exception is shown on
    one line as ``describe`` sees it: an ``ApiException`` in the chain never brings its
    HTTP headers or body along.
    """
    chain: list[BaseException] = []
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        chain.append(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    parts: list[str] = []
    for index, link in enumerate(reversed(chain)):
        if index:
            parts.append("\nThe above exception led to the following one:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(link.__traceback__))
        api_exception = _api_exception_class()
        if api_exception is not None and isinstance(link, api_exception):
            parts.append(f"{type(link).__name__}: {describe(link)}\n")
        else:
            message = _first_line(str(link))
            parts.append(
                f"{type(link).__name__}: {message}\n" if message else f"{type(link).__name__}\n"
            )
    return "".join(parts)
