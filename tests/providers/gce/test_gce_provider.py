"""The gce provider against the fake Compute API, through google-cloud-compute's REST
transport: discovery, instances and their states, resize, deleteInstances, cancelling
requested capacity, limits, per-MIG problems and faults."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from clusterscaler.api import (
    CloudProvider,
    CloudProviderError,
    InstanceErrorClass,
    InstanceState,
    Node,
    NodeGroup,
    NodeGroupOptions,
)
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, REGION, ZONE, ProviderFactory

URL = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroups/"


def node_for(provider_id: str) -> Node:
    return Node(name=provider_id.rsplit("/", 1)[-1], provider_id=provider_id)


def test_discovery_finds_migs_by_prefix_with_the_spec_limits(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "gke-prod-pool-a", template="tpl", size=1)
    gce.add_mig(PROJECT, ZONE, "gke-prod-pool-b", template="tpl")
    gce.add_mig(PROJECT, ZONE, "gke-other", template="tpl")
    gce.add_mig(PROJECT, "us-east1-b", "gke-prod-pool-c", template="tpl")

    provider = make_provider(discovery=["mig:namePrefix=gke-prod-pool,min=0,max=5"])

    assert isinstance(provider, CloudProvider)
    groups = provider.node_groups()
    assert [g.id for g in groups] == [URL + "gke-prod-pool-a", URL + "gke-prod-pool-b"]
    assert all(isinstance(g, NodeGroup) for g in groups)
    assert [(g.min_size, g.max_size, g.target_size()) for g in groups] == [(0, 5, 1), (0, 5, 0)]
    # The filter is sent to GCE (and checked again here).
    listing = [r for r in gce.requests if r.path.endswith("/instanceGroupManagers") and r.method == "GET"]
    assert listing and listing[0].query["filter"] == ["name eq gke-prod-pool.+"]


def test_explicit_mig_keeps_its_flag_limits_over_discovery(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool-a", template="tpl")
    provider = make_provider(
        nodes=[f"1:3:{URL}pool-a"], discovery=["mig:namePrefix=pool,min=0,max=9"]
    )
    (group,) = provider.node_groups()
    assert (group.min_size, group.max_size) == (1, 3)


def test_location_from_the_metadata_server(gce: FakeComputeServer, make_provider: ProviderFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool-a", template="tpl")
    monkeypatch.setenv("GCE_METADATA_HOST", gce.metadata_host)
    config = tmp_path / "bare.conf"
    config.write_text(f"[global]\napi-endpoint = {gce.endpoint}\n")
    provider = make_provider(discovery=["mig:namePrefix=pool,min=0,max=3"], config=config)
    assert [g.id for g in provider.node_groups()] == [URL + "pool-a"]
    assert gce.count("GET", "/computeMetadata/v1/instance/zone") == 1


def test_regional_discovery_covers_regional_and_zonal_migs(gce: FakeComputeServer, make_provider: ProviderFactory, tmp_path: Path) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_region(PROJECT, REGION, ["us-central1-a", "us-central1-b"])
    gce.add_mig(PROJECT, REGION, "pool-regional", template="tpl", size=2, zones=["us-central1-a", "us-central1-c"])
    gce.add_mig(PROJECT, "us-central1-a", "pool-zonal", template="tpl")
    config = tmp_path / "regional.conf"
    config.write_text(f"[global]\nproject-id = {PROJECT}\nlocal-zone = {ZONE}\nregional = true\napi-endpoint = {gce.endpoint}\n")

    provider = make_provider(discovery=["mig:namePrefix=pool,min=0,max=4"], config=config)

    ids = sorted(g.id for g in provider.node_groups())
    prefix = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/"
    assert ids == [prefix + "regions/us-central1/instanceGroups/pool-regional",
                   prefix + "zones/us-central1-a/instanceGroups/pool-zonal"]
    regional = next(g for g in provider.node_groups() if "regions/" in g.id)
    assert sorted(i.id.split("/")[3] for i in regional.nodes()) == ["us-central1-a", "us-central1-c"]
    regional.increase_size(1)
    assert gce.target_size(PROJECT, REGION, "pool-regional") == 3
    assert gce.count("POST", "/regions/us-central1/instanceGroupManagers/pool-regional/resize") == 1
    # Its template node is placed in the first of its zones.
    labels = regional.template_node_info().node.labels
    assert labels["topology.kubernetes.io/zone"] == "us-central1-a"


def test_instances_states_errors_and_node_mapping(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=4)
    names = sorted(gce.mig(PROJECT, ZONE, "pool").instances)
    gce.set_instance(PROJECT, ZONE, "pool", names[1], current_action="CREATING", status="")
    gce.set_instance(PROJECT, ZONE, "pool", names[2], current_action="ABANDONING")
    gce.set_instance(
        PROJECT, ZONE, "pool", names[3], current_action="CREATING", status="",
        errors=[{"code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "message": "no n1 left"}],
    )
    provider = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()

    instances = {i.id.rsplit("/", 1)[-1]: i for i in group.nodes()}
    assert instances[names[0]].state is InstanceState.RUNNING
    assert instances[names[1]].state is InstanceState.CREATING and instances[names[1]].error is None
    assert instances[names[2]].state is InstanceState.DELETING
    error = instances[names[3]].error
    assert error is not None and error.error_class is InstanceErrorClass.OUT_OF_RESOURCES
    assert (error.error_code, error.error_message) == ("RESOURCE_POOL_EXHAUSTED", "no n1 left")
    assert instances[names[0]].id == f"gce://{PROJECT}/{ZONE}/{names[0]}"

    found = provider.node_group_for_node(node_for(instances[names[0]].id))
    assert found is not None and found.id == group.id
    assert provider.node_group_for_node(node_for(f"gce://{PROJECT}/{ZONE}/stranger")) is None
    assert provider.node_group_for_node(node_for("aws:///us-east-1a/i-1")) is None
    # Mapping nodes costs no call per node: it reads the cached listing.
    before = gce.count("POST", "listManagedInstances")
    for inst in group.nodes():
        provider.node_group_for_node(node_for(inst.id))
    assert gce.count("POST", "listManagedInstances") == before


@pytest.mark.parametrize(
    ("code", "message", "error_class", "error_code"),
    [
        ("QUOTA_EXCEEDED", "Quota 'CPUS' exceeded", InstanceErrorClass.OUT_OF_RESOURCES, "QUOTA_EXCEEDED"),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", "stockout", InstanceErrorClass.OUT_OF_RESOURCES, "RESOURCE_POOL_EXHAUSTED"),
        ("IP_SPACE_EXHAUSTED", "no IPs", InstanceErrorClass.OTHER, "IP_SPACE_EXHAUSTED"),
        ("SOMETHING_ELSE", "boom", InstanceErrorClass.OTHER, "OTHER"),
    ],
    ids=["quota", "stockout", "ip-space", "other"],
)
def test_creation_errors_are_classified(gce: FakeComputeServer, make_provider: ProviderFactory, code: str, message: str, error_class: InstanceErrorClass, error_code: str) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    gce.stockout(PROJECT, ZONE, "pool", code, message)
    provider = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()
    group.increase_size(1)
    provider.refresh()
    (instance,) = group.nodes()
    assert instance.error is not None
    assert (instance.error.error_class, instance.error.error_code) == (error_class, error_code)


def test_increase_size_resizes_and_waits_for_the_operation(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=1)
    gce.operation_delay = 0.3
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()

    group.increase_size(2)

    assert gce.target_size(PROJECT, ZONE, "pool") == 3
    assert group.target_size() == 3
    resize = [r for r in gce.requests if r.path.endswith("/pool/resize")]
    assert [r.query["size"] for r in resize] == [["3"]]
    assert gce.count("GET", f"/zones/{ZONE}/operations/operation-\\d+$") >= 1
    with pytest.raises(CloudProviderError, match=r"size increase too large, 3 \+ 1 = 4 > max 3"):
        group.increase_size(1)
    assert len([r for r in gce.requests if r.path.endswith("/pool/resize")]) == 1


def test_failed_operation_is_an_error(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    gce.failing_operations["compute.instanceGroupManagers.resize"] = ("QUOTA_EXCEEDED", "Quota 'CPUS' exceeded")
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()
    with pytest.raises(CloudProviderError, match="QUOTA_EXCEEDED: Quota 'CPUS' exceeded"):
        group.increase_size(1)
    # The cache does not pretend to know; the next refresh reads what GCE made of it (the
    # fake applies a resize whose operation then fails).
    assert group.target_size() == 0
    provider.refresh()
    assert group.target_size() == 1
    gce.fail("POST", "/pool/resize$", 503)
    with pytest.raises(CloudProviderError, match=r"instanceGroupManagers\.resize .* failed: 503"):
        group.increase_size(1)
    assert group.target_size() == 1
    assert gce.target_size(PROJECT, ZONE, "pool") == 1


def test_slow_operation_times_out(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    gce.operation_delay = 5.0
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"])
    provider.service.operation_timeout = 0.5
    (group,) = provider.node_groups()
    with pytest.raises(CloudProviderError, match=r"did not finish within 0.5s"):
        group.increase_size(1)


def test_delete_nodes_deletes_the_instances_by_url(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=3)
    provider = make_provider(nodes=[f"1:3:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()
    ids = sorted(i.id for i in group.nodes())

    group.delete_nodes([node_for(ids[0]), node_for(ids[1])])

    (call,) = [r for r in gce.requests if r.path.endswith("/deleteInstances")]
    name0, name1 = (i.rsplit("/", 1)[-1] for i in ids[:2])
    base = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/"
    assert call.body == {"instances": [base + name0, base + name1]}
    assert gce.target_size(PROJECT, ZONE, "pool") == 1
    assert group.target_size() == 1
    states = {i.id: i.state for i in group.nodes()}
    assert states[ids[0]] is InstanceState.DELETING
    provider.refresh()
    assert [i.id for i in group.nodes()] == [ids[2]]


def test_delete_nodes_refuses_min_and_foreign_nodes(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=2)
    gce.add_mig(PROJECT, ZONE, "other", template="tpl", size=1)
    provider = make_provider(nodes=[f"1:3:{PROJECT}/{ZONE}/pool", f"0:3:{PROJECT}/{ZONE}/other"])
    pool = next(g for g in provider.node_groups() if g.id.endswith("/pool"))
    other = next(g for g in provider.node_groups() if g.id.endswith("/other"))
    ids = [i.id for i in pool.nodes()]

    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: \d+ - \d+ = -?\d+ < min 1$"):
        pool.delete_nodes([node_for(i) for i in ids])
    with pytest.raises(CloudProviderError, match="does not belong to this MIG"):
        pool.delete_nodes([node_for(other.nodes()[0].id)])
    assert gce.count("POST", "deleteInstances") == 0
    assert gce.target_size(PROJECT, ZONE, "pool") == 2


def test_force_delete_nodes_goes_below_the_min_size(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    """--force-delete-unregistered-nodes / --force-delete-failed-nodes: a broken instance
    goes even when the MIG is at its minimum; a plain deletion refuses."""
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=1)
    provider = make_provider(nodes=[f"1:3:{PROJECT}/{ZONE}/pool"])
    (pool,) = provider.node_groups()
    (instance,) = pool.nodes()
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 1 - 1 = 0 < min 1$"):
        pool.delete_nodes([node_for(instance.id)])
    pool.force_delete_nodes([node_for(instance.id)])
    assert gce.count("POST", "deleteInstances") == 1
    assert gce.target_size(PROJECT, ZONE, "pool") == 0


def test_decrease_target_size_cancels_only_requested_capacity(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    mig = gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=2)
    provider = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/pool"])
    (group,) = provider.node_groups()
    # GCE accepted a target of 4 but has only made 2 instances so far.
    mig.target_size = 4
    provider.refresh()

    with pytest.raises(CloudProviderError, match="2 instance\\(s\\) exist"):
        group.decrease_target_size(-3)
    group.decrease_target_size(-2)

    assert gce.target_size(PROJECT, ZONE, "pool") == 2
    assert len(gce.mig(PROJECT, ZONE, "pool").instances) == 2


def test_a_broken_mig_is_its_own_problem(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "good", template="tpl", size=1)
    gce.add_mig(PROJECT, ZONE, "broken", template="tpl", size=1)
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/good", f"0:3:{PROJECT}/{ZONE}/broken", f"0:3:{PROJECT}/{ZONE}/missing"])
    assert [g.id for g in provider.node_groups()] == [URL + "broken", URL + "good"]

    gce.fail("GET", "/instanceGroupManagers/broken$", 500, times=10)
    provider.refresh()

    assert [g.id for g in provider.node_groups()] == [URL + "good"]
    problems = {(p.node_group, p.reason) for p in provider.problems()}
    assert problems == {(URL + "broken", "MigUnreadable"), (URL + "missing", "MigNotFound")}
    # The good MIG still scales.
    provider.node_groups()[0].increase_size(1)
    assert gce.target_size(PROJECT, ZONE, "good") == 2
    # The broken one's nodes are not claimed by any group meanwhile.
    broken_instance = gce.provider_ids(PROJECT, ZONE, "broken")[0]
    assert provider.node_group_for_node(node_for(broken_instance)) is None


def test_reads_are_retried_on_rate_limits_and_server_errors(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=1)
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"])
    gce.fail("GET", "/instanceGroupManagers/pool$", 429, times=1, reason="rateLimitExceeded")
    gce.fail("POST", "/listManagedInstances$", 503, times=1)
    provider.refresh()
    assert provider.problems() == []
    assert [g.target_size() for g in provider.node_groups()] == [1]


def test_instances_are_relisted_at_most_once_per_min_wait(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=1)
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"], min_wait=timedelta(minutes=5))
    listed = gce.count("POST", "listManagedInstances")
    provider.refresh()
    provider.refresh()
    assert gce.count("POST", "listManagedInstances") == listed
    # ...unless this process changed the MIG.
    provider.node_groups()[0].increase_size(1)
    provider.refresh()
    assert gce.count("POST", "listManagedInstances") == listed + 1
    assert len(provider.node_groups()[0].nodes()) == 2


def test_concurrent_refreshes_read_every_mig(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    for index in range(6):
        gce.add_mig(PROJECT, ZONE, f"pool-{index}", template="tpl", size=index % 2)
    provider = make_provider(discovery=["mig:namePrefix=pool-,min=0,max=3"], concurrent=4)
    assert [g.target_size() for g in provider.node_groups()] == [0, 1, 0, 1, 0, 1]


def test_has_instance_asks_gce_for_unlisted_instances(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl", size=1)
    gce.add_mig(PROJECT, ZONE, "unmanaged", template="tpl", size=1)
    provider = make_provider(nodes=[f"0:3:{PROJECT}/{ZONE}/pool"])
    managed = gce.provider_ids(PROJECT, ZONE, "pool")[0]
    elsewhere = gce.provider_ids(PROJECT, ZONE, "unmanaged")[0]
    assert provider.has_instance(node_for(managed))
    assert provider.has_instance(node_for(elsewhere))
    assert not provider.has_instance(node_for(f"gce://{PROJECT}/{ZONE}/gone"))
    assert provider.has_instance(node_for("kind://docker/node"))
    gce.fail("GET", "/instances/vanished$", 500, times=10)
    assert provider.has_instance(node_for(f"gce://{PROJECT}/{ZONE}/vanished"))


def test_zero_or_max_and_other_options_from_kube_env(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    kube_env = (
        "AUTOSCALER_ENV_VARS: os=linux;autoscaling_options=zeroormaxnodescaling=true,"
        "scaledownunneededtime=2m,scaledownutilizationthreshold=0.7\n"
    )
    gce.add_template(PROJECT, "atomic", kube_env=kube_env)
    gce.add_template(PROJECT, "plain")
    gce.add_mig(PROJECT, ZONE, "atomic", template="atomic")
    gce.add_mig(PROJECT, ZONE, "plain", template="plain")
    provider = make_provider(nodes=[f"0:4:{PROJECT}/{ZONE}/atomic", f"0:4:{PROJECT}/{ZONE}/plain"])
    atomic, plain = provider.node_groups()
    defaults = NodeGroupOptions(scale_down_unneeded_time=timedelta(minutes=10), scale_down_unready_time=timedelta(minutes=20))
    options = atomic.get_options(defaults)
    assert options is not None
    assert options.zero_or_max_node_scaling is True
    assert options.scale_down_unneeded_time == timedelta(minutes=2)
    assert options.scale_down_utilization_threshold == 0.7
    assert options.scale_down_unready_time == timedelta(minutes=20)
    assert plain.get_options(defaults) is None


def test_bad_kube_env_options_are_a_problem_of_that_mig(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "bad", kube_env="AUTOSCALER_ENV_VARS: autoscaling_options=zeroormaxnodescaling=maybe\n")
    gce.add_mig(PROJECT, ZONE, "pool", template="bad")
    provider = make_provider(nodes=[f"0:4:{PROJECT}/{ZONE}/pool"])
    (problem,) = provider.problems()
    assert problem.reason == "InvalidKubeEnv"
    assert "zeroormaxnodescaling='maybe': expected true or false" in problem.message
    assert "MIG test-project/us-central1-b/pool instance template 'bad'" in problem.message
    (group,) = provider.node_groups()
    assert group.get_options(NodeGroupOptions()) is None
