"""Kubernetes client configuration as kubectl users expect it.

Precedence, as in Cluster Autoscaler: ``--kubeconfig`` (a file), then the in-cluster service
account when running in a pod, then the default kubeconfig (``$KUBECONFIG`` or
``~/.kube/config``). ``--kubernetes`` overrides the API server URL of whichever was loaded.
``--kube-client-qps`` / ``--kube-client-burst`` bound the request rate with a token bucket,
like client-go's rate limiter; watches are long requests and take one token each.

Each request can be told to an observer (``RequestObserver``): its method, host, status code
(``<error>`` when no answer came), its duration and the time it waited for a token, which
``/metrics`` exposes as client-go's ``rest_client_*`` series.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import structlog
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.providercontext import KubeApiClient

__all__ = [
    "ClientSettings",
    "KubeConfigError",
    "RequestObserver",
    "TokenBucket",
    "build_api_client",
    "observe_all_clients",
    "spare_capacity_client",
]

log = structlog.get_logger()

_SERVICE_ACCOUNT_HOST_ENV = "KUBERNETES_SERVICE_HOST"


class KubeConfigError(ValueError):
    """The Kubernetes client could not be configured; the message says from what."""


class RequestObserver(Protocol):
    """Told of each request once it is answered or failed: the HTTP method, the API
    server's host:port, the status code (``"200"``, ``"404"``; ``"<error>"`` when no answer
    came, as client-go labels it), the seconds from sending to the answer's headers, and the
    seconds it waited for a --kube-client-qps token first. Called on the requesting thread."""

    def __call__(
        self, method: str, host: str, code: str, seconds: float, throttled: float
    ) -> None: ...


@dataclass(frozen=True)
class ClientSettings:
    """The client-related flags (``--kubeconfig``, ``--kubernetes``, QPS, burst, user agent)."""

    kubeconfig: str = ""
    kubernetes: str = ""
    qps: float = 5.0
    burst: int = 10
    user_agent: str = "cluster-autoscaler"
    # (connect, read) seconds for every request that does not set its own (watches do): a
    # half-open connection must fail the call, not hang the loop or the Lease renewal.
    request_timeout: tuple[float, float] = (10.0, 60.0)
    # Whether the in-cluster service account is used in a pod when no --kubeconfig is
    # given. False for a client that must come from the default kubeconfig files (the kwok
    # provider's KWOK_PROVIDER_MODE=local, as upstream's default loading rules).
    in_cluster: bool = True

    def __post_init__(self) -> None:
        if self.qps < 0:
            raise KubeConfigError(
                f"--kube-client-qps: expected a non-negative number, got {self.qps!r}"
            )
        if self.burst < 1:
            raise KubeConfigError(
                f"--kube-client-burst: expected a positive integer, got {self.burst!r}"
            )
        if self.kubernetes and not self.kubernetes.startswith(("http://", "https://")):
            raise KubeConfigError(
                f"--kubernetes: expected an API server URL such as https://10.0.0.1:6443, "
                f"got {self.kubernetes!r}"
            )

    @classmethod
    def from_options(cls, options: AutoscalingOptions) -> ClientSettings:
        """Read the settings from an ``AutoscalingOptions``."""
        return cls(
            kubeconfig=options.kubeconfig,
            kubernetes=options.kubernetes,
            qps=float(options.kube_client_qps),
            burst=int(options.kube_client_burst),
            user_agent=options.user_agent,
        )


class TokenBucket:
    """A token bucket: ``qps`` tokens per second, at most ``burst`` saved up.

    ``qps == 0`` disables the limit. ``acquire`` blocks until a token is available, taking
    its place in line (the tokens of the requests already waiting are theirs);
    ``acquire_spare`` takes only a token that nobody waits for.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        """Add the tokens earned since the last call, up to ``burst`` (the lock held)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def acquire(self) -> float:
        """Take one token, waiting if needed; return the seconds waited."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.qps
        if wait > 0:
            self._sleep(wait)
        return wait

    def acquire_spare(self) -> float:
        """Take one token that no `acquire` waits for, waiting until there is one; return
        the seconds waited. While `acquire` callers ask for more than ``qps`` tokens a
        second this waits for their demand to fall: it never delays them."""
        if self.qps <= 0:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                # (A whole token, but for the rounding of the refill's arithmetic.)
                if self._tokens >= 1.0 - 1e-9:
                    self._tokens -= 1.0
                    return waited
                # When one whole token is free, unless `acquire` callers take it first.
                wait = max((1.0 - self._tokens) / self.qps, 0.001)
            self._sleep(wait)
            waited += wait


