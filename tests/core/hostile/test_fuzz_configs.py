"""Fuzz targets for what operators and clouds write for the autoscaler to read: the priority
expander's and the proportional autoscaler's ConfigMaps, the kwok provider's ConfigMaps,
gce.conf and kube-env, azure.json, the AWS cloud-config, and the ASG, VMSS and MachineSet
tags and annotations. Each is read, or refused with the provider's `ConfigurationError`
(the expander's, the proportional autoscaler's own error) naming where; a tag or annotation
of one group is reported for that group alone. Nothing else escapes."""

from __future__ import annotations

import atexit
import base64
import datetime
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.api import ConfigurationError
from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client
from clusterscaler.model import ModelError, parse_node
from clusterscaler.plugins.expanders.priority import PriorityConfigError, parse_priorities
from clusterscaler.proportional.params import (
    ParamsError,
    parse_configmap_data,
    parse_params_document,
)
from clusterscaler_aws import tags as aws_tags
from clusterscaler_aws.cloud_config import parse_cloud_config as parse_aws_config
from clusterscaler_azure import tags as azure_tags
from clusterscaler_azure.config import build_config, parse_azure_json
from clusterscaler_externalgrpc.config import parse_config as parse_externalgrpc_config
from clusterscaler_gce.cloud_config import parse_cloud_config as parse_gce_config
from clusterscaler_gce.kube_env import parse_kube_env
from clusterscaler_kwok.config import parse_config as parse_kwok_config
from clusterscaler_kwok.plugin import read_node_groups
from clusterscaler_kwok.templates import build_groups, parse_templates
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fuzzkit import (
    FUZZ,
    HOSTILE_STRINGS,
    HOSTILE_VALUES,
    RESOURCE_SLICE,
    RICH_NODE,
    bounded,
    mutated,
    mutations,
    names_a_changed_field,
    size_of,
    yaml_text,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz


def _yaml(doc: Any) -> str | None:
    try:
        return yaml_text(doc)
    except (RecursionError, ValueError, yaml.YAMLError):
        return None


def _text_of(docs: list[Any]) -> st.SearchStrategy[str]:
    """YAML of mutated `docs`, or any text at all."""
    return st.one_of(
        mutated(docs).map(_yaml).filter(lambda text: text is not None),  # type: ignore[arg-type]
        st.text(max_size=200),
        HOSTILE_STRINGS,
    )


# ------------------------------------------------------------------ ConfigMaps of the core

PRIORITIES = [{"10": [".*spot.*"], "50": ["^gpu-.*$", "on-demand"]}]


@FUZZ
@given(text=_text_of(PRIORITIES))
def test_priority_expander_configmap(text: str) -> None:
    try:
        with bounded(len(text)):
            parsed = parse_priorities(text)
    except PriorityConfigError as error:
        assert "cluster-autoscaler-priority-expander" in str(error), error
        return
    for patterns in parsed.values():
        assert all(isinstance(p, re.Pattern) for p in patterns)


CPA_DOCUMENTS = [
    {"linear": {"coresPerReplica": 256, "nodesPerReplica": 16, "min": 1, "max": 100,
                "preventSinglePointFailure": True, "includeUnschedulableNodes": True}},
    {"ladder": {"coresToReplicas": [[1, 1], [64, 3], [512, 5]],
                "nodesToReplicas": [[1, 1], [2, 2]]}},
]


@FUZZ
@given(doc=st.one_of(mutated(CPA_DOCUMENTS), HOSTILE_VALUES), as_text=st.booleans())
def test_proportional_autoscaler_params(doc: Any, as_text: bool) -> None:
    """Both forms: a ConfigMap's `data` (the mode's JSON as a string) and the
    `--default-params` document."""
    try:
        if as_text and isinstance(doc, dict):
            data = {k: v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()}
            with bounded(size_of(data)):
                parse_configmap_data(data)
        else:
            text = json.dumps(doc)
            with bounded(len(text)):
                parse_params_document(text)
    except (ParamsError, RecursionError) as error:
        # RecursionError: only `json.dumps` of the test's own deep value, never the parser.
        if isinstance(error, RecursionError):
            return
        assert str(error), error
    except ValueError as error:  # json.dumps of NaN keys and the like, before any parsing
        assert "JSON" in type(error).__name__ or "Out of range" in str(error), error


# ------------------------------------------------------------------ kwok

KWOK_CONFIG = {
    "apiVersion": "v1alpha1",
    "readNodesFrom": "configmap",
    "nodegroups": {"fromNodeLabelKey": "kwok-nodegroup"},
    "nodes": {"skipTaint": False, "gpuConfig": {"gpuLabelKey": "k8s.amazonaws.com/accelerator",
                                                 "availableGPUTypes": {"nvidia-tesla-k80": {}}}},
    "configmap": {"name": "kwok-provider-templates"},
}
WHERE = "ConfigMap kube-system/kwok-provider-config, key config"
GOOD_KWOK = parse_kwok_config(json.dumps(KWOK_CONFIG), WHERE)


@FUZZ
@given(text=_text_of([KWOK_CONFIG]))
def test_kwok_provider_config(text: str) -> None:
    try:
        with bounded(len(text)):
            parse_kwok_config(text, WHERE)
    except ConfigurationError as error:
        assert WHERE in str(error), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


_KWOK_NODE = {
    **RICH_NODE,
    "metadata": {
        **RICH_NODE["metadata"],
        "labels": {**RICH_NODE["metadata"]["labels"], "kwok-nodegroup": "big"},
        "annotations": {"cluster-autoscaler.kwok.nodegroup/min-count": "0",
                        "cluster-autoscaler.kwok.nodegroup/max-count": "10"},
    },
}


@FUZZ
@given(bad=mutated([_KWOK_NODE]), form=st.sampled_from(["list", "documents"]))
def test_kwok_templates_a_bad_node_costs_only_its_group(bad: dict[str, Any], form: str) -> None:
    """A healthy template beside a hostile one: the healthy group is built and its node
    read; the hostile one is a group with a problem, or refused with the ConfigMap named."""
    healthy = json.loads(json.dumps(_KWOK_NODE))
    healthy["metadata"]["name"] = "small-template"
    healthy["metadata"]["labels"]["kwok-nodegroup"] = "small"
    nodes = [healthy, bad]
    text = (
        _yaml({"apiVersion": "v1", "kind": "List", "items": nodes})
        if form == "list"
        else "---\n".join(t for t in map(_yaml, nodes) if t is not None)
    )
    if text is None:
        return
    where = "ConfigMap kube-system/kwok-provider-templates, key templates"
    try:
        with bounded(len(text)):
            templates = parse_templates(text, where)
    except ConfigurationError as error:
        assert where in str(error), error
        return
    with bounded(len(text)):
        groups, problems = build_groups(templates, GOOD_KWOK)
    by_name = {g.name: g for g in groups}
    assert "small" in by_name, (groups, problems)
    parse_node(by_name["small"].node)
    for group in groups:
        try:
            parse_node(group.node)
        except ModelError as error:
            assert group.name != "small", error


# ------------------------------------------------------------------ GCE, Azure, AWS files

GCE_CONF = (
    "[global]\nproject-id = p-12345\nlocal-zone = us-central1-b\nregional = true\n"
    "node-tags = a,b\nnode-instance-prefix = gke-x\nmulti-zone = true\n"
    "api-endpoint = https://compute.example.com/compute/v1/\n"
)
AWS_CONF = "[Global]\nvpc = vpc-1\n[ServiceOverride \"1\"]\nService = ec2\nRegion = us-east-1\nURL = https://ec2.example.com\nSigningRegion = us-east-1\n"


@st.composite
def ini_text(draw: st.DrawFn, seed: str) -> str:
    """An INI file with one line replaced, removed or added."""
    lines = seed.splitlines()
    at = draw(st.integers(min_value=0, max_value=len(lines)))
    line = draw(
        st.one_of(
            HOSTILE_STRINGS,
            st.builds(lambda k, v: f"{k} = {v}", st.sampled_from(
                ["project-id", "local-zone", "regional", "multi-zone", "api-endpoint",
                 "token-url", "token-body", "node-tags", "Service", "URL", "Region",
                 "SigningRegion", "vpc", "[global]", "[Global]"]), HOSTILE_STRINGS),
        )
    )
    operation = draw(st.sampled_from(["replace", "insert", "delete"]))
    if operation == "replace" and at < len(lines):
        lines[at] = line
    elif operation == "delete" and at < len(lines):
        del lines[at]
    else:
        lines.insert(at, line)
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=st.one_of(ini_text(GCE_CONF), st.text(max_size=200)))
def test_gce_cloud_config(text: str) -> None:
    try:
        with bounded(len(text)):
            parse_gce_config(text, "gce.conf")
    except ConfigurationError as error:
        assert "gce.conf" in str(error), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


