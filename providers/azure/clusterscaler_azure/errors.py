"""Azure error codes and what the autoscaler makes of them.

When Azure cannot give a scale set the VMs its capacity asks for (no capacity for the size
in the region or zone, the size not offered to the subscription, a quota reached), the
instances that did not come are reported with an `OutOfResources` error, so the autoscaler
backs the group off and tries another one at once instead of waiting for
`--max-node-provision-time`.
"""

from __future__ import annotations

import re

from clusterscaler.api import InstanceErrorClass, InstanceErrorInfo

OUT_OF_RESOURCES_CODES = frozenset(
    code.lower()
    for code in (
        "SkuNotAvailable",
        "AllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
        "ZonalAllocationFailed",
        "QuotaExceeded",
        "OperationNotAllowed",  # ARM's code for "exceeding approved ... cores quota"
        "SpotAllocationFailed",
        "LowPriorityQuotaExceeded",
    )
)
_QUOTA = re.compile(r"quota|exceed(ing|s)? .*limit", re.IGNORECASE)


def error_class(code: str, message: str = "") -> InstanceErrorClass:
    lowered = code.lower()
    if lowered == "operationnotallowed":
        # OperationNotAllowed also covers refusals that no waiting fixes only when it is
        # about quota; anything else is a configuration problem.
        return InstanceErrorClass.OUT_OF_RESOURCES if _QUOTA.search(message) else InstanceErrorClass.OTHER
    if lowered in OUT_OF_RESOURCES_CODES or _QUOTA.search(code):
        return InstanceErrorClass.OUT_OF_RESOURCES
    return InstanceErrorClass.OTHER


def instance_error(code: str, message: str) -> InstanceErrorInfo:
    code = code or "ProvisioningFailed"
    return InstanceErrorInfo(error_class=error_class(code, message), error_code=code,
                             error_message=message)
