"""YAML read with bounds: every YAML file and ConfigMap the autoscaler reads (snapshots,
scenarios, cloud-configs, the priority expander's and the providers' ConfigMaps) goes
through `load_yaml` or `load_yaml_documents`, never through `yaml.safe_load` itself.

PyYAML alone lets a small hostile file cost minutes or gigabytes:
- flow collections nested deep (`[[[[...`) are parsed in time quadratic in the depth (both
  the C and the Python parser), and the C composer recurses on the machine's stack;
- aliases of aliases (`&a [*b, *b, ...]`) build a graph whose expansion, which every reader
  of the document walks, grows exponentially with the file.

Both are refused with a `YAMLBoundError` (a `yaml.YAMLError`, so callers that name their
file for a YAML error name it for these too) before the text is parsed further: nesting
deeper than `MAX_DEPTH` levels, and aliases repeating more than `MAX_ALIAS_VALUES` values in
all. No real Kubernetes object comes near either: a pod's deepest field is about 12 levels
down, and `kubectl` writes no aliases.

`read_yaml_file` reads a file the user named (a scenario, a cloud-config, a kubeconfig) and
says in one line what is wrong with it, naming the file as the caller names it: cannot be
read, larger than the caller's bound on its bytes (read no further than that), not UTF-8,
not YAML (past a bound included).

The events come from libyaml when PyYAML was built with it (several times faster on large
snapshots), the composing and the checks are ours, and the values are built by PyYAML's
safe constructor: the same values `yaml.safe_load` gives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.resolver import Resolver

MAX_DEPTH = 200
MAX_ALIAS_VALUES = 1_000_000

# What PyYAML's safe constructor builds: JSON's values plus timestamps (`2024-01-02`),
# `!!binary` bytes and `!!set`s; `!!omap` and `!!pairs` give lists of (key, value) pairs.
# Mapping keys are any scalar (`1: [...]` is an integer key), never a collection: PyYAML
# refuses unhashable keys. Read into it with `isinstance`.
YamlScalar: TypeAlias = bool | int | float | str | bytes | date | datetime | None
# A value read from YAML: a scalar, or a collection of values.
YamlValue: TypeAlias = (
    YamlScalar
    | list["YamlValue"]
    | tuple["YamlValue", "YamlValue"]
    | set[YamlScalar]
    | dict[YamlScalar, "YamlValue"]
)

try:
    from yaml._yaml import CParser as _Parser
    from yaml.reader import Reader as _Reader

    _PARSER_BASES: tuple[type, ...] = (_Parser,)
except ImportError:  # PyYAML built without libyaml
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader as _Reader
    from yaml.scanner import Scanner as _Scanner

    _PARSER_BASES = (_Reader, _Scanner, _PyParser)


class YAMLBoundError(yaml.YAMLError):
    """YAML refused before it could cost unbounded time or memory; the message says which
    bound and where."""


def _line(node_or_event: Any) -> str:
    mark = getattr(node_or_event, "start_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


class _BoundedComposer(Composer):
    """PyYAML's composer, counting the depth and what aliases repeat as it goes (so a
    hostile document stops being read as soon as it passes a bound)."""

    def _bounds_init(self) -> None:
        self._depth = 0
        self._repeated = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):  # type: ignore[attr-defined]
            event = self.peek_event()  # type: ignore[attr-defined]
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                raise YAMLBoundError(
                    f"expected each alias (*{event.anchor}) outside the value its anchor "
                    f"names, got one inside it{_line(event)}"
                )
            self._repeated += size
            if self._repeated > MAX_ALIAS_VALUES:
                raise YAMLBoundError(
                    f"expected aliases (*name) repeating at most {MAX_ALIAS_VALUES:,} values "
                    f"in all, got more{_line(event)} (an alias of an alias multiplies)"
                )
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YAMLBoundError(
                f"expected YAML nested at most {MAX_DEPTH} levels deep, got deeper nesting"
                f"{_line(self.peek_event())}"  # type: ignore[attr-defined]
            )
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1
        if isinstance(node, SequenceNode):
            size += sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, MappingNode):
            size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        self._sizes[id(node)] = size
        return node


# The composer first: its methods, not the C parser's own composing, build the nodes.
class _Loader(_BoundedComposer, *_PARSER_BASES, SafeConstructor, Resolver):  # type: ignore[misc]
    def __init__(self, stream: str | bytes) -> None:
        if _PARSER_BASES[0] is _Reader:
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            _PyParser.__init__(self)
        else:
            _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._bounds_init()


def _construct(loader: _Loader, node: Node) -> Any:
    try:
        return loader.construct_document(node)
    except ValueError as exc:
        # The interpreter's limit on the digits of an integer (`int()` of a longer one).
        raise YAMLBoundError(f"expected integers of at most 4,300 digits: {exc}") from None


def load_yaml_documents(text: str | bytes) -> list[YamlValue]:
    """Every document of `text`, as `yaml.safe_load_all` gives them (empty documents as
    None); a `yaml.YAMLError` for malformed text, a `YAMLBoundError` past a bound."""
    loader = _Loader(text)
    try:
        documents: list[YamlValue] = []
        while loader.check_node():
            node = loader.get_node()
            documents.append(None if node is None else _construct(loader, node))
        return documents
    finally:
        loader.dispose()


def load_yaml(text: str | bytes) -> YamlValue:
    """The one document of `text`, as `yaml.safe_load` gives it (None when empty); a
    `yaml.YAMLError` for malformed text or more than one document."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _construct(loader, node)
    finally:
        loader.dispose()


