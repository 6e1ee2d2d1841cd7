"""Raw-JSON calls to the Kubernetes API for Machine API resources.

The official client supplies configuration, authentication and transport; its generated
models are skipped (`_preload_content=False`) because custom resources have none and
parsing JSON once into our own dataclasses is much cheaper.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import structlog
from clusterscaler.api import CloudProviderError

log = structlog.get_logger()

MERGE_PATCH = "application/merge-patch+json"
LIST_PAGE_SIZE = 500


class KubeApiError(CloudProviderError):
    """A Kubernetes API call failed; `status` is the HTTP status (0 when none came back)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeApi:
    """The few calls the provider makes, on top of a `kubernetes.client.ApiClient`."""

    def __init__(
        self, api_client: Any, request_timeout: float = 30.0, page_size: int = LIST_PAGE_SIZE
    ) -> None:
        self._client = api_client
        self._timeout = request_timeout
        self._page_size = page_size

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """Send one request and return the decoded JSON answer."""
        # Imported here, not with the module: the plugin is loaded by every command, and the
        # kubernetes package takes about a second to import.
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            response = self._client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=self._timeout,
            )
        except ApiException as exc:
            raise KubeApiError(
                f"{method} {path}: {exc.status} {exc.reason}: {_message_of(exc.body)}",
                status=int(exc.status or 0),
            ) from exc
        except Exception as exc:  # connection refused, timeouts, TLS: all mean "no answer"
            raise KubeApiError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        data = response.data
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError as exc:
            raise KubeApiError(f"{method} {path}: answer is not JSON: {data[:200]!r}") from exc

    # ------------------------------------------------------------------ discovery

    def preferred_versions(self) -> dict[str, str]:
        """The preferred version of every served API group, by group name."""
        doc = self.request("GET", "/apis")
        out: dict[str, str] = {}
        for entry in doc.get("groups") or []:
            version = (entry.get("preferredVersion") or {}).get("version")
            if not version:
                versions = entry.get("versions") or []
                version = versions[0].get("version") if versions else None
            if entry.get("name") and version:
                out[str(entry["name"])] = str(version)
        return out

    def served_resources(self, group: str, version: str) -> set[str]:
        """Plural names (with subresources, e.g. `machinesets/scale`) served at group/version."""
        doc = self.request("GET", f"/apis/{group}/{version}")
        return {str(r.get("name")) for r in doc.get("resources") or []}

    def resource_kinds(self, group: str, version: str) -> dict[str, str]:
        """The plural name of every kind served at group/version (subresources left out)."""
        doc = self.request("GET", f"/apis/{group}/{version}")
        out: dict[str, str] = {}
        for entry in doc.get("resources") or []:
            name = str(entry.get("name") or "")
            kind = str(entry.get("kind") or "")
            if name and kind and "/" not in name:
                out[kind] = name
        return out

    # ------------------------------------------------------------------ objects

    @staticmethod
    def path(
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        out = f"/apis/{group}/{version}"
        if namespace:
            out += f"/namespaces/{quote(namespace, safe='')}"
        out += f"/{plural}"
        if name:
            out += f"/{quote(name, safe='')}"
            if subresource:
                out += f"/{subresource}"
        return out

    def list(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> Iterator[Mapping[str, Any]]:
        """Every object of a type, following `continue` tokens page by page."""
        path = self.path(group, version, plural, namespace)
        token = ""
        while True:
            query = {"limit": str(self._page_size)}
            if token:
                query["continue"] = token
            doc = self.request("GET", path, query=query)
            yield from doc.get("items") or []
            token = str((doc.get("metadata") or {}).get("continue") or "")
            if not token:
                return

    def get(
        self, group: str, version: str, plural: str, namespace: str, name: str
    ) -> Mapping[str, Any]:
        """One object."""
        doc = self.request("GET", self.path(group, version, plural, namespace, name))
        if not isinstance(doc, Mapping):
            raise KubeApiError(f"GET {plural}/{namespace}/{name}: answer is not an object")
        return doc

    def get_scale(self, group: str, version: str, plural: str, namespace: str, name: str) -> int:
        """`spec.replicas` of the scale subresource."""
        doc = self.request("GET", self.path(group, version, plural, namespace, name, "scale"))
        return _replicas_of(doc, f"{plural}/{namespace}/{name}/scale")

    def set_scale(
        self, group: str, version: str, plural: str, namespace: str, name: str, replicas: int
    ) -> int:
        doc = self.request(
            "PATCH",
            self.path(group, version, plural, namespace, name, "scale"),
            body={"spec": {"replicas": replicas}},
            content_type=MERGE_PATCH,
        )
        return _replicas_of(doc, f"{plural}/{namespace}/{name}/scale")

    def patch_annotations(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
    ) -> None:
        """Set (or, with None, remove) annotations with a merge patch touching nothing else."""
        self.request(
            "PATCH",
            self.path(group, version, plural, namespace, name),
            body={"metadata": {"annotations": dict(annotations)}},
            content_type=MERGE_PATCH,
        )


def _replicas_of(doc: Any, what: str) -> int:
    spec = doc.get("spec") if isinstance(doc, Mapping) else None
    replicas = (spec or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise KubeApiError(f"{what}: spec.replicas: expected an integer, got {replicas!r}")
    return replicas


def _message_of(body: Any) -> str:
    if not body:
        return ""
    try:
        doc = json.loads(body)
    except (TypeError, ValueError):
        return str(body)[:200]
    if isinstance(doc, Mapping):
        return str(doc.get("message") or "")
    return str(doc)[:200]
