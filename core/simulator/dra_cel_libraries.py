"""Kubernetes' CEL libraries for lists, regular expressions, sets, IP addresses and CIDRs,
as device selectors may use them (k8s.io/apiserver/pkg/cel/library: lists.go, regex.go,
ip.go, cidr.go; cel-go's ext.Sets), for the environment of `dra_cel`.

- lists: `isSorted()`, `sum()`, `min()`, `max()` over lists of int, uint, double, bool,
  string or bytes (`min` and `max` of an empty list fail). The lists' `indexOf(x)` and
  `lastIndexOf(x)` are not available: cel-cpp's strings extension declares those names
  for strings, and a function is declared once (such a selector fails to compile);
- regular expressions: `s.find(re)` (the first match, "" when none), `s.findAll(re)` and
  `s.findAll(re, limit)` (at most `limit` matches when `limit` >= 0); an invalid regular
  expression fails the evaluation ("Illegal regex: ..."). Python's `re` runs them: for the
  RE2 syntax selectors use (classes, repetitions, anchors, groups) it finds the same
  matches; RE2-only constructs (`\\pN` classes, `(?P=...)` differ) may fail or differ;
- sets: `sets.contains(a, b)` (every element of b is in a), `sets.equivalent(a, b)`,
  `sets.intersects(a, b)`, with CEL's equality (1 == 1.0, true != 1);
- IP addresses: `ip(s)`, `isIP(s)`, `ip.isCanonical(s)`, `family()`, `isUnspecified()`,
  `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`, `isGlobalUnicast()`;
  addresses with a zone and IPv4-mapped IPv6 addresses are refused, as Kubernetes
  refuses them;
- CIDRs: `cidr(s)`, `isCIDR(s)`, `containsIP(ip or string)`, `containsCIDR(cidr or
  string)`, `ip()`, `masked()`, `prefixLength()`.

Not available (a selector using them fails to compile): `string(ip)` and `string(cidr)`
(cel-cpp declares `string` once, with its standard overloads), the lists' `indexOf` and
`lastIndexOf` (declared by the strings extension for strings), and the URL library.

IPs and CIDRs are messages `net.IP` and `net.CIDR` (Kubernetes' type names) of `dra_cel`'s
descriptor pool, holding the canonical text, so that `==` compares addresses.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, message_factory

__all__ = ["library_functions", "network_messages"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def network_messages(pool: Any) -> tuple[Any, Any]:
    """Add `net.IP` (its canonical text) and `net.CIDR` (its address as written, in
    canonical form, and its prefix length) to the descriptor pool; returns their message
    classes."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="clusterscaler/dra_cel_net.proto", package="net", syntax="proto3"
    )
    ip = proto.message_type.add(name="IP")
    ip.field.add(name="address", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    cidr = proto.message_type.add(name="CIDR")
    cidr.field.add(name="address", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    cidr.field.add(name="prefix", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    pool.Add(proto)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("net.IP")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("net.CIDR")),
    )


class _Library:
    """The functions, bound to the message classes of `net.IP` and `net.CIDR`."""

    def __init__(self, ip_class: Any, cidr_class: Any) -> None:
        self.ip_class = ip_class
        self.cidr_class = cidr_class

    # ------------------------------------------------------------------ IP addresses

    def parse_ip(self, text: str) -> IPAddress:
        """netip.ParseAddr, then Kubernetes' refusals; ValueError with its message."""
        if "%" in text:
            try:
                ipaddress.ip_address(text)
            except ValueError:
                pass
            else:
                raise ValueError(f"IP address {text!r} with zone value is not allowed")
        try:
            address = ipaddress.ip_address(text)
        except ValueError as e:
            raise ValueError(
                f"IP Address {text!r} parse error during conversion from string: {e}"
            ) from None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
        return address

    def ip(self, text: str) -> Any:
        return self.ip_class(address=str(self.parse_ip(text)))

    def address(self, message: Any) -> IPAddress:
        if not isinstance(message, self.ip_class):
            raise TypeError("no such overload")
        return ipaddress.ip_address(message.address)

    def is_ip(self, text: str) -> bool:
        try:
            self.parse_ip(text)
        except ValueError:
            return False
        return True

    def is_canonical(self, text: str) -> bool:
        return str(self.parse_ip(text)) == text

    def family(self, message: Any) -> int:
        return self.address(message).version

    def is_link_local_multicast(self, message: Any) -> bool:
        a = self.address(message)
        if a.version == 4:
            return a in _V4_LINK_LOCAL_MULTICAST
        packed = a.packed
        return packed[0] == 0xFF and packed[1] & 0x0F == 0x02

    def is_global_unicast(self, message: Any) -> bool:
        # Go's netip.Addr.IsGlobalUnicast: private ranges count, the limited broadcast
        # address, loopback, link-local, multicast and unspecified do not.
        a = self.address(message)
        if a.version == 4 and a == _V4_BROADCAST:
            return False
        return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)

    # ------------------------------------------------------------------ CIDRs

    def parse_cidr(self, text: str) -> tuple[IPAddress, int]:
        """netip.ParsePrefix (the address kept as written, not masked), then
        Kubernetes' refusal of IPv4-mapped addresses."""
        head, slash, bits = text.partition("/")

        def wrong(why: str) -> ValueError:
            return ValueError(
                "network address parse error during conversion from string: "
                f'netip.ParsePrefix("{text}"): {why}'
            )

        if not slash:
            raise wrong("no '/'")
        if "%" in head:
            raise wrong("IPv6 zones cannot be present in a prefix")
        try:
            address = ipaddress.ip_address(head)
        except ValueError as e:
            raise wrong(str(e)) from None
        if not bits.isdigit() or not bits.isascii() or (len(bits) > 1 and bits[0] == "0"):
            raise wrong(f"bad bits after slash: {bits!r}")
        length = int(bits)
        if length > address.max_prefixlen:
            raise wrong("prefix length out of range")
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
        return address, length

    def cidr(self, text: str) -> Any:
        address, length = self.parse_cidr(text)
        return self.cidr_class(address=str(address), prefix=length)

    def network(self, message: Any) -> tuple[IPAddress, ipaddress.IPv4Network | ipaddress.IPv6Network]:
        if not isinstance(message, self.cidr_class):
            raise TypeError("no such overload")
        address = ipaddress.ip_address(message.address)
        return address, ipaddress.ip_network(f"{address}/{message.prefix}", strict=False)

    def is_cidr(self, text: str) -> bool:
        try:
            self.parse_cidr(text)
        except ValueError:
            return False
        return True

    def contains_ip(self, cidr: Any, other: Any) -> bool:
        _, net = self.network(cidr)
        address = self.parse_ip(other) if isinstance(other, str) else self.address(other)
        return address.version == net.version and address in net

    def contains_cidr(self, cidr: Any, other: Any) -> bool:
        _, net = self.network(cidr)
        inner = self.cidr(other) if isinstance(other, str) else other
        _, sub = self.network(inner)
        return sub.version == net.version and net.overlaps(sub) and net.prefixlen <= sub.prefixlen

    def cidr_ip(self, cidr: Any) -> Any:
        address, _ = self.network(cidr)
        return self.ip_class(address=str(address))

    def masked(self, cidr: Any) -> Any:
        _, net = self.network(cidr)
        return self.cidr_class(address=str(net.network_address), prefix=net.prefixlen)

    def prefix_length(self, cidr: Any) -> int:
        return int(self.network(cidr)[1].prefixlen)



