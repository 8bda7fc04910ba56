"""The local backend sets its components' client rate limits (and the apiserver's in-flight limits)
from the cluster config; ``draguard bench dra-throughput`` measures what they change."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from draguard.harness.cluster.local import DEFAULT_CLIENT_BURST, DEFAULT_CLIENT_QPS, ClusterConfig, LocalCluster

pytestmark = pytest.mark.cluster


def _argv(pid: int | None) -> list[str]:
    assert pid is not None
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_rate_limits_reach_the_running_components() -> None:
    config = ClusterConfig(client_qps=123, client_burst=246, max_requests_inflight=300)
    with LocalCluster(f"qps-{uuid.uuid4().hex[:6]}", config, progress=lambda m: None) as cluster:
        for component in ("kube-scheduler", "kube-controller-manager"):
            argv = _argv(cluster.components[component].pid)
            assert "--kube-api-qps=123" in argv and "--kube-api-burst=246" in argv, (component, argv)
        api = _argv(cluster.components["kube-apiserver"].pid)
        assert "--max-requests-inflight=300" in api and "--max-mutating-requests-inflight=150" in api
        assert cluster.kube().ready()
        attached = LocalCluster.attach(cluster.name)
        assert (attached.config.client_qps, attached.config.client_burst) == (123, 246)


def test_defaults_are_raised_and_none_keeps_upstreams() -> None:
    assert (ClusterConfig().client_qps, ClusterConfig().client_burst) == (DEFAULT_CLIENT_QPS, DEFAULT_CLIENT_BURST)
    assert DEFAULT_CLIENT_QPS > 50  # the scheduler's upstream default; the controller manager's is 20
