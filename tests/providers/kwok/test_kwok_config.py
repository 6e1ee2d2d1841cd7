"""The kwok-provider-config ConfigMap: what parses, what is refused and how errors read,
and where the provider looks for it (KWOK_PROVIDER_CONFIGMAP, POD_NAMESPACE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.api import ConfigurationError
from clusterscaler_kwok import config as kwok_config
from clusterscaler_kwok.config import GpuConfig, KwokConfig, parse_config
from kwokkit import CHART_CONFIG, WHERE


def test_the_upstream_chart_config_parses() -> None:
    # Comments, `nodes:` null, the ignored `kwok: {}` block: as the chart ships it.
    assert parse_config(CHART_CONFIG, WHERE) == KwokConfig(
        read_nodes_from="configmap", group_by="label", group_key="kwok-nodegroup",
        skip_taint=False, gpu=None, templates_configmap="kwok-provider-templates",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: pool}",
         KwokConfig("cluster", "label", "pool")),
        ("readNodesFrom: cluster\nnodegroups: {fromNodeAnnotationKey: eks.amazonaws.com/nodegroup}",
         KwokConfig("cluster", "annotation", "eks.amazonaws.com/nodegroup")),
        ("readNodesFrom: configmap\nconfigmap: {name: tpl, key: ignored}\n"
         "nodegroups: {fromNodeLabelKey: pool, fromNodeAnnotationKey: ''}",
         KwokConfig("configmap", "label", "pool", templates_configmap="tpl")),
        ('{"readNodesFrom": "cluster", "nodegroups": {"fromNodeLabelKey": "pool"},'
         ' "nodes": {"skipTaint": true}}',
         KwokConfig("cluster", "label", "pool", skip_taint=True)),
        ("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: pool}\nnodes:\n  gpuConfig:\n"
         "    gpuLabelKey: k8s.amazonaws.com/accelerator\n"
         "    availableGPUTypes: {nvidia-tesla-p100: {}, nvidia-tesla-k80: {}}",
         KwokConfig("cluster", "label", "pool", gpu=GpuConfig(
             "k8s.amazonaws.com/accelerator", ("nvidia-tesla-k80", "nvidia-tesla-p100")))),
    ],
    ids=["cluster-by-label", "by-annotation", "configmap-blank-annotation-key", "json-skip-taint",
         "gpu-config"],
)
def test_valid_configs(text: str, expected: KwokConfig) -> None:
    assert parse_config(text, WHERE) == expected


CLUSTER = "readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: pool}\n"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("readNodesFrom: [oops", "(document)", "not valid YAML or JSON"),
        ("", "(document)", "required"),
        ("- readNodesFrom: cluster", "(document)", "expected a mapping"),
        ("nodegroups: {fromNodeLabelKey: pool}", "readNodesFrom", "expected configmap or cluster"),
        ("readNodesFrom: label\nnodegroups: {fromNodeLabelKey: pool}", "readNodesFrom",
         "got 'label'"),
        ("readNodesFrom: configmap\nnodegroups: {fromNodeLabelKey: pool}", "configmap",
         "required"),
        ("readNodesFrom: configmap\nconfigmap: {key: templates}\n"
         "nodegroups: {fromNodeLabelKey: pool}", "configmap.name", "required"),
        ("readNodesFrom: configmap\nconfigmap: {name: '  '}\nnodegroups: {fromNodeLabelKey: p}",
         "configmap.name", "required"),
        ("readNodesFrom: cluster", "nodegroups", "required"),
        ("readNodesFrom: cluster\nnodegroups: {}", "nodegroups", "got neither"),
        ("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: ' ', fromNodeAnnotationKey: ''}",
         "nodegroups", "got neither"),
        ("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: a, fromNodeAnnotationKey: b}",
         "nodegroups", "got both"),
        ("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: 7}",
         "nodegroups.fromNodeLabelKey", "expected a string"),
        (CLUSTER + "nodes: {skipTaint: 'true'}", "nodes.skipTaint", "expected true or false"),
        (CLUSTER + "nodes: {skipTaint: 1}", "nodes.skipTaint", "expected true or false"),
        (CLUSTER + "nodes: {gpuConfig: {gpuLabelKey: accel}}", "nodes.gpuConfig",
         "expected both gpuLabelKey and availableGPUTypes"),
        (CLUSTER + "nodes: {gpuConfig: {availableGPUTypes: {k80: {}}}}", "nodes.gpuConfig",
         "expected both gpuLabelKey and availableGPUTypes"),
        (CLUSTER + "nodes: {gpuConfig: {gpuLabelKey: a, availableGPUTypes: [k80]}}",
         "nodes.gpuConfig.availableGPUTypes", "expected a mapping"),
    ],
    ids=["invalid-yaml", "empty", "not-a-mapping", "no-read-nodes-from", "read-nodes-from-label",
         "configmap-missing", "configmap-name-missing", "configmap-name-blank", "no-nodegroups",
         "neither-key", "blank-keys", "both-keys", "key-not-a-string", "skip-taint-string",
         "skip-taint-int", "gpu-label-only", "gpu-types-only", "gpu-types-list"],
)
def test_invalid_configs_name_the_configmap_and_the_field(text: str, field: str,
                                                         message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_config(text, WHERE)
    assert f"kwok provider: {WHERE}: {field}: " in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("team-kwok", "team-kwok"), ("  ", "kwok-provider-config"), (None, "kwok-provider-config")],
    ids=["set", "blank", "unset"],
)
def test_configmap_name_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str | None,
                                             expected: str) -> None:
    if value is None:
        monkeypatch.delenv("KWOK_PROVIDER_CONFIGMAP", raising=False)
    else:
        monkeypatch.setenv("KWOK_PROVIDER_CONFIGMAP", value)
    assert kwok_config.configmap_name() == expected


@pytest.mark.parametrize(
    ("pod_namespace", "service_account", "expected"),
    [
        ("autoscaling", "from-sa", "autoscaling"),
        (" ", "from-sa\n", "from-sa"),
        (None, "from-sa\n", "from-sa"),
        (" ", None, "flag-namespace"),
        (None, "  \n", "flag-namespace"),
    ],
    ids=["pod-namespace", "blank-then-service-account", "unset-then-service-account",
         "blank-no-service-account-then-fallback", "empty-service-account-then-fallback"],
)
def test_provider_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                            pod_namespace: str | None, service_account: str | None,
                            expected: str) -> None:
    sa_file = tmp_path / "namespace"
    if service_account is not None:
        sa_file.write_text(service_account)
    monkeypatch.setattr(kwok_config, "SERVICE_ACCOUNT_NAMESPACE", sa_file)
    if pod_namespace is None:
        monkeypatch.delenv("POD_NAMESPACE", raising=False)
    else:
        monkeypatch.setenv("POD_NAMESPACE", pod_namespace)
    assert kwok_config.provider_namespace("flag-namespace") == expected
