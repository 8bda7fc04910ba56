"""The local backend's secrets: every private key and kubeconfig is readable by its owner only, and
etcd serves TLS to clients that present a certificate from the cluster's CA, and to no one else."""

from __future__ import annotations

import http.client
import ssl
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from draguard.harness.cluster.local import LocalCluster
from draguard.harness.cluster.pki import Pki

pytestmark = pytest.mark.cluster


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _local(draguard_cluster) -> LocalCluster:  # type: ignore[no-untyped-def]
    cluster = draguard_cluster.local
    if cluster is None:
        pytest.skip("the session's cluster is not a local control plane (--draguard-cluster kubeconfig)")
    assert isinstance(cluster, LocalCluster)
    return cluster


def test_every_private_key_and_kubeconfig_is_0600(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = _local(draguard_cluster)
    keys = sorted((cluster.dir / "pki").glob("*.key"))
    kubeconfigs = sorted(cluster.dir.glob("*kubeconfig*"))
    assert {p.name for p in keys} >= {"ca.key", "apiserver.key", "etcd.key", "apiserver-etcd-client.key", "sa.key",
                                       "admin.key"}
    assert kubeconfigs, f"no kubeconfig in {cluster.dir}"
    modes = {str(p.relative_to(cluster.dir)): oct(_mode(p)) for p in (*keys, *kubeconfigs)}
    assert all(m == oct(0o600) for m in modes.values()), modes


def test_etcd_refuses_a_client_without_a_certificate_and_serves_one_with_it(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = _local(draguard_cluster)
    pki = Pki(cluster.dir / "pki")
    url = f"https://127.0.0.1:{cluster.ports['etcd-client']}/health"

    anonymous = ssl.create_default_context(cafile=str(pki.ca_crt))
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(url, timeout=5, context=anonymous).read()

    # Plain HTTP is not served: etcd drops the connection (or answers 400), never the health.
    with pytest.raises((urllib.error.HTTPError, http.client.RemoteDisconnected, ConnectionError)):
        urllib.request.urlopen(url.replace("https://", "http://"), timeout=5).read()

    client = ssl.create_default_context(cafile=str(pki.ca_crt))
    client.load_cert_chain(str(pki.etcd_client[0]), str(pki.etcd_client[1]))
    with urllib.request.urlopen(url, timeout=5, context=client) as resp:
        assert resp.status == 200
        assert b'"health":"true"' in resp.read()
