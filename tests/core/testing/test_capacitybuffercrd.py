"""The CapacityBuffer CRD written from the API's types is upstream's, descriptions aside."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from clusterscaler.testing import upstreamca
from clusterscaler.testing.capacitybuffercrd import CRD_FILE, crd_from_types


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_the_crd_from_the_types_is_upstreams() -> None:
    path = upstreamca.build_dir() / "src" / upstreamca.SUBDIR / "apis" / CRD_FILE
    if not path.is_file():
        pytest.skip(f"upstream CA's source is not unpacked at {path}")
    upstream = _strip(yaml.safe_load(path.read_text()))
    ours = crd_from_types()
    assert ours["metadata"]["name"] == upstream["metadata"]["name"]
    for key in ("group", "names", "scope"):
        assert ours["spec"][key] == upstream["spec"][key], key
    by_name = {v["name"]: v for v in upstream["spec"]["versions"]}
    assert sorted(by_name) == sorted(v["name"] for v in ours["spec"]["versions"])
    for version in ours["spec"]["versions"]:
        theirs = by_name[version["name"]]
        for key in ("served", "storage", "subresources", "additionalPrinterColumns", "schema"):
            assert version[key] == theirs[key], (version["name"], key)