def _rate_limit(
    rest_client: Any,
    bucket: TokenBucket,
    request_timeout: tuple[float, float],
    observe: RequestObserver | None = None,
    *,
    spare: bool = False,
) -> None:
    """Make every request of the client's REST object take a token first (`spare`: only a
    token nobody else waits for, `TokenBucket.acquire_spare`), and time out; tell
    `observe` of each.

    The verb helpers (``GET``, ``POST``, ...) all go through ``request``, so replacing it on
    the instance covers them all. A request without its own ``_request_timeout`` gets
    ``request_timeout``.
    """
    original = rest_client.request
    take = bucket.acquire_spare if spare else bucket.acquire

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = request_timeout
        waited = take()
        if waited > 0.5:
            log.debug("kube_client_throttled", waited_seconds=round(waited, 3))
        if observe is None:
            return original(method, url, *args, **kwargs)
        started = time.monotonic()
        code = "<error>"
        try:
            response = original(method, url, *args, **kwargs)
            code = str(getattr(response, "status", "") or "<error>")
            return response
        except k8s_client.ApiException as exc:
            # The client raises the answers outside 2xx; status 0 is no answer at all.
            if exc.status:
                code = str(exc.status)
            raise
        finally:
            try:
                observe(method, urlsplit(url).netloc, code, time.monotonic() - started, waited)
            except Exception as exc:
                # Counting a request must never fail it.
                log.warning("kube_request_not_counted", error=f"{type(exc).__name__}: {exc}")

    rest_client.request = request


# What the client's kubeconfig loader raises on a file it cannot use.
_KUBECONFIG_ERRORS = (
    k8s_config.ConfigException, OSError, ValueError, yaml.YAMLError, TypeError,
    AttributeError, KeyError, IndexError, RecursionError,
)


def _default_kubeconfigs() -> list[tuple[str, str]]:
    """The kubeconfig files read without --kubeconfig, as client-go lists them, each with
    how an error names it: every entry of $KUBECONFIG (a list separated by ':'), else
    ~/.kube/config. Files that do not exist are left out, as client-go leaves them out,
    and a file listed twice is read once."""
    listed = os.environ.get("KUBECONFIG", "")
    if not listed:
        path = os.path.expanduser(os.path.join("~", ".kube", "config"))
        return [(f"kubeconfig {path!r}", path)] if os.path.exists(path) else []
    entries = [entry for entry in listed.split(os.pathsep) if entry]
    files: list[tuple[str, str]] = []
    for i, entry in enumerate(entries, 1):
        # The client's loader expands `~` in each entry: the file checked is the one it reads.
        path = os.path.expanduser(entry)
        if os.path.exists(path) and path not in (p for _, p in files):
            place = f" entry {i} of {len(entries)}" if len(entries) > 1 else ""
            files.append((f"KUBECONFIG{place} {path!r}", path))
    return files


def _check_kubeconfigs(files: list[tuple[str, str]]) -> str | None:
    """Refuse kubeconfig files whose text is not YAML or whose fields are not of the form
    kubectl reads, naming the file and the field (`kubeconfig.check_files`): the client's
    loader would fail on them naming neither, or not fail until a request. Returns the
    current context, as client-go picks it from the files."""
    from clusterscaler.kube.kubeconfig import KubeconfigShapeError, check_files
    from clusterscaler.model.yamltext import (
        MAX_CONFIG_FILE_BYTES,
        YamlFileError,
        read_yaml_file,
    )

    docs = []
    for name, path in files:
        try:
            docs.append((name, read_yaml_file(
                path, name, "a kubeconfig in YAML", max_bytes=MAX_CONFIG_FILE_BYTES
            )))
        except YamlFileError as exc:
            raise KubeConfigError(str(exc)) from None
    try:
        return check_files(docs)
    except KubeconfigShapeError as exc:
        raise KubeConfigError(str(exc)) from None


def _load_kubeconfigs(files: list[tuple[str, str]], configuration: Any) -> None:
    context = _check_kubeconfigs(files)
    try:
        # The current context is passed: the client's loader takes the last file's
        # current-context, client-go (kubectl, Cluster Autoscaler) the first file's.
        k8s_config.load_kube_config(
            config_file=os.pathsep.join(path for _, path in files), context=context,
            client_configuration=configuration,
        )
    except _KUBECONFIG_ERRORS as exc:
        # What the shape check leaves to the client (an empty file, a certificate file that
        # cannot be read) is a bad kubeconfig too, not a crash.
        detail = str(exc).splitlines()[0] if str(exc) else ""
        if not isinstance(exc, k8s_config.ConfigException | OSError | yaml.YAMLError):
            detail = f"{type(exc).__name__}: {detail[:200]}"
        raise KubeConfigError(
            f"{', '.join(name for name, _ in files)}: {detail}; expected a kubeconfig "
            "(YAML with clusters, users and contexts)"
        ) from exc


