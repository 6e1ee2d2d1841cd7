"""Every interface a plugin implements or receives, in one place.

The hooks and their markers (`hookspecs.py`), the registry the registration hooks fill
(`registry.py`), the cloud provider and its node groups (`cloudprovider.py`) with what a
provider's factory is given (`providercontext.py`: the options, a Kubernetes client, the
in-memory cluster and its clock, `clusterview.py`), the expander (`expander.py`), the
estimator (`estimator.py`), the pod filter (`podfilter.py`) and the pod-list processor
(`podlistprocessor.py`), each with the values it exchanges. Typed protocols and plain values, without `Any`; `clusterscaler.api` re-exports
them for plugin authors. The machinery that runs plugins lives elsewhere in the core.

Imports: `clusterscaler.model` only (and pluggy, structlog). Names of the other folders
appear here in annotations only.
"""