KUBE_ENV = {
    "ENABLE_NODE_PROBLEM_DETECTOR": "daemonset",
    "KUBELET_ARGS": "--v=2 --node-labels=cloud.google.com/gke-nodepool=pool-1",
    "AUTOSCALER_ENV_VARS": "node_labels=a=b,c=d;node_taints=gpu=true:NoSchedule;os=linux;"
    "kube_reserved=cpu=100m,memory=1Gi,ephemeral-storage=1Gi",
}


@FUZZ
@given(text=_text_of([KUBE_ENV]))
def test_gce_kube_env(text: str) -> None:
    try:
        with bounded(len(text)):
            parse_kube_env(text, "instance template t-1")
    except ConfigurationError as error:
        assert "instance template t-1" in str(error), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


AZURE_JSON = {
    "cloud": "AzurePublicCloud", "tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg",
    "location": "westeurope", "vmType": "vmss", "useManagedIdentityExtension": True,
    "cloudProviderBackoffRetries": 6, "cloudProviderRateLimitQPS": 1.5,
    "aadClientId": "id", "aadClientSecret": "secret",
}


@FUZZ
@given(doc=st.one_of(mutated([AZURE_JSON]), HOSTILE_VALUES))
def test_azure_json(doc: Any) -> None:
    try:
        text = json.dumps(doc)
    except (RecursionError, ValueError):
        return
    try:
        with bounded(len(text)):
            build_config(parse_azure_json(text, "azure.json"), environ={})
    except ConfigurationError as error:
        assert str(error), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