_V4_LINK_LOCAL_MULTICAST = ipaddress.ip_network("224.0.0.0/24")
_V4_BROADCAST = ipaddress.ip_address("255.255.255.255")


# --------------------------------------------------------------------------- lists and sets


def _key(value: Any) -> tuple[int, Any]:
    """A value as CEL compares it for equality: numbers of any kind by value, bools apart
    from numbers."""
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, int | float):
        return (1, value)
    return (2, value)


def _equal(a: Any, b: Any) -> bool:
    return _key(a) == _key(b)


def _is_sorted(values: Sequence[Any]) -> bool:
    items = list(values)
    return all(not items[i - 1] > items[i] for i in range(1, len(items)))


def _sum(values: Sequence[Any]) -> Any:
    items = list(values)
    if not items:
        return 0
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _extreme(name: str, pick: Callable[[Any, Any], bool]) -> Callable[[Sequence[Any]], Any]:
    def run(values: Sequence[Any]) -> Any:
        items = list(values)
        if not items:
            raise ValueError(f"{name} called on empty list")
        best = items[0]
        for item in items[1:]:
            if pick(item, best):
                best = item
        return best

    return run


def _contains(a: Sequence[Any], b: Sequence[Any]) -> bool:
    have = list(a)
    return all(any(_equal(x, y) for x in have) for y in b)


def _intersects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    have = list(a)
    return any(any(_equal(x, y) for x in have) for y in b)


# --------------------------------------------------------------------------- regex


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return _compiled_regex(pattern)
    except re.error as e:
        raise ValueError(f"Illegal regex: {e}") from None


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled_regex(pattern: str) -> re.Pattern[str]:
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        compiled = _REGEX_CACHE[pattern] = re.compile(pattern)
    return compiled


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    compiled = _regex(pattern)
    if limit == 0:
        return []
    out = []
    for match in compiled.finditer(text):
        out.append(match.group(0))
        if 0 < limit <= len(out):
            break
    return out


# --------------------------------------------------------------------------- declarations


