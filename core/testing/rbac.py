"""An RBAC authorizer for tests: does a set of manifests allow the calls a component made?

Build it from RBAC manifests (the ClusterRoles and Roles bound to one ServiceAccount are
followed through their bindings), then ask it about the requests ``FakeKubeServer``
recorded::

    authorizer = RbacAuthorizer.from_manifests(["deploy/aws/rbac.yaml"])
    assert authorizer.denied(fake_kube.requests) == []  # nothing missing
    assert authorizer.unused(fake_kube.requests) == []  # nothing extra

It evaluates rules as the Kubernetes RBAC authorizer does for resource requests: API group,
resource (``pods/eviction`` for subresources), verb, and ``resourceNames`` (which never
match requests without a name, such as list or create). Discovery (``/api``, ``/apis``,
``/version``) is allowed, as ``system:discovery`` grants it to every authenticated user.

``unused`` is the other direction: every permission the manifests give (each API group,
resource, verb and resource name of each rule, cluster-wide or in a namespace) that no
request needed. A cluster-wide permission is needed only by a request a namespaced one could
not serve: on a cluster-scoped resource or across all namespaces, or in a namespace other
than the service account's that no Role there covers. Anything else belongs in a Role.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .fakekube import RecordedRequest

__all__ = ["Grant", "RbacAuthorizer", "Rule"]


def _covers(granted: str, requested: str) -> bool:
    return granted in (requested, "*")


def _resource_of(request: RecordedRequest) -> str:
    return request.resource + (f"/{request.subresource}" if request.subresource else "")


@dataclass(frozen=True, order=True)
class Grant:
    """One permission: ``verb`` on ``resource`` (``pods/eviction`` for a subresource) of API
    group ``group``, on the object ``name`` only when it is set; in ``namespace``, or
    cluster-wide when that is empty."""

    namespace: str
    group: str
    resource: str
    verb: str
    name: str = ""

    def matches(self, request: RecordedRequest) -> bool:
        """Whether this permission allows ``request`` (whatever its namespace when
        cluster-wide)."""
        return (
            (not self.namespace or request.namespace == self.namespace)
            and _covers(self.group, request.group)
            and _covers(self.resource, _resource_of(request))
            and _covers(self.verb, request.verb)
            and (not self.name or request.name == self.name)
        )

    def __str__(self) -> str:
        what = f"{self.verb} {self.resource}"
        if self.group:
            what += f".{self.group}"
        if self.name:
            what += f" {self.name!r}"
        return what + (f" in {self.namespace}" if self.namespace else " cluster-wide")


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
        return any(grant.matches(request) for grant in self.grants())

    def grants(self, namespace: str = "") -> Iterator[Grant]:
        """Each permission of the rule, in ``namespace`` (empty: cluster-wide)."""
        names = sorted(self.resource_names) or [""]
        for group, resource, verb, name in itertools.product(
            sorted(self.api_groups), sorted(self.resources), sorted(self.verbs), names
        ):
            yield Grant(namespace, group, resource, verb, name)


class RbacAuthorizer:
    """Cluster-wide rules, plus rules that apply in one namespace only."""

    def __init__(
        self,
        cluster_rules: Iterable[Rule],
        namespaced_rules: Mapping[str, Iterable[Rule]],
        *,
        home_namespace: str = "",
    ):
        """``home_namespace``: the service account's (see ``unused``)."""
        self.cluster_rules = tuple(cluster_rules)
        self.namespaced_rules = {ns: tuple(rules) for ns, rules in namespaced_rules.items()}
        self.home_namespace = home_namespace

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
        return cls(cluster, namespaced, home_namespace=namespace)

    def allows(self, request: RecordedRequest) -> bool:
        if not request.resource:
            return True  # discovery and other non-resource URLs
        if any(rule.allows(request) for rule in self.cluster_rules):
            return True
        return self._namespaced_allows(request)

    def _namespaced_allows(self, request: RecordedRequest) -> bool:
        return any(
            rule.allows(request) for rule in self.namespaced_rules.get(request.namespace, ())
        )

    def grants(self) -> list[Grant]:
        """Every permission of the bound roles, cluster-wide ones first."""
        out = {g for rule in self.cluster_rules for g in rule.grants()}
        out.update(
            g
            for namespace, rules in self.namespaced_rules.items()
            for rule in rules
            for g in rule.grants(namespace)
        )
        return sorted(out)

    def _needs_cluster_scope(self, request: RecordedRequest) -> bool:
        """Whether only a cluster-wide permission should serve ``request``: it is on a
        cluster-scoped resource or across all namespaces, or in a namespace other than the
        service account's that no Role covers."""
        if not request.namespace:
            return True
        return request.namespace != self.home_namespace and not self._namespaced_allows(request)

    def unused(self, requests: Iterable[RecordedRequest]) -> list[Grant]:
        """The permissions that none of ``requests`` needed (see the module's docstring)."""
        made = [r for r in requests if r.resource]
        return [
            grant
            for grant in self.grants()
            if not any(
                grant.matches(r) and (grant.namespace or self._needs_cluster_scope(r)) for r in made
            )
        ]

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
