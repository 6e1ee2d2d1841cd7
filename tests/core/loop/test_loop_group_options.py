"""CA's per-group autoscaling options, one parser for every provider's tags, annotations
and kube-env (`parse_group_option`), as CA names and reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.api import GROUP_OPTION_NAMES, GroupOptionError, parse_group_option

CASES = [
    ("scaledownutilizationthreshold", "0.7", ("scale_down_utilization_threshold", 0.7)),
    ("ScaleDownGpuUtilizationThreshold", "0", ("scale_down_gpu_utilization_threshold", 0.0)),
    ("scaledownunneededtime", "1h30m", ("scale_down_unneeded_time", timedelta(hours=1.5))),
    ("scaledownunreadytime", "45s", ("scale_down_unready_time", timedelta(seconds=45))),
    ("maxnodeprovisiontime", "15m", ("max_node_provision_time", timedelta(minutes=15))),
    ("ignoredaemonsetsutilization", "T", ("ignore_daemonsets_utilization", True)),
    ("zeroormaxnodescaling", "1", ("zero_or_max_node_scaling", True)),
    ("zeroormaxnodescaling", "false", ("zero_or_max_node_scaling", False)),
]


@pytest.mark.parametrize(("name", "raw", "expected"), CASES, ids=[c[0] + "=" + c[1] for c in CASES])
def test_each_option_parses_as_ca_reads_it(name: str, raw: str, expected: tuple) -> None:
    assert parse_group_option(name, raw) == expected


BAD = [
    ("scaledownutilizationthreshold", "1.5", "a number between 0 and 1, e.g. 0.5"),
    ("scaledownunneededtime", "ten minutes", "a duration such as 10m, 1h30m or 45s"),
    ("zeroormaxnodescaling", "yes", "true or false"),
    ("scaledowntime", "10m", "an option name among " + ", ".join(GROUP_OPTION_NAMES)),
]


@pytest.mark.parametrize(("name", "raw", "expected"), BAD, ids=[b[0] + "=" + b[1] for b in BAD])
def test_bad_values_name_the_expected_form(name: str, raw: str, expected: str) -> None:
    with pytest.raises(GroupOptionError) as info:
        parse_group_option(name, raw)
    assert info.value.expected == expected
