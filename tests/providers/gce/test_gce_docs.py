"""docs/providers/gce.md and deploy/gce/ stay true: the example gce.conf files parse, the
flags and reasons they name exist, and the manifests mount the gce.conf they hold."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from clusterscaler_gce import mig_cache, plugin
from clusterscaler_gce.cloud_config import parse_cloud_config
from clusterscaler_gce.kube_env import KNOWN_OPTIONS
from clusterscaler_gce.specs import parse_discovery_spec

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "providers" / "gce.md").read_text()


def test_example_gce_conf_in_the_doc_parses() -> None:
    (block,) = re.findall(r"```ini\n(.*?)```", DOC, flags=re.S)
    config = parse_cloud_config(block, source="docs/providers/gce.md")
    assert config.project_id == "my-project"
    assert config.api_endpoint == "https://compute.googleapis.com"


def test_discovery_examples_parse() -> None:
    for spec in set(re.findall(r"--node-group-auto-discovery=(mig:\S+)", DOC)):
        parse_discovery_spec(spec.rstrip("`"))


def test_flags_options_and_reasons_named_exist() -> None:
    assert plugin.CONCURRENT_REFRESHES_FLAG in DOC and plugin.MIN_REFRESH_WAIT_FLAG in DOC
    for option in KNOWN_OPTIONS:
        assert f"`{option}`" in DOC, option
    source = Path(mig_cache.__file__).read_text()
    for reason in ("MigUnreadable", "MigNotFound", "InstanceTemplateUnreadable", "InvalidKubeEnv", "DiscoveryFailed"):
        assert reason in DOC and f'"{reason}"' in source, reason


def test_deploy_manifests_mount_their_gce_conf_and_it_parses() -> None:
    folder = ROOT / "deploy" / "gce"
    documents = [
        d for path in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d
    ]
    account = next(d for d in documents if d["kind"] == "ServiceAccount")["metadata"]
    assert "iam.gke.io/gcp-service-account" in account["annotations"]
    config_map = next(d for d in documents if d["kind"] == "ConfigMap")
    conf = config_map["data"]["gce.conf"]
    assert parse_cloud_config(conf, source="deploy/gce/deployment.yaml").local_zone == "us-central1-b"
    pod = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]
    [volume] = [v for v in pod["volumes"] if v.get("configMap", {}).get("name") == config_map["metadata"]["name"]]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert f"--cloud-config={mount['mountPath']}/gce.conf" in pod["containers"][0]["command"]
