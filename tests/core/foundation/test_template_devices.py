"""The devices a provider declares for a template from a DRA driver and a GPU count."""

from __future__ import annotations

import pytest
from clusterscaler.api import gpu_template_slices, is_dra_driver_name


def test_one_node_local_pool_with_a_device_per_gpu() -> None:
    (found,) = gpu_template_slices("gpu-template", "gpu.nvidia.com", 3)
    assert found.driver == "gpu.nvidia.com"
    assert found.node_name == "gpu-template"
    assert found.pool.name == "gpu-template"
    assert [d.name for d in found.devices] == ["gpu-0", "gpu-1", "gpu-2"]
    assert all(d.attributes == {"gpu.nvidia.com/type": "gpu"} for d in found.devices)


def test_no_gpus_no_slice() -> None:
    assert gpu_template_slices("n", "gpu.nvidia.com", 0) == ()


@pytest.mark.parametrize(
    "driver", ["", "GPU.example.com", "gpu_example.com", "-gpu.example.com", "a" * 64, "a/b"]
)
def test_bad_driver_names_are_refused_with_the_expected_form(driver: str) -> None:
    assert not is_dra_driver_name(driver)
    with pytest.raises(ValueError, match="DNS subdomain of at most 63 characters"):
        gpu_template_slices("n", driver, 1)


def test_more_gpus_than_one_slice_holds_are_refused() -> None:
    with pytest.raises(ValueError, match="at most 128 GPUs"):
        gpu_template_slices("n", "gpu.nvidia.com", 129)