def library_functions(ip_class: Any, cidr_class: Any) -> list[Any]:
    """The function declarations of the libraries, for `cel.NewEnv(functions=...)`.

    cel-cpp dispatches at run time on the kind of each argument: the overloads of one
    function over lists of different element types share one implementation (the type
    checker still sees each), and so do those over `net.IP` and `net.CIDR` (both
    messages)."""
    lib = _Library(ip_class, cidr_class)
    T = cel.Type
    IP, CIDR = cel.Type("net.IP"), cel.Type("net.CIDR")
    elements = (("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("bool", T.BOOL),
                ("string", T.STRING), ("bytes", T.BYTES))
    summable = elements[:3]

    def overload(
        id: str, result: Any, params: list[Any], impl: Callable[..., Any] | None, member: bool
    ) -> Any:
        if impl is None:
            return cel.Overload(id=id, return_type=result, parameters=params, is_member=member)
        return cel.Overload(id, result, params, member, impl)

    def over_lists(
        name: str, ids: str, kinds: Sequence[tuple[str, Any]], result: Callable[[Any], Any],
        impl: Callable[..., Any],
    ) -> Any:
        # The implemented overload answers for every element type at run time, so its
        # declared result is dyn (the binding checks what it returns against it); the
        # type checker picks the typed overload of the list's elements.
        return cel.FunctionDecl(name, [
            overload(ids.format(n=n), T.DYN if i == 0 else result(t), [T.List(t)],
                     impl if i == 0 else None, True)
            for i, (n, t) in enumerate(kinds)
        ])

    def function(name: str, *overloads: Any) -> Any:
        return cel.FunctionDecl(name, list(overloads))

    return [
        over_lists("isSorted", "list_{n}_is_sorted_bool", elements, lambda t: T.BOOL, _is_sorted),
        over_lists("sum", "list_{n}_sum_{n}", summable, lambda t: t, _sum),
        over_lists("min", "list_{n}_min_{n}", elements, lambda t: t,
                   _extreme("min", lambda a, b: a < b)),
        over_lists("max", "list_{n}_max_{n}", elements, lambda t: t,
                   _extreme("max", lambda a, b: a > b)),
        function("sets.contains", overload(
            "list_sets_contains_list", T.BOOL, [T.List(T.DYN), T.List(T.DYN)], _contains,
            False)),
        function("sets.equivalent", overload(
            "list_sets_equivalent_list", T.BOOL, [T.List(T.DYN), T.List(T.DYN)],
            lambda a, b: _contains(a, b) and _contains(b, a), False)),
        function("sets.intersects", overload(
            "list_sets_intersects_list", T.BOOL, [T.List(T.DYN), T.List(T.DYN)], _intersects,
            False)),
        function("find", overload(
            "string_find_string", T.STRING, [T.STRING, T.STRING], _find, True)),
        function(
            "findAll",
            overload("string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING],
                     _find_all, True),
            overload("string_find_all_string_int", T.List(T.STRING),
                     [T.STRING, T.STRING, T.INT], _find_all, True),
        ),
        function(
            "ip",
            overload("string_to_ip", IP, [T.STRING], lib.ip, False),
            overload("cidr_ip", IP, [CIDR], lib.cidr_ip, True),
        ),
        function("isIP", overload("is_ip", T.BOOL, [T.STRING], lib.is_ip, False)),
        function("ip.isCanonical", overload(
            "ip_is_canonical", T.BOOL, [T.STRING], lib.is_canonical, False)),
        function("family", overload("ip_family", T.INT, [IP], lib.family, True)),
        function("isUnspecified", overload(
            "ip_is_unspecified", T.BOOL, [IP], lambda m: lib.address(m).is_unspecified, True)),
        function("isLoopback", overload(
            "ip_is_loopback", T.BOOL, [IP], lambda m: lib.address(m).is_loopback, True)),
        function("isLinkLocalMulticast", overload(
            "ip_is_link_local_multicast", T.BOOL, [IP], lib.is_link_local_multicast, True)),
        function("isLinkLocalUnicast", overload(
            "ip_is_link_local_unicast", T.BOOL, [IP],
            lambda m: lib.address(m).is_link_local and not lib.address(m).is_multicast, True)),
        function("isGlobalUnicast", overload(
            "ip_is_global_unicast", T.BOOL, [IP], lib.is_global_unicast, True)),
        function("cidr", overload("string_to_cidr", CIDR, [T.STRING], lib.cidr, False)),
        function("isCIDR", overload("is_cidr", T.BOOL, [T.STRING], lib.is_cidr, False)),
        function(
            "containsIP",
            overload("cidr_contains_ip_string", T.BOOL, [CIDR, T.STRING], lib.contains_ip,
                     True),
            overload("cidr_contains_ip_ip", T.BOOL, [CIDR, IP], lib.contains_ip, True),
        ),
        function(
            "containsCIDR",
            overload("cidr_contains_cidr_string", T.BOOL, [CIDR, T.STRING], lib.contains_cidr,
                     True),
            overload("cidr_contains_cidr", T.BOOL, [CIDR, CIDR], lib.contains_cidr, True),
        ),
        function("masked", overload("cidr_masked", CIDR, [CIDR], lib.masked, True)),
        function("prefixLength", overload(
            "cidr_prefix_length", T.INT, [CIDR], lib.prefix_length, True)),
    ]
