"""CEL device selectors of Dynamic Resource Allocation, evaluated as the scheduler does.

A DeviceClass or a ResourceClaim request selects devices with CEL expressions over one
variable, `device`: `device.driver` (a string), `device.attributes[DOMAIN][NAME]` (bool, int,
string or semantic version), `device.capacity[DOMAIN][NAME]` (a Kubernetes quantity) and
`device.allowMultipleAllocations` (a bool: whether claims share the device).
Kubernetes compiles them in `k8s.io/dynamic-resource-allocation/cel` (compile.go) on top of
the apiserver's base CEL environment; this module reproduces that environment:

- the standard CEL functions and macros, the strings extension at version 2 (`lowerAscii`,
  `split`, `join`, `format`...), optional values (`device.attributes[d].?model.orValue("")`)
  and `cel.bind`;
- the Kubernetes quantity library (`quantity`, `isQuantity`, `sign(q)`, `q.compareTo`,
  `isGreaterThan`, `isLessThan`, `add`, `sub`, `mul`, `asInteger`, `isInteger`,
  `asApproximateFloat`), with exact `Fraction` arithmetic;
- the Kubernetes semver library (`semver(s)`, `semver(s, normalize)`, `isSemver`, `major`,
  `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`); attributes of type version
  are semver values;
- the Kubernetes lists, regex, IP and CIDR libraries and cel-go's sets, in
  `dra_cel_libraries` (which says what of them is left out);
- a domain missing from `device.attributes` or `device.capacity` reads as an empty map, as
  the scheduler's map wrapper makes it (`has(device.attributes["x"].y)` is false, and
  `device.attributes["x"].y` fails with "no such key: y"), while `"x" in device.attributes`
  still tells whether the device has it;
- the result must be a bool: an expression whose type is known not to be bool (or dyn) is
  rejected when compiled, any other non-bool result when evaluated.

The library is `cel-expr-python`, the CEL project's own Python binding of its C++
implementation (cel-cpp, the reference next to cel-go that Kubernetes uses): it parses and
type-checks with the reference grammar, has `cel.bind`, optional values and the strings
extension built in, takes custom functions with typed overloads, and evaluates a compiled
expression in a few tens of microseconds. The pure-Python `cel-python` was an order of
magnitude slower and lacks `cel.bind`, optional values and the strings extension; the
Rust-based `common-expression-language` cannot carry a custom type (a quantity would be a
float or a map) and lacks `cel.bind` and optional values. Quantities and semantic versions
are protobuf messages of a private descriptor pool (`kubernetes.Quantity`,
`kubernetes.Semver`, the type names Kubernetes gives them), in canonical form so that `==`
compares values (`quantity("1Gi") == quantity("1024Mi")`).

What differs from Kubernetes, where an expression fails either way, or that no selector of
a real cluster is likely to meet: `device` is typed `map(string, dyn)`, so a misuse
Kubernetes' type checker catches (`device.driver` as the whole result, `device.driver + 1`)
fails at evaluation instead; the Kubernetes URL, format and image libraries, the lists'
`indexOf`/`lastIndexOf`, `string()` of an IP or a CIDR, quantity `div`/`divInt` and
two-variable comprehensions are not available (such an expression fails to compile);
regular expressions run on Python's `re`, not RE2; cel-cpp's checker rejects a literal
mixed-type comparison (`1 < 2.0`, which cel-go accepts; an attribute compared with a double
works) and accepts a mixed-type list literal; there is no runtime cost limit (the apiserver
already rejects selectors whose estimated cost is over it; cel-cpp's Python binding counts
no cost), only its length limit; the
quantity and semver messages can be built and read as messages (`quantity("1").numerator`);
a missing domain reached other than by indexing `device.attributes` or `device.capacity`
directly (through a `cel.bind` name) fails with "no such key" instead of reading as empty.

`compile_selector` compiles each distinct expression once (compile errors included) and
`CompiledSelector.matches` evaluates it for one device; both raise `SelectorError`, which
the allocator takes as "this device does not match", keeping the reason.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, NamedTuple

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from clusterscaler.model.dra import AttributeValue, Version
from clusterscaler.model.quantity import QuantityError, parse_quantity
from clusterscaler.simulator.dra_cel_libraries import library_functions, network_messages
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "CompiledSelector",
    "SelectorError",
    "compile_cache_info",
    "compile_selector",
]

# resource.k8s.io: CELSelectorExpressionMaxLength. The apiserver rejects longer selectors,
# so a cluster has none; an offline snapshot might.
MAX_EXPRESSION_LENGTH = 10 * 1024

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1


class SelectorError(ValueError):
    """A device selector that failed to compile or to evaluate, with the reason."""

    def __init__(self, expression: str, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(f"CEL selector {expression!r}: {reason}")


# --- The Quantity and Semver types --------------------------------------------------------


def _message_classes() -> tuple[Any, Any, Any]:
    """A descriptor pool with `kubernetes.Quantity` (an exact fraction, canonical: `==`
    compares values) and `kubernetes.Semver` (major, minor, patch and pre-release; build
    metadata is left out because Kubernetes ignores it in comparisons and equality)."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="clusterscaler/dra_cel.proto", package="kubernetes", syntax="proto3"
    )
    quantity = proto.message_type.add(name="Quantity")
    quantity.field.add(
        name="numerator", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL
    )
    quantity.field.add(
        name="denominator", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL
    )
    semver = proto.message_type.add(name="Semver")
    for number, name in enumerate(("major", "minor", "patch"), start=1):
        semver.field.add(
            name=name, number=number, type=field.TYPE_UINT64, label=field.LABEL_OPTIONAL
        )
    semver.field.add(name="pre", number=4, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return (
        pool,
        message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver")),
    )


_POOL, _Quantity, _Semver = _message_classes()
_IP, _CIDR = network_messages(_POOL)
_QUANTITY_TYPE = cel.Type("kubernetes.Quantity")
_SEMVER_TYPE = cel.Type("kubernetes.Semver")

# resource.ErrFormatWrong, which `quantity()` reports for any string it cannot parse.
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


@functools.lru_cache(maxsize=4096)
def _quantity(value: Fraction) -> Any:
    return _Quantity(numerator=str(value.numerator), denominator=str(value.denominator))


def _fraction(message: Any) -> Fraction:
    if not isinstance(message, _Quantity):
        raise TypeError("no such overload")
    return Fraction(int(message.numerator), int(message.denominator or "1"))


def _parse_quantity(text: str) -> Fraction | None:
    # Kubernetes' parser takes no surrounding blanks; ours strips them.
    if text != text.strip():
        return None
    try:
        return parse_quantity(text, obj="quantity()", field="argument")
    except QuantityError:
        return None


@functools.lru_cache(maxsize=4096)
def _semver(text: str) -> Any:
    """The Semver message of a version string, ValueError when it is not semver 2.0.0 (with
    each number an unsigned 64-bit integer, as blang/semver parses them)."""
    major, minor, patch, _ = Version(text).parts()
    if max(major, minor, patch) > _UINT64_MAX:
        raise ValueError(f"{text!r} is not a semantic version: a number is out of range")
    pre = text.split("+", 1)[0].partition("-")[2]
    return _Semver(major=major, minor=minor, patch=patch, pre=pre)


def _version(message: Any) -> Version:
    if not isinstance(message, _Semver):
        raise TypeError("no such overload")
    text = f"{message.major}.{message.minor}.{message.patch}"
    return Version(f"{text}-{message.pre}" if message.pre else text)


def _normalized(text: str) -> str:
    """semverlib's normalizeAndParse: no leading "v", no leading zeros, missing minor and
    patch numbers filled in with 0."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver_of(text: str, normalize: bool = False) -> Any:
    try:
        return _semver(_normalized(text) if normalize else text)
    except ValueError as e:
        raise ValueError(f"invalid semantic version {text!r}: {e}") from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver_of(text, normalize)
    except ValueError:
        return False
    return True


def _quantity_of(text: str) -> Any:
    value = _parse_quantity(text)
    if value is None:
        raise ValueError(_QUANTITY_FORMAT)
    return _quantity(value)


def _sign(value: Fraction) -> int:
    return (value > 0) - (value < 0)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, _Quantity) and isinstance(b, _Quantity):
        return _sign(_fraction(a) - _fraction(b))
    if isinstance(a, _Semver) and isinstance(b, _Semver):
        return _version(a).compare(_version(b))
    raise TypeError("no such overload")


def _as_integer(message: Any) -> int:
    value = _fraction(message)
    if value.denominator != 1 or not _INT64_MIN <= value.numerator <= _INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _is_integer(message: Any) -> bool:
    value = _fraction(message)
    return value.denominator == 1 and _INT64_MIN <= value.numerator <= _INT64_MAX


def _as_float(message: Any) -> float:
    value = _fraction(message)
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _functions() -> list[Any]:
    """The quantity and semver libraries of Kubernetes, with its overload ids.

    cel-cpp dispatches at run time on the kind of each argument, and both types are of kind
    "message": where the two libraries share a member function, one implementation serves
    both overloads (the type checker still sees two).
    """
    T = cel.Type
    Q, S = _QUANTITY_TYPE, _SEMVER_TYPE

    def overload(
        id: str, result: Any, params: list[Any], impl: Callable[..., Any] | None, member: bool
    ) -> Any:
        if impl is None:
            return cel.Overload(id=id, return_type=result, parameters=params, is_member=member)
        return cel.Overload(id, result, params, member, impl)

    def function(name: str, *overloads: Any) -> Any:
        return cel.FunctionDecl(name, list(overloads))

    return [
        function("quantity", overload("string_to_quantity", Q, [T.STRING], _quantity_of, False)),
        function(
            "isQuantity",
            overload(
                "is_quantity_string",
                T.BOOL,
                [T.STRING],
                lambda s: _parse_quantity(s) is not None,
                False,
            ),
        ),
        function(
            "sign", overload("quantity_sign", T.INT, [Q], lambda q: _sign(_fraction(q)), False)
        ),
        function(
            "compareTo",
            overload("quantity_compare_to", T.INT, [Q, Q], _compare, True),
            overload("semver_compare_to", T.INT, [S, S], None, True),
        ),
        function(
            "isGreaterThan",
            overload(
                "quantity_is_greater_than", T.BOOL, [Q, Q], lambda a, b: _compare(a, b) > 0, True
            ),
            overload("semver_is_greater_than", T.BOOL, [S, S], None, True),
        ),
        function(
            "isLessThan",
            overload(
                "quantity_is_less_than", T.BOOL, [Q, Q], lambda a, b: _compare(a, b) < 0, True
            ),
            overload("semver_is_less_than", T.BOOL, [S, S], None, True),
        ),
        function(
            "asApproximateFloat", overload("quantity_get_float", T.DOUBLE, [Q], _as_float, True)
        ),
        function("asInteger", overload("quantity_get_int", T.INT, [Q], _as_integer, True)),
        function("isInteger", overload("quantity_is_integer", T.BOOL, [Q], _is_integer, True)),
        function(
            "add",
            overload(
                "quantity_add", Q, [Q, Q], lambda a, b: _quantity(_fraction(a) + _fraction(b)), True
            ),
            overload(
                "quantity_add_int", Q, [Q, T.INT], lambda a, n: _quantity(_fraction(a) + n), True
            ),
        ),
        function(
            "sub",
            overload(
                "quantity_sub", Q, [Q, Q], lambda a, b: _quantity(_fraction(a) - _fraction(b)), True
            ),
            overload(
                "quantity_sub_int", Q, [Q, T.INT], lambda a, n: _quantity(_fraction(a) - n), True
            ),
        ),
        function(
            "mul",
            overload(
                "quantity_multiply_int",
                Q,
                [Q, T.INT],
                lambda a, n: _quantity(_fraction(a) * n),
                True,
            ),
        ),
        function(
            "semver",
            overload("string_to_semver", S, [T.STRING], _semver_of, False),
            overload("string_bool_to_semver", S, [T.STRING, T.BOOL], _semver_of, False),
        ),
        function(
            "isSemver",
            overload("is_semver_string", T.BOOL, [T.STRING], _is_semver, False),
            overload("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], _is_semver, False),
        ),
        function(
            "major", overload("semver_major", T.INT, [S], lambda v: _version(v).parts()[0], True)
        ),
        function(
            "minor", overload("semver_minor", T.INT, [S], lambda v: _version(v).parts()[1], True)
        ),
        function(
            "patch", overload("semver_patch", T.INT, [S], lambda v: _version(v).parts()[2], True)
        ),
    ]


@functools.cache
def _env() -> Any:
    return cel.NewEnv(
        _POOL,
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        extensions=[
            ext_strings.ExtStrings(2),  # the version the apiserver's base environment uses
            ext_bindings.ExtBindings(),
            ext_optional.ExtOptional(),
        ],
        functions=[*_functions(), *library_functions(_IP, _CIDR)],
    )


# --- Missing domains read as empty maps ---------------------------------------------------

# One CEL token: a comment, a string or bytes literal (raw, where a backslash escapes
# nothing, or not; in any quotes), a number, an identifier or one other character. Only
# identifiers and brackets matter below; strings and comments must be skipped whole so that
# nothing inside them is taken for code.
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>//[^\n]*)
    | (?P<raw>(?:[rR][bB]?|[bB][rR])(?:
          \"\"\".*?\"\"\" | '''.*?''' | "[^"\n]*" | '[^'\n]*'))
    | (?P<string>[bB]?(?:
          \"\"\"(?:\\.|[^\\])*?\"\"\" | '''(?:\\.|[^\\])*?'''
        | "(?:\\.|[^\\"\n])*" | '(?:\\.|[^\\'\n])*'))
    | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
    | (?P<number>[0-9][0-9a-zA-Z.]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class _Token(NamedTuple):
    kind: str
    text: str
    start: int
    end: int


def _tokens(expression: str) -> list[_Token]:
    out: list[_Token] = []
    for m in _TOKEN.finditer(expression):
        kind = m.lastgroup or "other"
        if kind not in ("space", "comment"):
            out.append(_Token(kind, m.group(), m.start(), m.end()))
    return out


def _with_domain_defaults(expression: str) -> str:
    """The expression with each `device.attributes[D]` and `device.capacity[D]` read as
    `device.attributes[?D].orValue(dyn({}))`: Kubernetes gives the scheduler's CEL program these
    two maps through a wrapper whose lookup of a missing key returns an empty map, while
    membership (`in`), size and iteration see the real keys. (An optional index,
    `device.attributes[?D]`, is then always present, as there.)"""
    tokens = _tokens(expression)
    edits: list[tuple[int, str]] = []  # (position, text to insert), applied back to front
    for i in range(len(tokens) - 3):
        device, dot, field, bracket = tokens[i : i + 4]
        if not (
            device.text == "device"
            and dot.text == "."
            and field.text in ("attributes", "capacity")
            and bracket.text == "["
        ):
            continue
        # `x.device.attributes[...]` is a field of something else; `x.?device` likewise.
        before = [t.text for t in tokens[max(0, i - 2) : i]]
        if before[-1:] == ["."] or before == [".", "?"]:
            continue
        depth, j = 0, i + 3
        while j < len(tokens):
            if tokens[j].text in "[(":
                depth += 1
            elif tokens[j].text in "])":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j == len(tokens) or tokens[j].text != "]":
            continue  # unbalanced: the compiler has already rejected it
        optional = i + 4 < len(tokens) and tokens[i + 4].text == "?"
        if optional:
            edits += [(device.start, "optional.of("), (tokens[j].end, ".orValue(dyn({})))")]
        else:
            edits += [(bracket.end, "?"), (tokens[j].end, ".orValue(dyn({}))")]
    for position, text in sorted(edits, key=lambda e: e[0], reverse=True):
        expression = expression[:position] + text + expression[position:]
    return expression


# --- Compiling and evaluating --------------------------------------------------------------

_STATUS = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")
_NO_SUCH_KEY = re.compile(r'Key not found in map : "(.*)"$', re.DOTALL)
_NO_OVERLOAD = re.compile(r"No matching overloads found : (.*)$", re.DOTALL)


def _reason(message: str) -> str:
    """A cel-cpp error in cel-go's words where Kubernetes users know them."""
    message = _STATUS_SUFFIX.sub("", _STATUS.sub("", message.strip()))
    if m := _NO_SUCH_KEY.search(message):
        return f"no such key: {m.group(1)}"
    if m := _NO_OVERLOAD.search(message):
        return f"no such overload: {m.group(1)}"
    return message


def _type_name(t: Any) -> str:
    name = str(t.name())
    return name.lower() if name.isupper() else name


def _split(name: str, driver: str) -> tuple[str, str]:
    """Domain and identifier of a qualified name, split at the first "/" as Kubernetes does
    (a domain has no "/"); a name without one belongs to the driver."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute(value: AttributeValue) -> Any:
    if isinstance(value, Version):
        return _semver(value.text)
    return value


class CompiledSelector:
    """One compiled selector; `matches` evaluates it for a device."""

    __slots__ = ("_program", "expression")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"

    def matches(
        self,
        driver: str,
        attributes: Mapping[str, AttributeValue],
        capacity: Mapping[str, Fraction],
        allow_multiple_allocations: bool = False,
    ) -> bool:
        """Whether the device is selected. Raises SelectorError when the evaluation fails
        (a missing key, a type error, a result that is not a bool) or when an attribute of
        type version is not a semantic version, as Kubernetes does."""
        domains: dict[str, dict[str, Any]] = {}
        for name, value in attributes.items():
            domain, ident = _split(name, driver)
            try:
                converted = _attribute(value)
            except ValueError as e:
                raise SelectorError(
                    self.expression, f"attribute {name}: parse semantic version: {e}"
                ) from None
            domains.setdefault(domain, {})[ident] = converted
        capacities: dict[str, dict[str, Any]] = {}
        for name, amount in capacity.items():
            domain, ident = _split(name, driver)
            capacities.setdefault(domain, {})[ident] = _quantity(amount)
        device = {
            "driver": driver,
            "attributes": domains,
            "capacity": capacities,
            "allowMultipleAllocations": allow_multiple_allocations,
        }
        try:
            result = self._program.eval(data={"device": device})
            kind = result.type()
            value = result.value()
        except Exception as e:  # the binding raises for inputs it cannot convert
            raise SelectorError(self.expression, _reason(str(e))) from None
        if kind == cel.Type.BOOL:
            return bool(value)
        if kind == cel.Type.ERROR:
            raise SelectorError(self.expression, _reason(str(value)))
        raise SelectorError(
            self.expression,
            f"CEL result of type {_type_name(kind)} could not be converted to bool",
        )


class _Failed(NamedTuple):
    reason: str


def _compile(expression: str) -> CompiledSelector | _Failed:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return _Failed(f"may not be more than {MAX_EXPRESSION_LENGTH} bytes")
    env = _env()
    try:
        checked = env.compile(expression)
    except Exception as e:
        return _Failed("compilation failed: " + _reason(str(e)))
    result = checked.return_type()
    if result not in (cel.Type.BOOL, cel.Type.DYN):
        return _Failed(f"must evaluate to bool or the unknown type, not {_type_name(result)}")
    rewritten = _with_domain_defaults(expression)
    if rewritten != expression:
        try:
            checked = env.compile(rewritten)
        except Exception as e:  # not expected: the rewrite keeps a valid expression valid
            return _Failed("compilation failed: " + _reason(str(e)))
    return CompiledSelector(expression, checked)


_compiled = functools.lru_cache(maxsize=4096)(_compile)


def compile_selector(expression: str) -> CompiledSelector:
    """The compiled selector, compiled once per distinct expression (a failure is
    remembered too). Raises SelectorError when the expression does not compile, or when its
    type is known not to be bool."""
    result = _compiled(expression)
    if isinstance(result, _Failed):
        raise SelectorError(expression, result.reason)
    return result


def compile_cache_info() -> functools._CacheInfo:
    """Hits and misses of the compilation cache."""
    return _compiled.cache_info()
