"""clusterscaler.testing.rbac: which calls the rules allow, and which rules no call used."""

from __future__ import annotations

from pathlib import Path

import yaml
from clusterscaler.testing.fakekube import RecordedRequest
from clusterscaler.testing.rbac import Grant, RbacAuthorizer

HOME = "kube-system"
SUBJECT = {"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": HOME}
LEASES = "coordination.k8s.io"


def call(
    verb: str, group: str, resource: str, namespace: str = "", name: str = "", sub: str = ""
) -> RecordedRequest:
    return RecordedRequest("GET", "", {}, verb, group, resource, sub, namespace, name, 200)


def manifests(
    tmp_path: Path, cluster_rules: list[dict], role_rules: dict[str, list[dict]]
) -> RbacAuthorizer:
    docs: list[dict] = [
        {"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": cluster_rules},
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "c"},
            "roleRef": {"kind": "ClusterRole", "name": "c"},
            "subjects": [SUBJECT],
        },
    ]
    for namespace, rules in role_rules.items():
        docs.append(
            {"kind": "Role", "metadata": {"name": "r", "namespace": namespace}, "rules": rules}
        )
        docs.append(
            {
                "kind": "RoleBinding",
                "metadata": {"name": "r", "namespace": namespace},
                "roleRef": {"kind": "Role", "name": "r"},
                "subjects": [SUBJECT],
            }
        )
    path = tmp_path / "rbac.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return RbacAuthorizer.from_manifests([path])


def rule(group: str, resources: list[str], verbs: list[str], names: tuple[str, ...] = ()) -> dict:
    out: dict = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = list(names)
    return out


def test_every_verb_resource_and_name_of_a_rule_is_a_grant_of_its_own(tmp_path):
    authz = manifests(
        tmp_path,
        [rule("", ["nodes", "pods"], ["list", "watch"])],
        {HOME: [rule(LEASES, ["leases"], ["get", "update"], ("a", "b"))]},
    )
    assert [str(g) for g in authz.grants()] == [
        "list nodes cluster-wide",
        "watch nodes cluster-wide",
        "list pods cluster-wide",
        "watch pods cluster-wide",
        "get leases.coordination.k8s.io 'a' in kube-system",
        "get leases.coordination.k8s.io 'b' in kube-system",
        "update leases.coordination.k8s.io 'a' in kube-system",
        "update leases.coordination.k8s.io 'b' in kube-system",
    ]
    unused = authz.unused(
        [
            call("list", "", "nodes"),
            call("watch", "", "nodes"),
            call("list", "", "pods"),
            call("get", LEASES, "leases", HOME, "a"),
            call("update", LEASES, "leases", HOME, "a"),
        ]
    )
    assert unused == [
        Grant("", "", "pods", "watch"),
        Grant(HOME, LEASES, "leases", "get", "b"),
        Grant(HOME, LEASES, "leases", "update", "b"),
    ]


def test_a_cluster_wide_grant_used_only_in_the_home_namespace_belongs_in_a_role(tmp_path):
    authz = manifests(tmp_path, [rule(LEASES, ["leases"], ["create"])], {})
    create_at_home = call("create", LEASES, "leases", HOME)
    assert authz.denied([create_at_home]) == []
    assert authz.unused([create_at_home]) == [Grant("", LEASES, "leases", "create")]
    # Used elsewhere too, it needs to be cluster-wide.
    assert authz.unused([create_at_home, call("create", LEASES, "leases", "apps")]) == []


def test_a_cluster_wide_grant_is_used_by_calls_across_namespaces_or_on_cluster_objects(tmp_path):
    authz = manifests(tmp_path, [rule("", ["pods"], ["list"]), rule("", ["nodes"], ["update"])], {})
    assert authz.unused([call("list", "", "pods"), call("update", "", "nodes", name="n1")]) == []


def test_a_cluster_wide_grant_duplicating_a_role_elsewhere_is_unused(tmp_path):
    authz = manifests(
        tmp_path,
        [rule("", ["configmaps"], ["get"])],
        {"apps": [rule("", ["configmaps"], ["get"])]},
    )
    calls = [call("get", "", "configmaps", "apps", "cm")]
    assert authz.unused(calls) == [Grant("", "", "configmaps", "get")]


def test_a_role_grant_is_used_only_by_calls_in_its_namespace(tmp_path):
    authz = manifests(
        tmp_path,
        [rule("", ["configmaps"], ["list"])],
        {HOME: [rule("", ["configmaps"], ["list"])]},
    )
    assert authz.unused([call("list", "", "configmaps", "apps")]) == [
        Grant(HOME, "", "configmaps", "list")
    ]
    assert authz.unused([call("list", "", "configmaps", HOME)]) == [
        Grant("", "", "configmaps", "list")
    ]


def test_a_subresource_is_a_resource_of_its_own_and_discovery_uses_no_grant(tmp_path):
    authz = manifests(tmp_path, [rule("", ["pods/eviction"], ["create"])], {})
    # Creating a pod is not evicting one; discovery calls use no grant.
    assert authz.unused([call("create", "", "pods", "apps"), call("get", "", "")]) == [
        Grant("", "", "pods/eviction", "create")
    ]
    assert authz.unused([call("create", "", "pods", "apps", "p", "eviction")]) == []
