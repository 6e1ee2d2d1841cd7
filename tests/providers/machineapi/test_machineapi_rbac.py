"""deploy/machineapi/rbac-machineapi.yaml grants exactly the calls of the machineapi provider.

The provider is driven through every path that calls the API server (list+watch caches,
fresh listings, scale reads and writes, delete-machine marks) in both API groups; its calls
must all be allowed by the Machine API manifest alone (in a separate management cluster
only that one is bound), and every permission of the manifest must be used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.model import Node, parse_node
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.fakekube_resources import ResourceType
from clusterscaler.testing.rbac import RbacAuthorizer
from machineapi_builders import (
    CAPI,
    OPENSHIFT,
    OPENSHIFT_NS,
    MachineController,
    limits,
    machine,
    node,
    resource_name,
    scalable,
)

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "deploy" / "machineapi" / "rbac-machineapi.yaml"
DOC = ROOT / "docs" / "providers" / "machineapi.md"
CAPACITY = {f"{OPENSHIFT}/vCPU": "4", f"{OPENSHIFT}/memoryMb": "16384"}


def as_node(kube: FakeKubeServer, name: str) -> Node:
    raw = kube.get("nodes", name)
    assert raw is not None
    return parse_node(raw)


def replicas(kube: FakeKubeServer, group: str, kind: str, name: str, namespace: str) -> int:
    obj = kube.get(resource_name(group, kind), name, namespace)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def test_the_manifest_grants_exactly_the_calls_of_the_provider(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    # OpenShift: a MachineSet in its namespace, with two running machines.
    kube.create(
        scalable("workers", replicas=2, annotations={**limits(OPENSHIFT, 1, 5), **CAPACITY})
    )
    MachineController(kube, OPENSHIFT).reconcile()
    # Cluster API: a MachineDeployment (with its MachineSet) and a MachineSet of its own.
    md = kube.create(
        scalable(
            "md",
            group=CAPI,
            kind="MachineDeployment",
            namespace="capi",
            replicas=1,
            annotations=limits(CAPI, 1, 5),
        )
    )
    kube.create(scalable("md-1", group=CAPI, namespace="capi", owner=md, replicas=1))
    # Its min size is 0: its infrastructure machine template is read for scale from zero.
    infra = "infrastructure.cluster.x-k8s.io"
    kube.register_resource(ResourceType(infra, ("v1beta1",), "DockerMachineTemplate", "dockermachinetemplates"))
    kube.create(
        {
            "apiVersion": f"{infra}/v1beta1",
            "kind": "DockerMachineTemplate",
            "metadata": {"name": "ms-tmpl", "namespace": "capi"},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi"}},
        }
    )
    ms_obj = scalable("ms", group=CAPI, namespace="capi", replicas=2, annotations=limits(CAPI, 0, 3))
    ms_obj["spec"]["template"]["spec"]["infrastructureRef"] = {
        "apiVersion": f"{infra}/v1beta1",
        "kind": "DockerMachineTemplate",
        "name": "ms-tmpl",
    }
    ms = kube.create(ms_obj)
    for name in ("a", "b"):
        kube.create(machine(ms, name))
        kube.create(node(name))

    # Clusters are watched for their pause.
    kube.register_resource(ResourceType(CAPI, ("v1beta1",), "Cluster", "clusters"))
    # A MachinePool whose instances have no Machines.
    kube.create(
        {
            **scalable("pool", group=CAPI, kind="MachinePool", namespace="capi", replicas=1, annotations=limits(CAPI, 1, 4)),
            "spec": {"replicas": 1, "providerIDList": ["aws:///us-east-1a/i-pool-1"], "template": {"spec": {}}},
        }
    )
    provider = make_provider(watch=True)
    groups = {g.id: g for g in provider.node_groups()}
    assert sorted(groups) == [
        "MachineDeployment/capi/md",
        "MachinePool/capi/pool",
        "MachineSet/capi/ms",
        "MachineSet/openshift-machine-api/workers",
    ]
    openshift = groups["MachineSet/openshift-machine-api/workers"]
    openshift.increase_size(1)  # a machine that never comes: cancelled below
    openshift.decrease_target_size(-1)
    victim = kube.list(resource_name(OPENSHIFT, "Machine"), OPENSHIFT_NS)[0]["metadata"]["name"]
    openshift.delete_nodes([as_node(kube, victim)])
    groups["MachineDeployment/capi/md"].increase_size(1)
    groups["MachinePool/capi/pool"].increase_size(2)
    groups["MachineSet/capi/ms"].delete_nodes([as_node(kube, "a")])

    assert replicas(kube, OPENSHIFT, "MachineSet", "workers", OPENSHIFT_NS) == 1
    assert replicas(kube, CAPI, "MachineDeployment", "md", "capi") == 2
    assert replicas(kube, CAPI, "MachineSet", "ms", "capi") == 1
    assert replicas(kube, CAPI, "MachinePool", "pool", "capi") == 3
    assert groups["MachineSet/capi/ms"].template_node_info().node.capacity.cpu == 2000
    assert [r for r in kube.requests if r.status >= 400] == []
    rbac = RbacAuthorizer.from_manifests([MANIFEST])
    assert rbac.denied(kube.requests) == []
    assert [str(g) for g in rbac.unused(kube.requests)] == []


def test_the_documented_permissions_are_the_manifest_rules() -> None:
    section = DOC.read_text().split("## Permissions", 1)[1]
    documented = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", section, flags=re.S)[0])
    [role] = [
        d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d["kind"] == "ClusterRole"
    ]
    assert documented == role["rules"]