@FUZZ
@given(text=st.one_of(ini_text(AWS_CONF), st.text(max_size=200)))
def test_aws_cloud_config(text: str) -> None:
    try:
        with bounded(len(text)):
            parse_aws_config(text, "aws.conf")
    except ConfigurationError as error:
        assert "aws.conf" in str(error), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


# ------------------------------------------------------------------ tags and annotations

_TAG_NAMES = st.one_of(
    st.sampled_from(["scaledownunneededtime", "scaledownutilizationthreshold",
                     "scaledowngpuutilizationthreshold", "scaledownunreadytime",
                     "maxnodeprovisiontime", "ignoredaemonsetsutilization", "zeroormaxnodescaling",
                     "ephemeral-storage", "nvidia.com/gpu", "dedicated", "example.com/role"]),
    HOSTILE_STRINGS,
)


def tags(module: Any) -> st.SearchStrategy[dict[str, str]]:
    """Tags of a group: template labels, taints, resources and options (names and values
    from the hostile strings), and other tags."""
    scheme = module.SCHEME
    prefixes = [scheme.label_prefix, scheme.taint_prefix, scheme.resources_prefix,
                scheme.options_prefix]
    keys = st.one_of(
        st.tuples(st.sampled_from(prefixes), _TAG_NAMES).map("".join), HOSTILE_STRINGS
    )
    return st.dictionaries(keys, HOSTILE_STRINGS, max_size=6)


@pytest.mark.parametrize(("module", "group"), [(aws_tags, "asg-1"), (azure_tags, "vmss-1")],
                         ids=["asg", "vmss"])
