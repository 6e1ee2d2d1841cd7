"""Objects and a tiny MachineSet controller for the machineapi provider tests.

`MachineController` does what the Machine API controllers do, just enough for the
autoscaler to see its actions: it creates Machines (and their Nodes) up to a MachineSet's
replicas and, going down, deletes the Machines marked with the delete-machine annotation
first, as the controllers' deletion policy does.
"""

from __future__ import annotations

import itertools
from typing import Any

from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json

OPENSHIFT = "machine.openshift.io"
CAPI = "cluster.x-k8s.io"
OPENSHIFT_NS = "openshift-machine-api"
VERSIONS = {OPENSHIFT: "v1beta1", CAPI: "v1beta1"}
# The controller of the pods `pending_pod` makes.
POD_OWNER = ("ReplicaSet", "web", "rs-uid")

Obj = dict[str, Any]
_serial = itertools.count(1)


def min_key(group: str) -> str:
    return f"{group}/cluster-api-autoscaler-node-group-min-size"


def max_key(group: str) -> str:
    return f"{group}/cluster-api-autoscaler-node-group-max-size"


def limits(group: str, min_size: int | str | None, max_size: int | str | None) -> dict[str, str]:
    out = {}
    if min_size is not None:
        out[min_key(group)] = str(min_size)
    if max_size is not None:
        out[max_key(group)] = str(max_size)
    return out


def scalable(
    name: str,
    *,
    group: str = OPENSHIFT,
    kind: str = "MachineSet",
    namespace: str = OPENSHIFT_NS,
    replicas: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: Obj | None = None,
    template_labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    provider_spec: Obj | None = None,
    cluster_name: str = "",
) -> Obj:
    tspec: Obj = {}
    if template_labels:
        tspec["metadata"] = {"labels": template_labels}
    if taints:
        tspec["taints"] = taints
    if provider_spec:
        tspec["providerSpec"] = {"value": provider_spec}
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"set": name}},
        "template": {"metadata": {"labels": {"set": name}}, "spec": tspec},
    }
    if cluster_name:
        spec["clusterName"] = cluster_name
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "annotations": annotations or {},
        "labels": labels or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [_owner_ref(owner)]
    return {
        "apiVersion": f"{group}/{VERSIONS[group]}",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
    }


def _owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


def provider_id_for(name: str) -> str:
    return f"aws:///us-east-1a/i-{name}"


def machine(
    owner: Obj,
    name: str,
    *,
    provider_id: str | None = "default",
    node_name: str | None = "default",
    phase: str = "Running",
    failure_message: str = "",
) -> Obj:
    group = owner["apiVersion"].split("/")[0]
    spec: Obj = {}
    if provider_id == "default":
        provider_id = provider_id_for(name)
    if provider_id:
        spec["providerID"] = provider_id
    status: Obj = {"phase": phase}
    if node_name == "default":
        node_name = name
    if node_name:
        status["nodeRef"] = {"kind": "Node", "name": node_name}
    if failure_message:
        status["failureMessage" if group == CAPI else "errorMessage"] = failure_message
    return {
        "apiVersion": owner["apiVersion"],
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "labels": {"set": owner["metadata"]["name"]},
            "ownerReferences": [_owner_ref(owner)],
        },
        "spec": spec,
        "status": status,
    }


def node(name: str, *, provider_id: str | None = "default", annotations: dict[str, str] | None = None) -> Obj:
    """The Node of Machine `name`, created when the server is given it."""
    return node_json(
        name,
        provider_id=provider_id_for(name) if provider_id == "default" else provider_id,
        annotations=annotations or {},
        created=None,
    )


def pending_pod(name: str, cpu: str) -> Obj:
    """An unschedulable pod of a ReplicaSet in `default`, requesting `cpu` and 1Gi."""
    return pod_json(name, cpu=cpu, owner=POD_OWNER, created=None)


def resource_name(group: str, kind: str) -> str:
    return {
        "MachineSet": "machinesets",
        "MachineDeployment": "machinedeployments",
        "MachinePool": "machinepools",
        "Machine": "machines",
    }[kind] + "." + group


class MachineController:
    """Reconciles MachineSets of one API group in the fake server, like the real controllers.

    `register_nodes=False` leaves new Machines without a providerID or Node (still creating).
    """

    def __init__(self, kube: FakeKubeServer, group: str = OPENSHIFT) -> None:
        self.kube = kube
        self.group = group

    def machines_of(self, machine_set: Obj) -> list[Obj]:
        uid = machine_set["metadata"]["uid"]
        return [
            m
            for m in self.kube.list(resource_name(self.group, "Machine"), machine_set["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in m["metadata"].get("ownerReferences") or [])
        ]

    def reconcile(self, *, register_nodes: bool = True) -> None:
        for ms in self.kube.list(resource_name(self.group, "MachineSet")):
            ns = ms["metadata"]["namespace"]
            want = int(ms["spec"].get("replicas") or 0)
            machines = [m for m in self.machines_of(ms) if not m["metadata"].get("deletionTimestamp")]
            delete_keys = (f"{self.group}/delete-machine", f"{self.group}/cluster-api-delete-machine")
            while len(machines) > want:
                marked = [
                    m for m in machines if set(m["metadata"].get("annotations") or {}) & set(delete_keys)
                ]
                # Unmarked, the oldest goes (as the "Oldest" deletion policy), so a test
                # only sees the machine it chose removed if it marked that machine.
                victim = marked[-1] if marked else machines[0]
                machines.remove(victim)
                name = victim["metadata"]["name"]
                self.kube.delete(resource_name(self.group, "Machine"), name, ns)
                node_name = (victim.get("status") or {}).get("nodeRef", {}).get("name")
                if node_name:
                    self.kube.delete("nodes", node_name)
            while len(machines) < want:
                name = f"{ms['metadata']['name']}-{next(_serial)}"
                if register_nodes:
                    obj = machine(ms, name)
                    self.kube.create(node(name))
                else:
                    obj = machine(ms, name, provider_id=None, node_name=None, phase="Provisioning")
                machines.append(self.kube.create(obj))

    def register_pending(self) -> None:
        """Give every Machine still provisioning its providerID and Node."""
        for m in self.kube.list(resource_name(self.group, "Machine")):
            if (m.get("status") or {}).get("nodeRef"):
                continue
            name = m["metadata"]["name"]
            self.kube.create(node(name))
            self.kube.patch(
                resource_name(self.group, "Machine"),
                name,
                {
                    "spec": {"providerID": provider_id_for(name)},
                    "status": {"phase": "Running", "nodeRef": {"kind": "Node", "name": name}},
                },
                m["metadata"]["namespace"],
            )
