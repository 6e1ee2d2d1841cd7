"""An RBAC authorizer for tests: does a set of manifests allow the calls a component made?

Build it from RBAC manifests (the ClusterRoles and Roles bound to one ServiceAccount are
followed through their bindings), then ask it about the requests ``FakeKubeServer``
recorded::

    authorizer = RbacAuthorizer.from_manifests(["deploy/rbac.yaml"])
    assert authorizer.denied(fake_kube.requests) == []

It evaluates rules as the Kubernetes RBAC authorizer does for resource requests: API group,
resource (``pods/eviction`` for subresources), verb, and ``resourceNames`` (which never
match requests without a name, such as list or create). Discovery (``/api``, ``/apis``,
``/version``) is allowed, as ``system:discovery`` grants it to every authenticated user.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .fakekube import RecordedRequest

__all__ = ["RbacAuthorizer", "Rule"]


@dataclass(frozen=True)
class Rule:
    """One PolicyRule."""

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str) -> Rule:
        for key in ("apiGroups", "resources", "verbs"):
            if not isinstance(raw.get(key), list):
                raise ValueError(
                    f"{where}: rule field {key!r} must be a list, got {raw.get(key)!r}"
                )
        return cls(
            frozenset(raw["apiGroups"]),
            frozenset(raw["resources"]),
            frozenset(raw["verbs"]),
            frozenset(raw.get("resourceNames") or ()),
        )

    def allows(self, request: RecordedRequest) -> bool:
        resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
        if request.group not in self.api_groups and "*" not in self.api_groups:
            return False
        if resource not in self.resources and "*" not in self.resources:
            return False
        if request.verb not in self.verbs and "*" not in self.verbs:
            return False
        return not self.resource_names or request.name in self.resource_names


class RbacAuthorizer:
    """Cluster-wide rules, plus rules that apply in one namespace only."""

    def __init__(
        self, cluster_rules: Iterable[Rule], namespaced_rules: Mapping[str, Iterable[Rule]]
    ):
        self.cluster_rules = tuple(cluster_rules)
        self.namespaced_rules = {ns: tuple(rules) for ns, rules in namespaced_rules.items()}

    @classmethod
    def from_manifests(
        cls,
        paths: Iterable[str | Path],
        *,
        service_account: str = "cluster-autoscaler",
        namespace: str = "kube-system",
    ) -> RbacAuthorizer:
        """Follow the bindings of ``namespace/service_account`` through the manifests."""
        docs: list[dict[str, Any]] = []
        for path in paths:
            docs.extend(d for d in yaml.safe_load_all(Path(path).read_text()) if d)
        roles: dict[tuple[str, str, str], list[Rule]] = {}
        for doc in docs:
            if doc.get("kind") in ("ClusterRole", "Role"):
                meta = doc.get("metadata") or {}
                ns = meta.get("namespace", "") if doc["kind"] == "Role" else ""
                where = f"{doc['kind']} {meta.get('name')}"
                roles[(doc["kind"], ns, meta.get("name", ""))] = [
                    Rule.parse(r, where) for r in doc.get("rules") or []
                ]
        cluster: list[Rule] = []
        namespaced: dict[str, list[Rule]] = {}
        for doc in docs:
            kind = doc.get("kind")
            if kind not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            if not any(
                s.get("kind") == "ServiceAccount"
                and s.get("name") == service_account
                and s.get("namespace") == namespace
                for s in doc.get("subjects") or []
            ):
                continue
            ref = doc.get("roleRef") or {}
            binding_ns = (doc.get("metadata") or {}).get("namespace", "")
            role_ns = binding_ns if ref.get("kind") == "Role" else ""
            key = (ref.get("kind", ""), role_ns, ref.get("name", ""))
            if key not in roles:
                raise ValueError(
                    f"{kind} {(doc.get('metadata') or {}).get('name')}: roleRef {ref!r} names no "
                    "role in the manifests"
                )
            if kind == "ClusterRoleBinding":
                cluster.extend(roles[key])
            else:
                namespaced.setdefault(binding_ns, []).extend(roles[key])
        return cls(cluster, namespaced)

    def allows(self, request: RecordedRequest) -> bool:
        if not request.resource:
            return True  # discovery and other non-resource URLs
        if any(rule.allows(request) for rule in self.cluster_rules):
            return True
        return any(
            rule.allows(request) for rule in self.namespaced_rules.get(request.namespace, ())
        )

    def denied(self, requests: Iterable[RecordedRequest]) -> list[tuple[str, str, str, str, str]]:
        """The distinct (verb, group, resource[/subresource], namespace, name) not allowed."""
        out = {
            (
                r.verb,
                r.group or "core",
                r.resource + (f"/{r.subresource}" if r.subresource else ""),
                r.namespace,
                r.name,
            )
            for r in requests
            if not self.allows(r)
        }
        return sorted(out)
