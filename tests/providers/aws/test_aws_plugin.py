"""Plugin wiring (entry point, hooks, flag) and template tag parsing."""

from __future__ import annotations

import argparse
from datetime import timedelta
from importlib.metadata import entry_points
from typing import Any

import pytest
from aws_fakes import AwsFixtures, ProviderFactory
from clusterscaler.api import Taint
from clusterscaler.commands.cli import parse_autoscaler_args
from clusterscaler.framework.pluginmanager import PluginHost
from clusterscaler.interfaces.cloudprovider import CloudProvider, NodeGroup, NodeGroupOptions
from clusterscaler.interfaces.registry import Registry
from clusterscaler.testing import RegisterPlugin
from clusterscaler_aws import plugin
from clusterscaler_aws.tags import parse_node_group_options, parse_template_tags
from hypothesis import given, settings
from hypothesis import strategies as st

PREFIX = "k8s.io/cluster-autoscaler/node-template/"


def test_entry_point_is_installed() -> None:
    eps = [ep for ep in entry_points(group="clusterscaler") if ep.name == "aws"]
    assert [ep.value for ep in eps] == ["clusterscaler_aws.plugin"]


def test_registers_the_aws_provider(register_plugin: RegisterPlugin) -> None:
    registry = register_plugin(plugin, name="aws", distribution="clusterscaler-aws")
    registered = registry.cloud_providers["aws"]
    assert registered.factory is plugin.build_provider
    assert registered.source.distribution == "clusterscaler-aws"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], False),
        (["--aws-use-static-instance-list"], True),
        (["--aws-use-static-instance-list=true"], True),
        (["--aws-use-static-instance-list=false"], False),
    ],
    ids=["default", "bare", "true", "false"],
)
def test_static_instance_list_flag(argv: list[str], expected: Any) -> None:
    parser = argparse.ArgumentParser()
    plugin.clusterscaler_add_options(parser=parser)
    assert parser.parse_args(argv).aws_use_static_instance_list is expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--aws-use-static-instance-list"], True),
        (["--aws-use-static-instance-list", "false"], False),
        ([], False),
    ],
    ids=["bare", "space-form", "absent"],
)
def test_flag_reaches_options_extra_through_the_cli(installed_plugins: tuple[PluginHost, Registry], argv: list[str], expected: Any) -> None:
    host, registry = installed_plugins
    options, _ = parse_autoscaler_args(
        ["--cloud-provider=aws", "--nodes=1:3:workers", *argv], host, registry
    )
    assert options.extra["aws_use_static_instance_list"] is expected
    assert options.nodes == ["1:3:workers"]


def test_static_instance_list_flag_rejects_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    plugin.clusterscaler_add_options(parser=parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--aws-use-static-instance-list=maybe"])
    err = capsys.readouterr().err
    assert "invalid value 'maybe' for --aws-use-static-instance-list: expected true or false" in err


def test_provider_and_groups_satisfy_the_protocols(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=3)
    provider = make_provider(nodes=["0:3:workers"])
    assert isinstance(provider, CloudProvider)
    assert all(isinstance(g, NodeGroup) for g in provider.node_groups())
    assert provider.name == "aws"
    assert provider.gpu_label() == "k8s.amazonaws.com/accelerator"
    assert provider.node_groups()[0].debug() == "workers (0:3, target 0)"


def test_template_tags_are_split_by_family() -> None:
    parsed = parse_template_tags(
        "workers",
        {
            PREFIX + "label/example.com/role": "db",
            PREFIX + "taint/dedicated": "db:NoExecute",
            PREFIX + "resources/hugepages-2Mi": "1Gi",
            PREFIX + "autoscaling-options/scaledownunreadytime": "20m",
            "eks:cluster-name": "prod",
            "eks:nodegroup-name": "ng-1",
            "Name": "unrelated",
        },
    )
    assert dict(parsed.labels) == {"example.com/role": "db"}
    assert parsed.taints == (Taint("dedicated", "db", "NoExecute"),)
    assert dict(parsed.resources) == {"hugepages-2Mi": "1Gi"}
    assert dict(parsed.options) == {"scaledownunreadytime": "20m"}
    assert (parsed.eks_cluster, parsed.eks_nodegroup) == ("prod", "ng-1")
    assert parsed.errors == ()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (PREFIX + "label/-bad", "x", "label key"),
        (PREFIX + "label/ok", "v" * 64, "at most 63"),
        (PREFIX + "taint/t", "value:Sometimes", "effect one of"),
        (PREFIX + "taint/t", "no-effect", "<value>:<effect>"),
        (PREFIX + "resources/bad name", "1", "resource name"),
    ],
    ids=["label-key", "label-value-too-long", "unknown-effect", "no-effect", "resource-name"],
)
def test_bad_template_tags_name_asg_tag_and_form(key: str, value: str, expected: Any) -> None:
    parsed = parse_template_tags("workers", {key: value, PREFIX + "label/good": "yes"})
    (error,) = parsed.errors
    message = str(error)
    assert "ASG 'workers'" in message and key in message and expected in message
    assert dict(parsed.labels) == {"good": "yes"}


@pytest.mark.parametrize(
    ("options", "expected", "errors"),
    [
        ({}, None, 0),
        (
            {"scaledowngpuutilizationthreshold": "0.3", "maxnodeprovisiontime": "20m",
             "zeroormaxnodescaling": "true"},
            NodeGroupOptions(
                scale_down_gpu_utilization_threshold=0.3,
                max_node_provision_time=timedelta(minutes=20),
                zero_or_max_node_scaling=True,
            ),
            0,
        ),
        (
            {"scaledownutilizationthreshold": "1.5", "scaledownunneededtime": "5m"},
            NodeGroupOptions(scale_down_unneeded_time=timedelta(minutes=5)),
            1,
        ),
        ({"scaledownunneededtime": "soon"}, None, 1),
        ({"nosuchoption": "1"}, None, 1),
    ],
    ids=["none", "several", "one-bad-one-good", "bad-duration", "unknown-option"],
)
def test_autoscaling_options(options: dict[str, str], expected: Any, errors: int) -> None:
    parsed, problems = parse_node_group_options("workers", options)
    assert parsed == expected
    assert len(problems) == errors


_FAMILIES = ("label/", "taint/", "resources/", "autoscaling-options/", "")
_tag_keys = st.builds(
    lambda family, name: PREFIX + family + name if family else name,
    st.sampled_from(_FAMILIES),
    st.text(alphabet="abcAZ09-._/ :", min_size=0, max_size=12),
)


@settings(max_examples=200)
@given(st.dictionaries(_tag_keys, st.text(alphabet="abc09-._: NoSchedule", max_size=20), max_size=8))
def test_every_template_tag_is_either_used_or_reported(tags: dict[str, str]) -> None:
    parsed = parse_template_tags("workers", tags)
    used = (
        {PREFIX + "label/" + k for k in parsed.labels}
        | {PREFIX + "taint/" + t.key for t in parsed.taints}
        | {PREFIX + "resources/" + k for k in parsed.resources}
        | {PREFIX + "autoscaling-options/" + k for k in parsed.options}
    )
    reported = {e.tag for e in parsed.errors}
    template_tags = {
        k for k in tags if k.startswith(PREFIX) and not k.startswith(PREFIX + "autoscaling-options/")
    }
    assert template_tags <= used | reported
    assert not used & reported
    assert all(e.group == "workers" and e.expected for e in parsed.errors)