@FUZZ
@given(data=st.data())
def test_group_tags(module: Any, group: str, data: st.DataObject) -> None:
    """Every bad tag is an error naming the group and the tag; the rest still apply."""
    given_tags = data.draw(tags(module), label="tags")
    with bounded(size_of(given_tags)):
        parsed = module.parse_template_tags(group, given_tags)
        _, option_errors = module.parse_node_group_options(group, parsed.options)
    for error in (*parsed.errors, *option_errors):
        assert group in str(error) and error.tag in given_tags, error
    bad = {error.tag for error in (*parsed.errors, *option_errors)}
    # Azure tag names spell `/` as `_` (its scheme's `key`); AWS's are the label names.
    scheme = module.SCHEME
    for key, value in given_tags.items():
        if key.startswith(scheme.label_prefix) and key not in bad:
            assert parsed.labels[scheme.key(key[len(scheme.label_prefix) :])] == value


# ------------------------------------------------------------------ kwok's ConfigMaps, as listed

KWOK_NAMESPACE = "kube-system"
KWOK_CONFIGMAP = "kwok-provider-config"
_SMALL_NODE = {
    **_KWOK_NODE,
    "metadata": {**_KWOK_NODE["metadata"], "name": "small-template",
                 "labels": {**_KWOK_NODE["metadata"]["labels"], "kwok-nodegroup": "small"}},
}
KWOK_TEMPLATES = {"apiVersion": "v1", "kind": "List",
                  "items": [_KWOK_NODE, _SMALL_NODE, RESOURCE_SLICE]}


class _Listed:
    """What `list_namespaced_config_map(..., _preload_content=False)` returns."""

    def __init__(self, doc: Any) -> None:
        self.data = json.dumps(doc).encode()


class _ConfigMaps:
    """A `CoreV1Api` that lists the given ConfigMaps' `data`, by name, and no Nodes."""

    def __init__(self, data: dict[str, dict[str, str]]) -> None:
        self._data = data

    def list_namespaced_config_map(self, namespace: str, *, field_selector: str,
                                   _preload_content: bool) -> _Listed:
        name = field_selector.removeprefix("metadata.name=")
        items = [{"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": name, "namespace": namespace}, "data": self._data[name]}
                 ] if name in self._data else []
        return _Listed({"apiVersion": "v1", "kind": "ConfigMapList", "items": items})

    def list_node(self, *, _preload_content: bool) -> _Listed:
        return _Listed({"apiVersion": "v1", "kind": "NodeList", "items": []})


@FUZZ
@given(config=mutations([KWOK_CONFIG]), templates=mutations([KWOK_TEMPLATES]),
       broken=st.sampled_from(["config", "templates", "both"]))
def test_kwok_provider_configmaps_as_listed(
    config: tuple[dict[str, Any], list[Any]], templates: tuple[dict[str, Any], list[Any]],
    broken: str,
) -> None:
    """The provider's two ConfigMaps as the API server lists them, one or both mutated, read
    as the provider reads them at start: node groups (a bad template or ResourceSlice costs
    only its group), or a `ConfigurationError` naming the ConfigMap and, for its config, the
    field."""
    config_doc, config_changes = config if broken != "templates" else (KWOK_CONFIG, [])
    templates_doc, _ = templates if broken != "config" else (KWOK_TEMPLATES, [])
    config_text, templates_text = _yaml(config_doc), _yaml(templates_doc)
    if config_text is None or templates_text is None:
        return
    maps = {KWOK_CONFIGMAP: {"config": config_text},
            "kwok-provider-templates": {"templates": templates_text}}
    if isinstance(config_doc.get("configmap"), dict):
        name = config_doc["configmap"].get("name")
        if isinstance(name, str) and name.strip():
            maps[name.strip()] = maps.pop("kwok-provider-templates")
    try:
        with bounded(len(config_text) + len(templates_text)):
            _, groups, problems, _ = read_node_groups(
                _ConfigMaps(maps), KWOK_NAMESPACE, KWOK_CONFIGMAP)
    except ConfigurationError as error:
        message = str(error)
        assert message.startswith(f"kwok provider: ConfigMap {KWOK_NAMESPACE}/"), message
        assert len(message) < 4_000, f"an error of {len(message)} characters"
        if f"ConfigMap {KWOK_NAMESPACE}/{KWOK_CONFIGMAP}, key config" in message:
            assert ("(document)" in message or "not valid YAML" in message
                    or names_a_changed_field(message, config_changes)), (message, config_changes)
        return
    for problem in problems:
        assert problem.message.startswith("kwok provider: "), problem
        assert len(problem.message) < 4_000, f"a problem of {len(problem.message)} characters"
    if broken == "config" and config_doc.get("nodegroups") == KWOK_CONFIG["nodegroups"]:
        assert {"big", "small"} <= {g.name for g in groups}, (groups, problems)


