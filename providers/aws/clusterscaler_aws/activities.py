"""Turning failed ASG scaling activities into instance errors.

When AWS cannot launch what an ASG's desired capacity asks for (no capacity in the zone, a
vCPU or instance quota, spot capacity that cannot be fulfilled), the ASG keeps its desired
capacity and records a failed scaling activity. The instances that never came are reported
with an `OutOfResources` error so the autoscaler backs the group off and tries another at
once instead of waiting for `--max-node-provision-time`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from clusterscaler.api import InstanceErrorClass, InstanceErrorInfo

from clusterscaler_aws.service import ScalingActivity

# EC2 error codes meaning "the cloud has no room for this right now" or "a quota stops it".
OUT_OF_RESOURCES_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",
        "MaxSpotInstanceCountExceeded",
        "MaxSpotFleetRequestCountExceeded",
        "VcpuLimitExceeded",
        "InstanceLimitExceeded",
        "InsufficientFreeAddressesInSubnet",
    }
)
# Activity messages name the code as "<Code> - <explanation>".
_CODE = re.compile(r"\b([A-Z][A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*) - ")
# Some messages only explain, without the code.
_PHRASES = (
    (re.compile(r"do not have sufficient .* capacity", re.IGNORECASE), "InsufficientInstanceCapacity"),
    (re.compile(r"more vCPU capacity than your current vCPU limit", re.IGNORECASE), "VcpuLimitExceeded"),
    (re.compile(r"more instances .* than your current instance limit", re.IGNORECASE), "InstanceLimitExceeded"),
)
FAILED = "Failed"
FINISHED_OK = frozenset({"Successful"})
UNKNOWN_CODE = "ScalingActivityFailed"


def error_code(message: str) -> str:
    """The EC2 error code named or described by a scaling activity's status message."""
    match = _CODE.search(message)
    if match is not None:
        return match.group(1)
    for pattern, code in _PHRASES:
        if pattern.search(message):
            return code
    return UNKNOWN_CODE


def classify(activity: ScalingActivity) -> InstanceErrorInfo:
    code = error_code(activity.status_message or activity.description)
    error_class = (
        InstanceErrorClass.OUT_OF_RESOURCES
        if code in OUT_OF_RESOURCES_CODES
        else InstanceErrorClass.OTHER
    )
    return InstanceErrorInfo(
        error_class=error_class,
        error_code=code,
        error_message=activity.status_message or activity.description,
    )


def launch_error(
    activities: Sequence[ScalingActivity], since: datetime | None
) -> InstanceErrorInfo | None:
    """The error of the newest finished activity if it failed, else `None`.

    Activities that started before `since` (the time of the last change of desired capacity
    this process made) are ignored: they concern an earlier request. A successful activity
    newer than a failure means capacity came back.
    """
    for activity in sorted(activities, key=lambda a: a.start_time, reverse=True):
        if since is not None and activity.start_time < since:
            break
        if activity.status_code == FAILED:
            return classify(activity)
        if activity.status_code in FINISHED_OK:
            return None
    return None
