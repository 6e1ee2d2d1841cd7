"""Test doubles for the `gce` provider: a fake Compute Engine API server."""

from __future__ import annotations

from clusterscaler_gce.testing.fakecompute import FakeComputeServer

__all__ = ["FakeComputeServer"]
