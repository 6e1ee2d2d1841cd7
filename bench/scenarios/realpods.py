"""Real-shaped Kubernetes objects: pods as `kubectl get pods -o json` returns them.

The other generators write bare pods (one container, requests only). Pods of a real
cluster carry much more, and every part of it is read, skipped or parsed by the autoscaler:
metadata with a ReplicaSet-hashed name, a uid, a resourceVersion, labels with
`pod-template-hash`, an owner reference to the ReplicaSet and the `managedFields` the API
server keeps; a spec with requests and limits, ports, env and envFrom, probes, volume
mounts, the projected `kube-api-access-<random>` token volume the ServiceAccount admission
plugin adds to every pod, a configMap, a secret and an emptyDir volume, the two
tolerations the DefaultTolerationSeconds admission plugin adds, affinity from the
Deployment template and the scheduling fields the API server defaults; a status as the
scheduler (pending) or the kubelet (running) writes it.

`Deployment` describes one workload; `Deployment.pod(...)` builds one of its pods. Pods of
one Deployment share every nested value that does not depend on the pod (the generator
must write 150,000 of them in seconds), which changes nothing once they are serialized.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bench.scenarios.common import HOSTNAME_LABEL, NODE_CREATED, NODE_GROUP_LABEL

# The alphabet Kubernetes draws generated name suffixes from (apimachinery's rand.String).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
OS_LABEL = "kubernetes.io/os"
TEMPLATE_CREATED = "2024-05-01T07:30:00Z"


def random_suffix(rng: random.Random, length: int = 5) -> str:
    n = rng.randrange(len(SUFFIX_ALPHABET) ** length)
    chars = []
    for _ in range(length):
        n, digit = divmod(n, len(SUFFIX_ALPHABET))
        chars.append(SUFFIX_ALPHABET[digit])
    return "".join(chars)


def uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _fields_v1(containers: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    """The `fieldsV1` of the controller manager's managedFields entry for these containers
    and volumes (the shape the API server writes: one `f:` or `k:` key per field set)."""
    fcontainers: dict[str, Any] = {}
    for c in containers:
        entry: dict[str, Any] = {
            ".": {},
            "f:image": {},
            "f:imagePullPolicy": {},
            "f:name": {},
            "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
            "f:terminationMessagePath": {},
            "f:terminationMessagePolicy": {},
        }
        if c.get("env"):
            entry["f:env"] = {".": {}, **{f'k:{{"name":"{e["name"]}"}}': {".": {}, "f:name": {}, "f:value": {}} for e in c["env"]}}
        if c.get("ports"):
            entry["f:ports"] = {".": {}, **{f'k:{{"containerPort":{p["containerPort"]},"protocol":"TCP"}}': {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}} for p in c["ports"]}}
        if c.get("livenessProbe"):
            entry["f:livenessProbe"] = {".": {}, "f:failureThreshold": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}, "f:scheme": {}}, "f:periodSeconds": {}, "f:successThreshold": {}, "f:timeoutSeconds": {}}
            entry["f:readinessProbe"] = entry["f:livenessProbe"]
        fcontainers[f'k:{{"name":"{c["name"]}"}}'] = entry
    return {
        "f:metadata": {
            "f:generateName": {},
            "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
            "f:ownerReferences": {".": {}, 'k:{"uid":"..."}': {}},
        },
        "f:spec": {
            "f:affinity": {".": {}, "f:nodeAffinity": {}, "f:podAntiAffinity": {}},
            "f:containers": fcontainers,
            "f:dnsPolicy": {},
            "f:enableServiceLinks": {},
            "f:restartPolicy": {},
            "f:schedulerName": {},
            "f:securityContext": {},
            "f:terminationGracePeriodSeconds": {},
            "f:volumes": {".": {}, **{f'k:{{"name":"{v["name"]}"}}': {".": {}, "f:name": {}} for v in volumes}},
        },
    }


@dataclass
class Deployment:
    """One Deployment of a real-shaped cluster, and its current ReplicaSet.

    `cpu` and `memory` are each container's requests (the app container, plus a sidecar
    of 50m / 64Mi when `sidecar`); limits are twice the requests. With `pdb` a
    PodDisruptionBudget (maxUnavailable 10%) covers the pods.
    """

    name: str
    namespace: str
    cpu: str
    memory: str
    replicas: int
    seed: int
    sidecar: bool = True
    pdb: bool = False
    local_volume_safe: bool = True
    node_selector: dict[str, str] | None = None
    # Set in __post_init__.
    hash: str = field(init=False)
    rs_name: str = field(init=False)
    rs_uid: str = field(init=False)
    labels: dict[str, str] = field(init=False)
    deployment_uid: str = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(f"{self.seed}/{self.namespace}/{self.name}")
        self.hash = "".join(rng.choice(SUFFIX_ALPHABET) for _ in range(10))
        self.rs_name = f"{self.name}-{self.hash}"
        self.rs_uid = uid(rng)
        self.deployment_uid = uid(rng)
        self.labels = {"app": self.name, "pod-template-hash": self.hash}
        self._suffixes: set[str] = set()
        self._build_template()

    # ------------------------------------------------------------------ shared parts

    def _build_template(self) -> None:
        app = self.name
        probe: dict[str, Any] = {
            "failureThreshold": 3,
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        }
        self._app_container: dict[str, Any] = {
            "name": app,
            "image": f"registry.example.com/{self.namespace}/{app}:1.24.{self.seed % 7}",
            "imagePullPolicy": "IfNotPresent",
            "ports": [
                {"containerPort": 8080, "name": "http", "protocol": "TCP"},
                {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
            ],
            "env": [
                {"name": "APP_NAME", "value": app},
                {"name": "LOG_LEVEL", "value": "info"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"divisor": "0", "resource": "limits.cpu"}}},
            ],
            "envFrom": [
                {"configMapRef": {"name": f"{app}-config"}},
                {"secretRef": {"name": f"{app}-secrets"}},
            ],
            "resources": {
                "limits": {"cpu": _double(self.cpu), "memory": _double(self.memory)},
                "requests": {"cpu": self.cpu, "memory": self.memory},
            },
            "livenessProbe": probe,
            "readinessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/ready"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        self._app_mounts = [
            {"mountPath": "/etc/app", "name": "config", "readOnly": True},
            {"mountPath": "/etc/app/secrets", "name": "secrets", "readOnly": True},
            {"mountPath": "/tmp", "name": "tmp"},
        ]
        self._sidecar: dict[str, Any] = {
            "name": "log-shipper",
            "image": "registry.example.com/platform/log-shipper:2.3.1",
            "imagePullPolicy": "IfNotPresent",
            "args": ["--input=/var/log/app", "--output=stdout"],
            "resources": {
                "limits": {"cpu": "100m", "memory": "128Mi"},
                "requests": {"cpu": "50m", "memory": "64Mi"},
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        self._sidecar_mounts = [{"mountPath": "/var/log/app", "name": "tmp", "readOnly": True}]
        self._volumes = [
            {"configMap": {"defaultMode": 420, "name": f"{app}-config"}, "name": "config"},
            {"name": "secrets", "secret": {"defaultMode": 420, "secretName": f"{app}-secrets"}},
            {"emptyDir": {}, "name": "tmp"},
        ]
        self._tolerations = [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
        ]
        self._affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": OS_LABEL, "operator": "In", "values": ["linux"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": HOSTNAME_LABEL,
                        },
                        "weight": 100,
                    }
                ]
            },
        }
        self._owner = [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": self.rs_name,
                "uid": self.rs_uid,
            }
        ]
        containers = [self._app_container, *([self._sidecar] if self.sidecar else [])]
        fields = _fields_v1(containers, self._volumes)
        self._managed_created = {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": TEMPLATE_CREATED,
        }
        annotations = {"kubectl.kubernetes.io/restartedAt": TEMPLATE_CREATED}
        if not self.local_volume_safe:
            self._annotations = annotations
        else:
            # The emptyDir would otherwise keep the node (--skip-nodes-with-local-storage).
            self._annotations = {
                **annotations,
                "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "tmp",
            }
        qos = "Burstable"
        self._pending_status = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": TEMPLATE_CREATED,
                    "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": qos,
        }
        self._managed_scheduler = {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}},
            "manager": "kube-scheduler",
            "operation": "Update",
            "subresource": "status",
            "time": TEMPLATE_CREATED,
        }
        self._managed_kubelet = {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}},
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": TEMPLATE_CREATED,
        }
        self._qos = qos
        self._running_parts: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}

    # ------------------------------------------------------------------ objects

    def replica_set(self) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": self.rs_name,
                "namespace": self.namespace,
                "uid": self.rs_uid,
                "labels": dict(self.labels),
                "creationTimestamp": TEMPLATE_CREATED,
                "resourceVersion": "1000",
                "generation": 1,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "blockOwnerDeletion": True,
                        "controller": True,
                        "kind": "Deployment",
                        "name": self.name,
                        "uid": self.deployment_uid,
                    }
                ],
            },
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": dict(self.labels)},
            },
            "status": {
                "replicas": self.replicas,
                "readyReplicas": self.replicas,
                "availableReplicas": self.replicas,
                "fullyLabeledReplicas": self.replicas,
                "observedGeneration": 1,
            },
        }

    def pod_disruption_budget(self) -> dict[str, Any]:
        """maxUnavailable 10%, every pod healthy: a tenth of the replicas may go."""
        allowed = max(1, self.replicas // 10)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": f"uid-pdb-{self.namespace}-{self.name}",
                "creationTimestamp": TEMPLATE_CREATED,
                "resourceVersion": "1001",
                "generation": 1,
            },
            "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": self.name}}},
            "status": {
                "currentHealthy": self.replicas,
                "desiredHealthy": self.replicas - allowed,
                "disruptionsAllowed": allowed,
                "expectedPods": self.replicas,
                "observedGeneration": 1,
            },
        }

    def pod(
        self,
        rng: random.Random,
        resource_version: int,
        created: str,
        *,
        node_name: str = "",
        pod_ip: str = "",
        host_ip: str = "",
    ) -> dict[str, Any]:
        """One pod of this Deployment: pending and marked unschedulable by the scheduler,
        or running on `node_name`."""
        # The ReplicaSet controller's names are unique (the API server refuses a taken
        # one and the controller tries another suffix).
        suffix = random_suffix(rng)
        while suffix in self._suffixes:
            suffix = random_suffix(rng)
        self._suffixes.add(suffix)
        token = f"kube-api-access-{random_suffix(rng)}"
        token_mount = {
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "name": token,
            "readOnly": True,
        }
        containers = [{**self._app_container, "volumeMounts": [*self._app_mounts, token_mount]}]
        if self.sidecar:
            containers.append({**self._sidecar, "volumeMounts": [*self._sidecar_mounts, token_mount]})
        volumes = [
            *self._volumes,
            {
                "name": token,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
                    ],
                },
            },
        ]
        spec: dict[str, Any] = {
            "affinity": self._affinity,
            "containers": containers,
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {"fsGroup": 2000, "runAsNonRoot": True},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": self._tolerations,
            "volumes": volumes,
        }
        if self.node_selector:
            spec["nodeSelector"] = self.node_selector
        managed = [self._managed_created]
        if node_name:
            spec["nodeName"] = node_name
            managed.append(self._managed_kubelet)
            status = self._running_status(created, pod_ip, host_ip)
        else:
            managed.append(self._managed_scheduler)
            status = self._pending_status
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "annotations": self._annotations,
                "creationTimestamp": created,
                "generateName": f"{self.rs_name}-",
                "labels": self.labels,
                "managedFields": managed,
                "name": f"{self.rs_name}-{suffix}",
                "namespace": self.namespace,
                "ownerReferences": self._owner,
                "resourceVersion": str(resource_version),
                "uid": uid(rng),
            },
            "spec": spec,
            "status": status,
        }

    def _running_status(self, created: str, pod_ip: str, host_ip: str) -> dict[str, Any]:
        shared = self._running_parts.get(created)
        if shared is None:
            shared = self._running_parts[created] = self._running_shared(created)
        statuses, conditions = shared
        return {
            "conditions": conditions,
            "containerStatuses": statuses,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "phase": "Running",
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "qosClass": self._qos,
            "startTime": created,
        }

    def _running_shared(self, created: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        def state(name: str, image: str) -> dict[str, Any]:
            return {
                "containerID": f"containerd://{name}",
                "image": image,
                "imageID": f"{image}@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
                "lastState": {},
                "name": name,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": created}},
            }

        statuses = [state(self.name, self._app_container["image"])]
        if self.sidecar:
            statuses.append(state("log-shipper", self._sidecar["image"]))
        conditions = [
            {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": kind}
            for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        return statuses, conditions


def _double(quantity: str) -> str:
    """Twice a quantity written as digits and an optional suffix (`250m`, `512Mi`, `2`)."""
    digits = quantity.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return f"{int(digits) * 2}{quantity[len(digits):]}"


def real_node(
    name: str,
    group: str,
    cpu: str,
    memory: str,
    pods: int,
    *,
    zone: str,
    instance_type: str,
    internal_ip: str,
) -> dict[str, Any]:
    """A ready node as the kubelet registers it (labels, addresses, conditions, images
    left out: the autoscaler never reads them)."""
    capacity = {"cpu": cpu, "ephemeral-storage": "101430960Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": str(pods)}
    conditions = [
        {"lastHeartbeatTime": NODE_CREATED, "lastTransitionTime": NODE_CREATED, "message": message, "reason": reason, "status": status, "type": kind}
        for kind, status, reason, message in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        )
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-node-{name}",
            "resourceVersion": "500",
            "creationTimestamp": NODE_CREATED,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": instance_type,
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                HOSTNAME_LABEL: name,
                OS_LABEL: "linux",
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
                NODE_GROUP_LABEL: group,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"sim://{group}/{name}", "podCIDR": "10.244.0.0/24"},
        "status": {
            "addresses": [
                {"address": internal_ip, "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": dict(capacity),
            "capacity": capacity,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "v1.30.0",
                "kubeletVersion": "v1.30.0",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
            },
        },
    }


def ip(i: int, base: int = 10) -> str:
    return f"{base}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