# A YAML error quoted in a message is clipped: a problem can quote the text it stopped at.
_DETAIL_LIMIT = 300


def _at(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def describe_yaml_error(exc: BaseException) -> str:
    """`exc` (a YAML error) in one line: PyYAML's message takes four, naming the text
    `"<unicode string>"`. The problem and where, then what it was reading and from where:
    `expected ',' or ']', but got '<stream end>' at line 2, column 1 (while parsing a flow
    sequence at line 1, column 13)`."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        text = f"{exc.problem}{_at(exc.problem_mark)}"
        if exc.context:
            text += f" ({exc.context}{_at(exc.context_mark)})"
    else:
        text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


MiB = 1 << 20
# The bounds on the bytes of a file a user names, so that `/dev/zero` or a 10 GB file given
# by mistake is refused after that many bytes instead of read without end. Each caller
# passes the bound of what its file holds:
# - settings (a cloud-config, a kubeconfig, a KubeSchedulerConfiguration, node-group
#   bounds): kilobytes in practice; a kubeconfig of a hundred clusters with their
#   certificates embedded is under 1 MiB.
MAX_CONFIG_FILE_BYTES = 16 * MiB
# - objects written out (a scenario, an `--apply` manifest): a manifest of 10,000 objects
#   of 3 KB each is 30 MB. The default, which every YAML file a user names fits in.
MAX_YAML_FILE_BYTES = 256 * MiB
# - a cluster's snapshot (`kubectl get ... -A -o json` of a 5,000-node cluster with
#   150,000 pods, managedFields included, is well under 2 GB), bounding the bytes once
#   gunzipped, so that a small gzip bomb is refused as a large file is.
MAX_SNAPSHOT_BYTES = 4096 * MiB

_CHUNK = 4 * MiB


class ByteStream(Protocol):
    """What `read_at_most` reads: an open binary file, standard input, a `GzipFile`."""

    def read(self, size: int = -1, /) -> bytes: ...


class YamlFileError(ValueError):
    """A YAML file that cannot be read, is too large, is not UTF-8 text or is not YAML: the
    message, one line, names the file as the caller named it and says what is wrong."""


def too_large(where: str, max_bytes: int, what: str = "a file of") -> YamlFileError:
    """The error for more than `max_bytes` bytes: `<where>: expected a file of at most N
    MiB, got more` (`what` says of what: `a gzip stream that gunzips to`)."""
    size = f"{max_bytes // MiB} MiB" if max_bytes % MiB == 0 else f"{max_bytes:,} bytes"
    return YamlFileError(f"{where}: expected {what} at most {size}, got more")


def read_at_most(
    stream: ByteStream, max_bytes: int, where: str, what: str = "a file of",
    check_start: Callable[[bytes], None] | None = None,
) -> bytes:
    """The bytes of `stream` to its end, reading at most `max_bytes` + 1 of them: a
    `YamlFileError` (`too_large`) when there are more. `check_start`, given the first
    bytes read (up to 4 MiB), raises to refuse what cannot be the file expected before the
    rest is read: a device such as `/dev/zero` named by mistake is refused at once instead
    of after `max_bytes`. An `OSError` of the stream is the caller's to name."""
    chunks: list[bytes] = []
    left = max_bytes + 1
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            break
        if check_start is not None and not chunks:
            check_start(chunk)
        chunks.append(chunk)
        left -= len(chunk)
    if left <= 0:
        raise too_large(where, max_bytes, what)
    return b"".join(chunks)


def read_file_bytes(
    path: str | Path, where: str, max_bytes: int,
    check_start: Callable[[bytes], None] | None = None,
) -> bytes:
    """The bytes of the file at `path`, at most `max_bytes` of them (a regular file larger
    than that is refused before it is read; a device or a pipe after `max_bytes` + 1
    bytes, or at its start by `check_start`, as `read_at_most` says). Raises
    `YamlFileError`: `<where>: cannot read the file: <reason>` or `too_large`."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > max_bytes:
                raise too_large(where, max_bytes)
            return read_at_most(handle, max_bytes, where, check_start=check_start)
    # ValueError: a path holding a null byte, which names no file.
    except (OSError, ValueError) as exc:
        if isinstance(exc, YamlFileError):
            raise
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise YamlFileError(f"{where}: cannot read the file: {reason}") from None


def read_text_file(path: str | Path, where: str, max_bytes: int) -> str:
    """The UTF-8 text of the file at `path` (`read_file_bytes`, then decoded). Raises
    `YamlFileError`, a byte that is not UTF-8 as `<where>: expected UTF-8 text, got byte
    0xe9 at offset 20`."""
    data = read_file_bytes(path, where, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(
            f"{where}: expected UTF-8 text, got byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}"
        ) from None


_T = TypeVar("_T")


def read_parsed_file(
    path: str | Path, where: str, expected: str, load: Callable[[str], _T], *,
    max_bytes: int = MAX_YAML_FILE_BYTES, language: str = "YAML",
) -> _T:
    """`load` (a parser of text, such as `load_yaml_documents`) of the file at `path` read
    by `read_text_file`. Raises `YamlFileError`, for text `load` refuses `<where>: expected
    <expected>, got text that is not valid <language>: <describe_yaml_error>`."""
    text = read_text_file(path, where, max_bytes)
    try:
        return load(text)
    # What PyYAML raises past its own limits, should one be reached before ours.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise YamlFileError(
            f"{where}: expected {expected}, got text that is not valid {language}: "
            f"{describe_yaml_error(exc)}"
        ) from None


def read_yaml_file(
    path: str | Path, where: str, expected: str, *, max_bytes: int = MAX_YAML_FILE_BYTES
) -> YamlValue:
    """The one document of the file at `path` (UTF-8 text of at most `max_bytes` bytes), as
    `load_yaml` reads it.

    Raises `YamlFileError` whose message starts with `where` (how the caller names the file,
    `--cloud-config 'groups.yaml'`): `<where>: cannot read the file: No such file or
    directory`, `<where>: expected a file of at most 16 MiB, got more`, `<where>: expected
    UTF-8 text, got byte 0xe9 at offset 20`, or `<where>: expected <expected>, got text that
    is not valid YAML: <describe_yaml_error>`, where `expected` says what the file holds (`a
    kubeconfig in YAML`).
    """
    return read_parsed_file(path, where, expected, load_yaml, max_bytes=max_bytes)
