"""The provider kit of `clusterscaler.api`, on its own: `--nodes` specs, node-template tags
in two clouds' spellings, the template node, node groups over a cache and the TTL cache.
The providers' tests check the same through each cloud."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from clusterscaler.api import (
    GPU_RESOURCE,
    AutoscalingOptions,
    CachedNodeGroup,
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    GroupIndex,
    KeyValueError,
    MachineShape,
    NodeGroupFlags,
    NodeGroupMemo,
    NodeGroupNotFoundError,
    NodeGroupSpec,
    ProviderContext,
    ProviderDefaults,
    ProviderProblem,
    Resources,
    TagScheme,
    Taint,
    TtlCache,
    checked_delete,
    cloud_provider_hook,
    config_mapping,
    discovery_params,
    gpus_as_devices,
    ignored_node_group_flags,
    node_group_flags,
    parse_key_values,
    parse_nodes_spec,
    parse_nodes_specs,
    parse_tag_options,
    parse_template_tags,
    problems_by_group,
    read_cloud_config,
    tag_capacity,
    template_node_info,
)
from clusterscaler.testing import RegisterPlugin

FORM = "<min>:<max>:<pool> with 0 <= min <= max and max >= 1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1:10:pool", NodeGroupSpec("pool", 1, 10)), (" 0 : 1 : a:b ", NodeGroupSpec("a:b", 0, 1))],
    ids=["plain", "spaced-with-colon"],
)
def test_nodes_spec(value: str, expected: NodeGroupSpec) -> None:
    assert parse_nodes_spec(value, FORM) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1:10", "expected <min>"),
        ("a:10:pool", "min and max must be integers"),
        ("1:10:", "the name is empty"),
        ("-1:10:pool", "min -1 is negative"),
        ("5:2:pool", "max 2 is below min 5"),
        ("0:0:pool", "max must be at least 1"),
    ],
    ids=["no-name", "not-integers", "empty-name", "negative-min", "max-below-min", "zero-max"],
)
def test_bad_nodes_spec_names_the_flag_and_the_form(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        parse_nodes_spec(value, FORM)
    assert str(info.value).startswith(f"--nodes={value!r}: ")
    assert str(info.value).endswith(FORM)


def test_a_group_named_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"--nodes='2:3:a': pool 'a' is given more than once"):
        parse_nodes_specs(["1:2:a", "2:3:a"], lambda v: parse_nodes_spec(v, FORM),
                          lambda s: s.name, lambda s: f"pool {s.name!r}")


SLASHED = TagScheme(prefix="p/", separator="/", label_key_form="L", taint_key_form="T",
                    resource_name_form="R")
ENCODED = TagScheme(prefix="p_", separator="_", label_key_form="L", taint_key_form="T",
                    resource_name_form="R", encoded_keys=True, ignore_case=True)


def test_template_tags_in_both_spellings() -> None:
    slashed = parse_template_tags("pool", "a", {
        "p/label/example.com/role": "db", "p/taint/gpu": "yes:NoSchedule",
        "p/resources/nvidia.com/gpu": " 2 ", "p/autoscaling-options/scaledownunneededtime": "5m",
        "p/dra-driver": "gpu.nvidia.com", "other": "ignored"}, SLASHED)
    encoded = parse_template_tags("pool", "a", {
        "P_LABEL_example.com_role": "db", "p_taint_gpu": "yes:NoSchedule",
        "p_resources_nvidia.com_gpu": " 2 ", "p_autoscaling-options_scaledownunneededtime": "5m",
        "P_DRA-DRIVER": "gpu.nvidia.com", "other": "ignored"}, ENCODED)
    for tags in (slashed, encoded):
        assert tags.errors == ()
        assert tags.labels == {"example.com/role": "db"}
        assert tags.taints == (Taint(key="gpu", value="yes", effect="NoSchedule"),)
        assert tags.resources == {"nvidia.com/gpu": "2"}
        assert tags.options == {"scaledownunneededtime": "5m"}
        assert tags.dra_driver == "gpu.nvidia.com"


@pytest.mark.parametrize(
    ("tag", "value", "expected"),
    [
        ("p/label/bad key", "x", "L"),
        ("p/label/ok", "not a value!", "a label value"),
        ("p/taint/gpu", "yes", "<value>:<effect>"),
        ("p/taint/gpu", "not a value!:NoSchedule", "a taint value"),
        ("p/resources/", "1", "R"),
        ("p/dra-driver", "Not_A_Driver", "a DRA driver name"),
    ],
    ids=["label-key", "label-value", "taint-effect", "taint-value", "resource-name", "driver"],
)
def test_a_bad_tag_is_an_error_naming_group_tag_and_form(tag: str, value: str, expected: str) -> None:
    tags = parse_template_tags("pool", "a", {tag: value, "p/label/good": "yes"}, SLASHED)
    (error,) = tags.errors
    assert (error.group, error.tag, error.value) == ("a", tag, value)
    assert str(error).startswith(f"pool 'a': tag {tag!r}={value!r}: expected ")
    assert expected in error.expected
    assert tags.labels == {"good": "yes"}


@pytest.mark.parametrize(
    ("scheme", "tag"),
    [(SLASHED, "p/resources/nvidia.com/gpu"), (ENCODED, "p_resources_nvidia.com_gpu")],
    ids=["slashes", "encoded"],
)
def test_tag_capacity_names_the_resources_tag_of_a_bad_quantity(scheme: TagScheme, tag: str) -> None:
    assert tag_capacity("POOL", "a", {"cpu": "4", "nvidia.com/gpu": "2"}, scheme).extended == {
        "nvidia.com/gpu": 2}
    with pytest.raises(ConfigurationError) as failure:
        tag_capacity("POOL", "a", {"cpu": "4", "nvidia.com/gpu": "lots"}, scheme)
    assert str(failure.value).startswith(f"POOL 'a': tag {tag!r}='lots': expected ")


def test_tag_options_keep_the_good_ones() -> None:
    options, errors = parse_tag_options("pool", "a", {
        "scaledownutilizationthreshold": "0.3", "scaledownunneededtime": "soon"}, SLASHED.options_prefix)
    assert options is not None and options.scale_down_utilization_threshold == 0.3
    (error,) = errors
    assert error.tag == "p/autoscaling-options/scaledownunneededtime"
    assert parse_tag_options("pool", "a", {}, SLASHED.options_prefix) == (None, ())


def test_template_node_is_ready_with_its_devices() -> None:
    capacity = Resources.from_k8s({"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"},
                                  obj="template", field="capacity")
    resources, slices = gpus_as_devices(capacity, "t", "gpu.nvidia.com", where="w", without_gpus="none")
    info = template_node_info("t", {"a": "b"}, [], resources, resource_slices=slices)
    assert info.node.ready and info.node.allocatable == info.node.capacity
    assert "nvidia.com/gpu" not in info.node.capacity.extended
    assert len(slices) == 1
    assert gpus_as_devices(capacity, "t", "", where="w", without_gpus="none") == (capacity, ())
    with pytest.raises(ConfigurationError, match=r"^w: none$"):
        gpus_as_devices(Resources.from_k8s({"cpu": "1"}, obj="template", field="capacity"), "t", "gpu.nvidia.com", where="w", without_gpus="none")


@dataclass
class _Record:
    min_size: int
    max_size: int
    target: int = 0
    problems: tuple[str, ...] = ()


class _Group(CachedNodeGroup[_Record]):
    def __init__(self, records: dict[str, _Record], name: str) -> None:
        self.records, self.name = records, name

    @property
    def id(self) -> str:
        return self.name

    def lookup(self) -> _Record | None:
        return self.records.get(self.name)

    def describe(self) -> str:
        return f"pool {self.name!r}"

    def target_size(self) -> int:
        return self.record().target

    def debug_problems(self, record: _Record) -> tuple[str, ...]:
        return record.problems


def test_cached_group_reads_its_record_until_it_is_gone() -> None:
    records = {"a": _Record(1, 5)}
    group = _Group(records, "a")
    assert (group.min_size, group.max_size) == (1, 5)
    records["a"] = _Record(2, 6)
    assert group.max_size == 6
    del records["a"]
    with pytest.raises(NodeGroupNotFoundError, match=r"^pool 'a' is no longer managed or no longer exists$"):
        group.record()


def test_cached_groups_debug_line_says_limits_target_and_first_problem() -> None:
    records = {"a": _Record(0, 3, target=2)}
    group = _Group(records, "a")
    assert group.debug() == "a (0:3, target 2)"
    assert repr(group) == "_Group('a')"
    records["a"] = _Record(0, 3, problems=("tag 'x' is bad", "tag 'y' is bad"))
    assert group.debug() == "a (0:3, target 0); 2 problem(s): tag 'x' is bad"
    del records["a"]
    assert group.debug() == "a (no longer exists)"


def test_memo_gives_one_object_per_group() -> None:
    memo: NodeGroupMemo[str, _Group] = NodeGroupMemo(lambda name: _Group({}, name))
    assert memo.get("a") is memo.get("a")
    assert memo.get("a") is not memo.get("b")
    first = memo.get("a")
    memo.clear()
    assert memo.get("a") is not first


def test_group_index_maps_instances_to_groups_and_swaps_whole() -> None:
    index: GroupIndex[str, _Record, str] = GroupIndex()
    assert (index.records(), index.get("a"), index.group_of("i-1")) == ([], None, None)
    b, a = _Record(0, 2), _Record(1, 3)
    index.replace({"b": b, "a": a}, {"i-1": "a", "i-2": "b"})
    assert index.records() == [a, b]
    assert (index.get("a"), index.group_of("i-1"), index.group_of("i-2")) == (a, "a", "b")
    # A refresh that no longer finds "b" forgets it and its instances.
    index.replace({"a": a}, {"i-1": "a"})
    assert (index.get("b"), index.group_of("i-2")) == (None, None)


def test_group_index_keeps_instances_of_kept_groups_when_refreshed_without_them() -> None:
    index: GroupIndex[str, _Record, str] = GroupIndex()
    a, b = _Record(0, 2), _Record(0, 2)
    index.replace({"a": a, "b": b}, {"i-1": "a", "i-2": "b"})
    index.replace({"a": a})
    assert (index.group_of("i-1"), index.group_of("i-2")) == ("a", None)


def test_group_index_relists_one_group_and_adds_to_another() -> None:
    index: GroupIndex[str, _Record, str] = GroupIndex()
    index.replace({"a": _Record(0, 2), "b": _Record(0, 2)}, {"i-1": "a", "i-2": "a", "i-3": "b"})
    index.relist("a", ["i-2", "i-4"])
    assert [index.group_of(i) for i in ("i-1", "i-2", "i-3", "i-4")] == [None, "a", "b", "a"]
    index.add_instances("b", ["i-5"])
    assert [index.group_of(i) for i in ("i-3", "i-5", "i-4")] == ["b", "b", "a"]


@pytest.mark.parametrize(
    ("current", "count", "min_size", "left"),
    [(3, 2, 1, 1), (3, 3, 0, 0), (2, 0, 2, 2)],
    ids=["down-to-min", "down-to-zero", "nothing-at-min"],
)
def test_checked_delete_gives_the_size_left(current: int, count: int, min_size: int, left: int) -> None:
    assert checked_delete("pool 'a'", current, count, min_size) == left


def test_checked_delete_refuses_below_min_in_cas_words() -> None:
    with pytest.raises(
        CloudProviderError,
        match=r"^pool 'a': delete_nodes: min size reached, nodes will not be deleted: 2 - 2 = 0 < min 1$",
    ):
        checked_delete("pool 'a'", 2, 2, 1)


def test_key_values_are_stripped_and_empty_entries_skipped() -> None:
    assert parse_key_values(" a = 1 ,, b=x=y ,a=2") == {"a": "2", "b": "x=y"}
    assert parse_key_values("os=linux; empty=", ";") == {"os": "linux", "empty": ""}
    assert parse_key_values("") == {}


@pytest.mark.parametrize("raw", ["a=1,b", "a=1, =2"], ids=["no-equals", "no-key"])
def test_key_values_name_the_bad_entry(raw: str) -> None:
    with pytest.raises(KeyValueError) as info:
        parse_key_values(raw)
    assert info.value.entry == raw.split(",")[1].strip()


def test_ttl_cache_reuses_an_answer_for_its_ttl() -> None:
    now = [0.0]
    calls: list[str] = []
    cache: TtlCache[int] = TtlCache(10.0, lambda: now[0])

    def compute() -> int:
        calls.append("x")
        return len(calls)

    assert cache.get_or("k", compute) == 1
    now[0] = 9.9
    assert cache.get_or("k", compute) == 1
    now[0] = 10.0
    assert cache.get_or("k", compute) == 2


def test_ttl_cache_keeps_each_answer_for_its_own_ttl() -> None:
    now = [0.0]
    answers = iter(["failed", "ok", "ok again"])
    cache: TtlCache[str] = TtlCache(
        300.0, lambda: now[0], ttl_of=lambda answer: 30.0 if answer == "failed" else 300.0
    )

    assert cache.get_or("k", lambda: next(answers)) == "failed"
    now[0] = 30.0
    assert cache.get_or("k", lambda: next(answers)) == "ok"
    now[0] = 329.9
    assert cache.get_or("k", lambda: next(answers)) == "ok"


def test_ttl_cache_keeps_no_failure() -> None:
    cache: TtlCache[int] = TtlCache(10.0, lambda: 0.0)

    def fail() -> int:
        raise RuntimeError("cloud unavailable")

    with pytest.raises(RuntimeError):
        cache.get_or("k", fail)
    assert cache.get_or("k", lambda: 7) == 7


def test_provider_defaults_answer_from_the_class_constants() -> None:
    class Cloud(ProviderDefaults):
        PROVIDER_NAME = "mycloud"
        GPU_LABEL = "example.com/accelerator"

    cloud = Cloud()
    assert (cloud.name, cloud.gpu_label()) == ("mycloud", "example.com/accelerator")
    assert cloud.pricing() is None and cloud.resource_limiter() is None


def test_machine_shape_capacity_is_kubelets_with_default_settings() -> None:
    gpu = MachineShape("g5.xlarge", vcpu=4, memory_mib=16384, gpu=1, architecture="amd64")
    assert gpu.capacity() == {"cpu": "4", "memory": "16384Mi", "pods": "110", GPU_RESOURCE: "1"}
    assert gpu.capacity(gpu_resource="example.com/fpga")["example.com/fpga"] == "1"
    plain = MachineShape("m6g.large", vcpu=2, memory_mib=8192, gpu=0, architecture="arm64")
    assert plain.capacity() == {"cpu": "2", "memory": "8192Mi", "pods": "110"}


@pytest.mark.parametrize(
    ("document", "got"), [([1, 2], "got list"), ("text", "got str"), (None, "got an empty file")]
)
def test_config_mapping_names_the_source_the_form_and_what_it_got(document: object, got: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^pool.conf: expected a mapping of pools, {got}$"):
        config_mapping(document, "pool.conf", "a mapping of pools")
    assert config_mapping({"a": 1}, "pool.conf", "a mapping of pools") == {"a": 1}


def test_problems_by_group_give_each_message_in_group_order() -> None:
    found = problems_by_group({"workers": ("a", "b"), "gpu": ("c",), "empty": ()}, "InvalidPool")
    assert found == [
        ProviderProblem("gpu", "InvalidPool", "c"),
        ProviderProblem("workers", "InvalidPool", "a"),
        ProviderProblem("workers", "InvalidPool", "b"),
    ]


def test_cloud_config_file(tmp_path: Path) -> None:
    path = tmp_path / "cloud.conf"
    path.write_text("[global]\n")
    assert read_cloud_config(str(path)) == "[global]\n"
    assert read_cloud_config("") is None
    missing = str(tmp_path / "missing.conf")
    with pytest.raises(ConfigurationError, match=rf"^--cloud-config={missing!r}: cannot read the file: "):
        read_cloud_config(missing)
    # Its read is bounded: /dev/zero was read without end.
    with pytest.raises(ConfigurationError) as caught:
        read_cloud_config("/dev/zero")
    assert str(caught.value) == "--cloud-config='/dev/zero': expected a file of at most 16 MiB, got more"


def test_node_group_flags_need_one_group() -> None:
    def parse(values: Iterable[str]) -> list[NodeGroupSpec]:
        return [parse_nodes_spec(v, FORM) for v in values]

    options = dataclasses.replace(AutoscalingOptions(), nodes=["1:2:a"])
    assert node_group_flags(options, "my", parse, list, nodes_form="N", discovery_form="D") == (
        [NodeGroupSpec("a", 1, 2)], [])
    with pytest.raises(ConfigurationError, match=r"^my provider: no node groups; give --nodes=N or "
                       r"--node-group-auto-discovery=D$"):
        node_group_flags(AutoscalingOptions(), "my", parse, list, nodes_form="N", discovery_form="D")


def test_node_group_flags_read_both_flags_with_one_value_parsers() -> None:
    flags: NodeGroupFlags[NodeGroupSpec, str] = NodeGroupFlags(
        "my", lambda v: parse_nodes_spec(v, FORM), lambda s: s.name, lambda s: f"pool {s.name!r}",
        str.upper, nodes_form="N", discovery_form="D",
    )
    options = dataclasses.replace(AutoscalingOptions(), nodes=["1:2:a"], node_group_auto_discovery=["pool:x"])
    assert flags.read(options) == ([NodeGroupSpec("a", 1, 2)], ["POOL:X"])
    assert flags.discovery(["a", "b"]) == ["A", "B"]
    with pytest.raises(ConfigurationError, match="pool 'a'"):
        flags.nodes(["1:2:a", "0:1:a"])
    with pytest.raises(ConfigurationError, match=r"^my provider: no node groups; give --nodes=N or "):
        flags.read(AutoscalingOptions())


def test_ignored_node_group_flags_are_the_given_ones() -> None:
    options = dataclasses.replace(AutoscalingOptions(), nodes=["1:2:a"])
    assert ignored_node_group_flags(options) == {"--nodes": ["1:2:a"]}
    assert ignored_node_group_flags(AutoscalingOptions()) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("pool", "--node-group-auto-discovery='pool': expected pool:name=<n>"),
        ("asg:tag=x", "--node-group-auto-discovery='asg:tag=x': unsupported discoverer 'asg'; "
                      "the my provider supports only pool:name=<n>"),
    ],
    ids=["no-discoverer", "other-discoverer"],
)
def test_discovery_params_refuse_another_discoverer(value: str, message: str) -> None:
    assert discovery_params("pool:name=a,b", "pool", "my", "pool:name=<n>") == "name=a,b"
    with pytest.raises(ConfigurationError) as failure:
        discovery_params(value, "pool", "my", "pool:name=<n>")
    assert str(failure.value) == message


def test_cloud_provider_hook_registers_the_factory(register_plugin: RegisterPlugin) -> None:
    def build(context: ProviderContext) -> CloudProvider:
        raise AssertionError("not built by registration")

    def check(options: AutoscalingOptions) -> None:
        raise ConfigurationError("--cloud-config='': required")

    # A provider's plugin module binds the hook to its name.
    plugin = types.ModuleType("clusterscaler_mycloud.plugin")
    plugin.clusterscaler_register_cloud_providers = cloud_provider_hook(  # type: ignore[attr-defined]
        "mycloud", build, description="my clouds", check_options=check, aliases=("mine",)
    )
    registry = register_plugin(plugin, name="mycloud")

    registered = registry.cloud_providers["mycloud"]
    assert (registered.factory, registered.description) == (build, "my clouds")
    assert registry.cloud_providers["mine"].factory is build
    options = dataclasses.replace(AutoscalingOptions(), cloud_provider="mycloud")
    with pytest.raises(ConfigurationError, match="required"):
        registry.check_cloud_provider_options(options)
