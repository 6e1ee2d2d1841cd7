"""Test doubles for the aws provider: a recording proxy in front of moto's server, and helpers
that create AWS objects the way an operator would.

moto returns no scaling activities and always launches what desired capacity asks for. The
proxy forwards everything to moto and, where a test asks for it, plays AWS during a stockout:
it hides the instances AWS "could not launch" from DescribeAutoScalingGroups and answers
DescribeScalingActivities with a failed activity. It also records every call (to assert
what the provider did and did not ask) and can fail chosen actions.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from clusterscaler.testing.fakehttp import FakeHttpHandler
from clusterscaler_aws.provider import AwsCloudProvider

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")
ASG_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"


@dataclass
class FailedActivity:
    status_message: str
    # None: the activity starts when it is described, i.e. after any request before that.
    start_time: datetime | None = None
    status_code: str = "Failed"


@dataclass
class ProxyState:
    calls: list[str] = field(default_factory=list)
    # ASG name -> instance ids still visible; others are hidden as "never launched".
    visible: dict[str, set[str]] = field(default_factory=dict)
    activities: dict[str, list[FailedActivity]] = field(default_factory=dict)
    fail_actions: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, action: str) -> int:
        with self.lock:
            return sum(1 for c in self.calls if c == action)


def _action(path: str, body: bytes) -> str:
    params = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    if "Action" in params:
        return params["Action"][0]
    return path.split("?", 1)[0]


def _activities_xml(asg: str, activities: list[FailedActivity]) -> bytes:
    members = "".join(
        f"<member><ActivityId>act-{i}</ActivityId><AutoScalingGroupName>{asg}</AutoScalingGroupName>"
        f"<Description>Launching a new EC2 instance</Description><Cause>test</Cause>"
        f"<StartTime>{(a.start_time or datetime.now(UTC)).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}</StartTime>"
        f"<StatusCode>{a.status_code}</StatusCode><StatusMessage>{a.status_message}</StatusMessage>"
        f"<Progress>100</Progress></member>"
        for i, a in enumerate(activities)
    )
    return (
        f'<DescribeScalingActivitiesResponse xmlns="{ASG_NS}"><DescribeScalingActivitiesResult>'
        f"<Activities>{members}</Activities></DescribeScalingActivitiesResult>"
        "<ResponseMetadata><RequestId>proxy</RequestId></ResponseMetadata>"
        "</DescribeScalingActivitiesResponse>"
    ).encode()


def _hide_instances(body: bytes, visible: dict[str, set[str]]) -> bytes:
    ET.register_namespace("", ASG_NS)
    root = ET.fromstring(body)
    ns = {"a": ASG_NS}
    for group in root.iterfind(".//a:AutoScalingGroups/a:member", ns):
        name = group.findtext("a:AutoScalingGroupName", default="", namespaces=ns)
        if name not in visible:
            continue
        instances = group.find("a:Instances", ns)
        if instances is None:
            continue
        for member in list(instances):
            if member.findtext("a:InstanceId", default="", namespaces=ns) not in visible[name]:
                instances.remove(member)
    data: bytes = ET.tostring(root, encoding="utf-8")
    return data


def make_handler(upstream: tuple[str, int], state: ProxyState) -> type[FakeHttpHandler]:
    class Handler(FakeHttpHandler):
        def serve(self, method: str) -> None:
            body = self.read_body()
            action = _action(self.path, body)
            with state.lock:
                state.calls.append(action)
                fail = action in state.fail_actions
            params = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            if fail:
                self._reply(
                    503,
                    b"<Response><Errors><Error><Code>ServiceUnavailable</Code>"
                    b"<Message>injected failure</Message></Error></Errors></Response>",
                )
                return
            if action == "DescribeScalingActivities":
                asg = params.get("AutoScalingGroupName", [""])[0]
                with state.lock:
                    activities = list(state.activities.get(asg, []))
                self._reply(200, _activities_xml(asg, activities))
                return
            conn = http.client.HTTPConnection(*upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "content-length"}
            conn.request(method, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if action == "DescribeAutoScalingGroups" and resp.status == 200:
                with state.lock:
                    visible = {k: set(v) for k, v in state.visible.items()}
                if visible:
                    data = _hide_instances(data, visible)
            self._reply(resp.status, data, resp.getheader("Content-Type") or "text/xml")
            conn.close()

        def _reply(self, status: int, data: bytes, content_type: str = "text/xml") -> None:
            self.send_body(status, data, content_type)

    return Handler


class AwsFixtures:
    """Creates AWS objects in moto the way an operator would."""

    def __init__(self, state: ProxyState, url: str) -> None:
        self.state = state
        # Straight to the proxy, with explicit credentials: built once per session.
        kwargs: dict[str, Any] = {
            "region_name": REGION,
            "endpoint_url": url,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.autoscaling = boto3.client("autoscaling", **kwargs)
        self.ec2 = boto3.client("ec2", **kwargs)
        self.eks = boto3.client("eks", **kwargs)

    def launch_template(self, name: str, instance_type: str) -> str:
        self.ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type},
        )
        return name

    def launch_configuration(self, name: str, instance_type: str) -> str:
        self.autoscaling.create_launch_configuration(
            LaunchConfigurationName=name, ImageId="ami-12c6146b", InstanceType=instance_type
        )
        return name

    def asg(
        self,
        name: str,
        *,
        min_size: int = 0,
        max_size: int = 10,
        desired: int = 0,
        tags: dict[str, str] | None = None,
        instance_type: str = "m5.large",
        launch_configuration: str | None = None,
        mixed_instance_types: list[str] | None = None,
        mixed_overrides: list[dict[str, Any]] | None = None,
        zones: tuple[str, ...] = ZONES,
    ) -> str:
        params: dict[str, Any] = {
            "AutoScalingGroupName": name,
            "MinSize": min_size,
            "MaxSize": max_size,
            "DesiredCapacity": desired,
            "AvailabilityZones": list(zones),
            "Tags": [
                {"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": name,
                 "ResourceType": "auto-scaling-group"}
                for k, v in (tags or {}).items()
            ],
        }
        if launch_configuration is not None:
            params["LaunchConfigurationName"] = launch_configuration
        elif mixed_instance_types is not None or mixed_overrides is not None:
            lt = self.launch_template(f"{name}-lt", instance_type)
            params["MixedInstancesPolicy"] = {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": lt, "Version": "$Latest"},
                    "Overrides": mixed_overrides
                    or [{"InstanceType": t} for t in mixed_instance_types or []],
                }
            }
        else:
            lt = self.launch_template(f"{name}-lt", instance_type)
            params["LaunchTemplate"] = {"LaunchTemplateName": lt, "Version": "$Latest"}
        self.autoscaling.create_auto_scaling_group(**params)
        return name

    def instance_ids(self, asg: str) -> list[str]:
        reply = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])
        return [i["InstanceId"] for i in reply["AutoScalingGroups"][0]["Instances"]]

    def desired(self, asg: str) -> int:
        reply = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg])
        return int(reply["AutoScalingGroups"][0]["DesiredCapacity"])

    def stockout(self, asg: str, message: str) -> None:
        """From now on AWS launches nothing more for `asg` and says why in an activity.

        The instances that exist now stay visible and protected from scale-in (so that
        cancelling requested capacity removes only what "never launched" in moto too).
        """
        ids = self.instance_ids(asg)
        if ids:
            self.autoscaling.set_instance_protection(
                AutoScalingGroupName=asg, InstanceIds=ids, ProtectedFromScaleIn=True
            )
        with self.state.lock:
            self.state.visible[asg] = set(ids)
            self.state.activities[asg] = [FailedActivity(status_message=message)]



ProviderFactory = Callable[..., AwsCloudProvider]
