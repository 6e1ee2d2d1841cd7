from clusterscaler.api import AutoscalingOptions
from clusterscaler.testing.loopharness import LoopHarness


def test_a_loop_grows_the_smallest_group(installed_plugins):
    _, registry = installed_plugins  # this distribution installed in the venv, editable
    options = AutoscalingOptions(expander=["smallest-group", "least-waste"])
    harness = LoopHarness(registry, options)
    big = harness.cloud.add_group("big", max_size=10, nodes=3, cpu="2", memory="8Gi")
    small = harness.cloud.add_group("small", max_size=10, nodes=1, cpu="2", memory="8Gi")
    for node in ("big-1", "big-2", "big-3", "small-1"):
        harness.add_pod(f"busy-{node}", cpu="1500m", memory="1Gi", node=node)
    harness.add_pod("web", cpu="1", memory="1Gi")

    harness.run_once()

    assert small.increases == [1]
    assert big.increases == []