# ------------------------------------------------------------------ externalgrpc cloud-config


def _tls_files() -> dict[str, str]:
    """A self-signed certificate (its own CA) and its key, as PEM files, for the TLS seed;
    made when the module is read, removed when the process ends."""
    directory = Path(tempfile.mkdtemp(prefix="fuzz-externalgrpc-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return {"cert": str(directory / "tls.crt"), "key": str(directory / "tls.key"),
            "cacert": str(directory / "tls.crt")}


EXTERNALGRPC_CONFIGS = [
    {"address": "external-grpc-provider.kube-system.svc:8086", "grpc_timeout": "10s"},
    {"address": "[::1]:8086", **_tls_files(), "grpc_timeout": "5s"},
]
EXTERNALGRPC_SOURCE = "--cloud-config=/etc/externalgrpc/cloud-config.yaml"
for _seed in EXTERNALGRPC_CONFIGS:
    parse_externalgrpc_config(yaml_text(_seed), EXTERNALGRPC_SOURCE)


@FUZZ
@given(given_config=mutations(EXTERNALGRPC_CONFIGS))
def test_externalgrpc_cloud_config(given_config: tuple[dict[str, Any], list[Any]]) -> None:
    """The cloud-config, mutated: read (its TLS files loaded), or a `ConfigurationError`
    naming the file and the field, in a line."""
    doc, changes = given_config
    text = _yaml(doc)
    if text is None:
        return
    try:
        with bounded(len(text)):
            parse_externalgrpc_config(text, EXTERNALGRPC_SOURCE)
    except ConfigurationError as error:
        message = str(error)
        assert message.startswith(f"externalgrpc provider: {EXTERNALGRPC_SOURCE}: "), message
        assert len(message) < 4_000, f"an error of {len(message)} characters"
        # A text the YAML reader refuses (nested too deep) is named by its line.
        assert "not valid YAML" in message or names_a_changed_field(message, changes), (
            message, changes)


# ------------------------------------------------------------------ --kubeconfig

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "admin@prod",
    "preferences": {},
    "clusters": [
        {"name": "prod", "cluster": {
            "server": "https://203.0.113.10:6443",
            "certificate-authority-data": base64.b64encode(b"not checked before use").decode(),
            "tls-server-name": "kubernetes"}},
        {"name": "dev", "cluster": {"server": "http://127.0.0.1:8080",
                                    "insecure-skip-tls-verify": True}},
    ],
    "users": [
        {"name": "admin", "user": {"token": "abc.def"}},
        {"name": "dev", "user": {"username": "u", "password": "p"}},
    ],
    "contexts": [
        {"name": "admin@prod", "context": {"cluster": "prod", "user": "admin",
                                           "namespace": "kube-system"}},
        {"name": "dev", "context": {"cluster": "dev", "user": "dev"}},
    ],
}


@FUZZ
@given(given_config=mutations([KUBECONFIG]))
def test_kubeconfig(given_config: tuple[dict[str, Any], list[Any]]) -> None:
    """A mutated `--kubeconfig`: a client, or a `KubeConfigError` (exit 2) naming the file and
    the field, in a line. Nothing is dialled: the client is only configured."""
    doc, changes = given_config
    text = _yaml(doc)
    if text is None:
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "kubeconfig"
        path.write_text(text)
        try:
            with bounded(len(text)):
                build_api_client(ClientSettings(kubeconfig=str(path)))
        except KubeConfigError as error:
            message = str(error)
            assert message.startswith(f"--kubeconfig {str(path)!r}: "), message
            assert len(message) < 4_000, f"an error of {len(message)} characters"
            # A text the YAML reader refuses (nested too deep) is named by its line.
            assert "not valid YAML" in message or names_a_changed_field(message, changes), (
                message, changes)
