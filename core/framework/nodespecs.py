"""`--nodes=<min>:<max>:<name>`: a node group named on the command line with its limits.

As in Cluster Autoscaler, an explicit group keeps the min and max of the flag whatever its
cloud says, and a group may be named once. Every provider reads the flag here; it only says
what a name of its cloud looks like (`name_problem`) and how the flag's expected form reads
in its words (`form`, e.g. `<min>:<max>:<asg-name> with 0 <= min <= max, e.g. 1:10:my-asg`).
Errors name the flag, its value, what is wrong and the expected form.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from clusterscaler.interfaces.cloudprovider import ConfigurationError

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

T = TypeVar("T")
D = TypeVar("D")
N = TypeVar("N")


# Not slotted: on Python 3.11 a frozen slotted generic dataclass cannot be made through a
# subscripted alias (`NodeGroupSpec[str](...)`, as providers name theirs).
@dataclass(frozen=True)
class NodeGroupSpec(Generic[N]):
    """One `--nodes` entry: the group `name` managed with these limits. The name is as the
    provider reads it: the text of the flag (`NodeGroupSpec[str]`, what `parse_nodes_spec`
    returns), or a reference parsed from it (GCE's MIG: project, zone and name)."""

    name: N
    min_size: int
    max_size: int


def _no_name_problem(name: str) -> str | None:
    return "the name is empty" if not name else None


def parse_nodes_spec(
    value: str, form: str, name_problem: Callable[[str], str | None] = _no_name_problem
) -> NodeGroupSpec[str]:
    """One `--nodes` value. `name_problem(name)` says what is wrong with the name part, or
    None when it names a group of the cloud. Raises `ConfigurationError`."""
    parts = value.split(":", 2)
    if len(parts) != 3:
        raise ConfigurationError(f"--nodes={value!r}: expected {form}")
    min_text, max_text, name = (p.strip() for p in parts)
    try:
        min_size, max_size = int(min_text), int(max_text)
    except ValueError:
        raise ConfigurationError(f"--nodes={value!r}: min and max must be integers; expected {form}") from None
    if (problem := name_problem(name)) is not None:
        raise ConfigurationError(f"--nodes={value!r}: {problem}; expected {form}")
    check_nodes_limits(value, min_size, max_size, form)
    return NodeGroupSpec(name=name, min_size=min_size, max_size=max_size)


def check_nodes_limits(value: str, min_size: int, max_size: int, form: str) -> None:
    """The limits of one `--nodes` value: 0 <= min <= max and max >= 1."""
    if min_size < 0:
        raise ConfigurationError(f"--nodes={value!r}: min {min_size} is negative; expected {form}")
    if max_size < min_size:
        raise ConfigurationError(f"--nodes={value!r}: max {max_size} is below min {min_size}; expected {form}")
    if max_size == 0:
        raise ConfigurationError(f"--nodes={value!r}: max must be at least 1; expected {form}")


def parse_nodes_specs(
    values: Iterable[str],
    parse: Callable[[str], T],
    key: Callable[[T], Hashable],
    describe: Callable[[T], str],
) -> list[T]:
    """Every `--nodes` value, each parsed by `parse`; a group named twice (the same `key`)
    is an error naming it as `describe` does (`ASG 'workers'`)."""
    specs: list[T] = []
    seen: set[Hashable] = set()
    for value in values:
        spec = parse(value)
        if key(spec) in seen:
            raise ConfigurationError(f"--nodes={value!r}: {describe(spec)} is given more than once")
        seen.add(key(spec))
        specs.append(spec)
    return specs


def discovery_params(value: str, discoverer: str, provider: str, form: str) -> str:
    """The parameters of one `--node-group-auto-discovery` value `<discoverer>:<params>`.
    Raises `ConfigurationError` naming the flag, the value and the expected `form` when the
    value has no `:` or names a discoverer other than `discoverer`, the one `provider`
    supports; the provider parses the parameters."""
    name, sep, params = value.partition(":")
    if not sep:
        raise ConfigurationError(f"--node-group-auto-discovery={value!r}: expected {form}")
    if name.strip() != discoverer:
        raise ConfigurationError(
            f"--node-group-auto-discovery={value!r}: unsupported discoverer {name!r}; "
            f"the {provider} provider supports only {form}"
        )
    return params


def node_group_flags(
    options: AutoscalingOptions,
    provider: str,
    parse_nodes: Callable[[Iterable[str]], list[T]],
    parse_discovery: Callable[[Iterable[str]], list[D]],
    *,
    nodes_form: str,
    discovery_form: str,
) -> tuple[list[T], list[D]]:
    """`--nodes` and `--node-group-auto-discovery`, each parsed by the provider's parser; a
    `ConfigurationError` naming `provider` and both flags' forms when neither names a group."""
    explicit = parse_nodes(options.nodes)
    discovery = parse_discovery(options.node_group_auto_discovery)
    if not explicit and not discovery:
        raise ConfigurationError(
            f"{provider} provider: no node groups; give --nodes={nodes_form} or "
            f"--node-group-auto-discovery={discovery_form}"
        )
    return explicit, discovery


def ignored_node_group_flags(options: AutoscalingOptions) -> dict[str, list[str]]:
    """`--nodes` and `--node-group-auto-discovery` by flag, those given only: what a provider
    whose node groups come from elsewhere (a ConfigMap, a service) logs as ignored, as
    upstream's kwok and externalgrpc providers ignore them, so that a Cluster Autoscaler
    command line keeps working."""
    given = {
        "--nodes": list(options.nodes),
        "--node-group-auto-discovery": list(options.node_group_auto_discovery),
    }
    return {flag: values for flag, values in given.items() if values}


@dataclass(frozen=True, slots=True)
class NodeGroupFlags(Generic[T, D]):
    """How a provider reads `--nodes` and `--node-group-auto-discovery`: its name, its
    parser of one value of each flag, how a `--nodes` group is keyed and named (a group
    named twice is refused, named as `describe` does: `ASG 'workers'`), and both flags'
    forms for the error of a command line that names no group. A provider declares one
    and reads its flags with `read(options)`."""

    provider: str
    parse_node: Callable[[str], T]
    key: Callable[[T], Hashable]
    describe: Callable[[T], str]
    parse_discovery: Callable[[str], D]
    nodes_form: str
    discovery_form: str

    def nodes(self, values: Iterable[str]) -> list[T]:
        """Every `--nodes` value, parsed; a group named twice is an error."""
        return parse_nodes_specs(values, self.parse_node, self.key, self.describe)

    def discovery(self, values: Iterable[str]) -> list[D]:
        """Every `--node-group-auto-discovery` value, parsed."""
        return [self.parse_discovery(value) for value in values]

    def read(self, options: AutoscalingOptions) -> tuple[list[T], list[D]]:
        """Both flags, parsed; one of them must name a group."""
        return node_group_flags(
            options, self.provider, self.nodes, self.discovery,
            nodes_form=self.nodes_form, discovery_form=self.discovery_form,
        )