def load_configuration(settings: ClientSettings) -> Any:
    """The client configuration `settings` give (a kubeconfig read and checked, in-cluster
    or --kubernetes), for `build_api_client`; KubeConfigError names what is wrong."""
    configuration = k8s_client.Configuration()
    if settings.kubeconfig:
        if not os.path.exists(settings.kubeconfig):
            raise KubeConfigError(f"--kubeconfig: file {settings.kubeconfig!r} does not exist")
        _load_kubeconfigs(
            [(f"--kubeconfig {settings.kubeconfig!r}", settings.kubeconfig)], configuration
        )
        source = "kubeconfig"
    elif settings.in_cluster and os.environ.get(_SERVICE_ACCOUNT_HOST_ENV):
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException as exc:
            raise KubeConfigError(f"in-cluster configuration: {exc}") from exc
        source = "in-cluster"
    elif settings.kubernetes:
        source = "flag"
    else:
        files = _default_kubeconfigs()
        if not files:
            listed = os.environ.get("KUBECONFIG", "")
            raise KubeConfigError(
                (
                    "no Kubernetes configuration: pass --kubeconfig or --kubernetes, set "
                    "KUBECONFIG, or run in a pod with a service account ("
                    if settings.in_cluster
                    else "no kubeconfig: set KUBECONFIG or write ~/.kube/config ("
                )
                + (f"no file of KUBECONFIG={listed!r} exists" if listed
                   else f"no file {os.path.expanduser('~/.kube/config')!r}")
                + ")"
            )
        _load_kubeconfigs(files, configuration)
        source = "default-kubeconfig"
    if settings.kubernetes:
        host = settings.kubernetes.rstrip("/")
        configuration.host = host
        hook = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None:
            # The kubeconfig loader refreshes credentials before requests and rewrites the
            # host from the kubeconfig while doing so; --kubernetes must keep winning.
            def refresh(config: Any, _hook: Any = hook) -> None:
                _hook(config)
                config.host = host

            configuration.refresh_api_key_hook = refresh
    log.info("kube_client_configured", source=source, host=configuration.host)
    return configuration


# Told of the requests of every client built without an observer of its own: set once by
# the autoscaler (`observe_all_clients`), so that a client a plugin builds (the kwok
# provider's, outside a cluster) counts in /metrics too, as client-go's metrics are the
# process's.
_process_observer: RequestObserver | None = None


def observe_all_clients(observe: RequestObserver | None) -> None:
    """Tell `observe` of each request of every client built from now on (None: stop)."""
    global _process_observer
    _process_observer = observe


def build_api_client(
    settings: ClientSettings, observe: RequestObserver | None = None
) -> KubeApiClient:
    """An official ``kubernetes.client.ApiClient`` configured and rate limited per settings,
    each request told to `observe`, or else to the process's observer
    (`observe_all_clients`) when one is set."""
    return _configured_client(settings, load_configuration(settings), observe)


def api_client_from(
    settings: ClientSettings, configuration: Any, observe: RequestObserver | None = None
) -> KubeApiClient:
    """`build_api_client` from a configuration `load_configuration` gave, copied: the
    clients of one process share one reading of the kubeconfig, not one each of a file
    that may change between them."""
    return _configured_client(settings, deepcopy(configuration), observe)


def spare_capacity_client(
    client: KubeApiClient, settings: ClientSettings, observe: RequestObserver | None = None
) -> KubeApiClient:
    """A client over `client`'s configuration whose requests take from `client`'s
    --kube-client-qps tokens only those its own requests leave (`acquire_spare`): for
    writes that can wait, events, so that under a steady demand above the limit (a
    scale-down of hundreds of nodes) they never hold up the loop's reads or the taints and
    deletions. `client` itself when it was not built here (it has no bucket to share)."""
    bucket = getattr(client, _BUCKET_ATTRIBUTE, None)
    if not isinstance(bucket, TokenBucket):
        return client
    # Built here (it has a bucket): an official ApiClient, with its configuration.
    official: Any = client
    return _configured_client(settings, official.configuration, observe, bucket, spare=True)


# Where a client built here keeps its token bucket, for `spare_capacity_client`.
_BUCKET_ATTRIBUTE = "_clusterscaler_token_bucket"


def _configured_client(
    settings: ClientSettings,
    configuration: Any,
    observe: RequestObserver | None,
    bucket: TokenBucket | None = None,
    *,
    spare: bool = False,
) -> KubeApiClient:
    """The client over `configuration`, which it takes and changes (a fresh one or a copy),
    taking its tokens from `bucket` (a new one per settings when None; `spare`: only the
    tokens its owner's requests leave)."""
    # The connection pool must hold the long-lived watches plus concurrent requests.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
    api_client = k8s_client.ApiClient(configuration)
    api_client.user_agent = settings.user_agent
    if bucket is None:
        bucket = TokenBucket(settings.qps, settings.burst)
        setattr(api_client, _BUCKET_ATTRIBUTE, bucket)
    _rate_limit(api_client.rest_client, bucket, settings.request_timeout,
                observe or _process_observer, spare=spare)
    client: KubeApiClient = api_client
    return client
