"""A real DRA kubelet plugin written by others, run as a plain process for one fake node.

The driver is the upstream DRA test driver, ``k8s.io/kubernetes/test/e2e/dra/test-driver`` (its
``kubelet-plugin`` subcommand), built beside the control plane by :mod:`draguard.harness.cluster.binaries`
as ``dra-test-driver``. The issue asked for ``sigs.k8s.io/dra-example-driver``; the Go module proxy
here refuses it (HTTP 403 "This module version is not available"), so the test driver of the same
Kubernetes release stands in. Both are built on ``k8s.io/dynamic-resource-allocation/kubeletplugin``,
so the sockets, registration and gRPC services are the same code; what differs is the device model.

What the test driver does, as read from its source at v1.37.2 (``app/server.go``, ``app/kubeletplugin.go``):

- it publishes its own ResourceSlice (pool = node name, devices ``device-00`` .. ``device-NN``,
  ``--num-devices``, no attributes), so no slice is created here; it needs the Node object to exist
  (the slice is owned by the Node), so start the fake node first;
- it registers through ``<--plugin-registration-path>/<driver>-reg.sock`` and serves DRA on
  ``<--datadir>/<driver>/dra.sock`` (v1 and v1beta1, plus the health service), which is exactly the
  :class:`~draguard.harness.core.paths.NodeDirs` layout, so the fake nodes find it like any other plugin;
- ``NodePrepareResources`` writes one CDI spec per claim and request into ``--cdi-dir``, named
  ``<driver>-<claim uid>-<request>.json``; ``NodeUnprepareResources`` removes it. Its record of prepared
  claims is otherwise in memory only, so those files are the outside view of what it holds prepared;
- the environment variable ``KUBECONFIG`` overrides its ``--kubeconfig`` flag, so the child's
  environment sets it to the same file;
- it needs no root and no kubelet: only writable directories and an API server.

Talks to: the driver binary (a :class:`~draguard.harness.core.process.Supervised` child that dies
with its parent) and, for the helpers at the end, the API server through :class:`~draguard.harness.kube.Kube`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..cdi import resolvable
from ..cluster import binaries
from draguard.harness.core.process import NodeProcess, Supervised, socket_accepts
from draguard.harness.core.errors import HarnessError
from ..kube import Kube, Obj
from draguard.harness.core.paths import NodeDirs, state_dir

__all__ = [
    "TEST_DRIVER_NAME",
    "ExternalPluginProcess",
    "claims_of_cdi_specs",
    "find_test_driver",
    "external_device_class",
    "published_slices",
    "delete_published_slices",
]

TEST_DRIVER_NAME = "test-driver.cdi.k8s.io"
"""The upstream test driver's default ``--drivername``."""


def find_test_driver(bin_dir: str | Path | None = None) -> Path:
    """The ``dra-test-driver`` binary: in ``bin_dir`` if given, else in the binary cache entry.

    Never downloads or builds (that takes many minutes); raises HarnessError saying how to get it.
    ``$DRAGUARD_TEST_DRIVER_VARIANT`` names a variant with a planted bug instead (built when missing, a
    minute or so: :mod:`.upstream_variants`); ``unmodified`` is the driver as released.
    """
    from . import upstream_variants  # noqa: PLC0415 (imports binaries and go lookups only when asked)

    chosen = os.environ.get(upstream_variants.VARIANT_ENV, "").strip()
    if chosen and chosen != upstream_variants.Variant.name:
        return upstream_variants.build_variant(chosen, progress=lambda _: None)
    directory = Path(bin_dir).expanduser() if bin_dir else None
    if directory is None:
        try:
            directory = binaries.resolve(allow_download=False, allow_build=False, progress=lambda _: None).directory
        except HarnessError as exc:
            raise HarnessError(
                f"the upstream DRA test driver is not available: {exc}; "
                "run `draguard cluster build` to build it beside the control plane"
            ) from exc
    path = directory / binaries.TEST_DRIVER
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise HarnessError(
            f"the upstream DRA test driver {path} is missing; `draguard cluster build --force` builds it "
            "from k8s.io/kubernetes/test/e2e/dra/test-driver"
        )
    return path


class ExternalPluginProcess(NodeProcess):
    """The upstream DRA test driver's kubelet plugin as a plain child process for one node.

    ``root`` is the node root shared with the fake nodes (``<root>/<node>/plugins_registry`` etc.).
    """

    def __init__(
        self,
        kubeconfig: str | Path,
        node: str,
        root: str | Path | None = None,
        driver: str = TEST_DRIVER_NAME,
        devices: int = 4,
        binary: str | Path | None = None,
        log: str | Path | None = None,
        verbosity: int = 2,
        kube_api_qps: float | None = None,
        kube_api_burst: int | None = None,
        node_root: str | Path | None = None,
    ) -> None:
        """``kube_api_qps``/``kube_api_burst``: its API client's rate limit (the driver's own defaults, 50 and
        100 requests a second, when None; test/e2e/dra/test-driver/app/server.go). ``node_root``: where the
        node's CDI specs go when the sockets live under another root (behind the gRPC interposer)."""
        self.kubeconfig = Path(kubeconfig).resolve()
        self.node = node
        self.root = Path(root) if root is not None else state_dir() / "nodes"
        self.driver = driver
        self.devices = devices
        self.dirs = NodeDirs(self.root, node)
        self.cdi_dir = NodeDirs(Path(node_root), node).cdi if node_root is not None else self.dirs.cdi
        """Where it writes its CDI specs: the node's, where the node's runtime resolves them."""
        self.binary = Path(binary) if binary is not None else find_test_driver()
        self.log = Path(log) if log is not None else self.plugin_dir / "driver.log"
        argv = [
            str(self.binary), f"-v={verbosity}", f"--kubeconfig={self.kubeconfig}", f"--drivername={driver}",
            "kubelet-plugin", f"--node-name={node}", f"--num-devices={devices}",
            f"--plugin-registration-path={self.dirs.registry}", f"--datadir={self.dirs.plugins}",
            f"--cdi-dir={self.cdi_dir}",
        ]
        if kube_api_qps is not None:
            argv.insert(3, f"--kube-api-qps={kube_api_qps:g}")
        if kube_api_burst is not None:
            argv.insert(3, f"--kube-api-burst={kube_api_burst}")
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))  # it prefers $KUBECONFIG over --kubeconfig
        self._proc = Supervised(f"DRA test driver for node {node}", argv, self.log, self._sockets_accept, env=env)

    # -- paths ------------------------------------------------------------------------------------
    @property
    def plugin_dir(self) -> Path:
        return self.dirs.plugin_dir(self.driver)

    @property
    def registration_socket(self) -> Path:
        return self.dirs.registration_socket(self.driver)

    @property
    def dra_socket(self) -> Path:
        return self.dirs.dra_socket(self.driver)

    @property
    def argv(self) -> list[str]:
        return list(self._proc.argv)

    @property
    def title(self) -> str:
        return f"DRA test driver on {self.node}"

    @property
    def log_path(self) -> Path:
        return self.log

    @property
    def socket(self) -> Path:
        return self.dra_socket

    def _sockets_accept(self) -> bool:
        return socket_accepts(self.registration_socket) and socket_accepts(self.dra_socket)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> ExternalPluginProcess:
        """Start the driver and wait until its registration and DRA sockets accept connections."""
        if self.alive:
            raise HarnessError(f"the DRA test driver for node {self.node} is already running (pid {self.pid})")
        self.dirs.create()
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._proc.start(timeout)
        except HarnessError:
            self._proc.stop(timeout=2)
            raise
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM: the driver stops its servers and removes its sockets; SIGKILL after ``timeout``."""
        return self._proc.stop(timeout)

    def kill(self) -> int | None:
        """SIGKILL now, as a crash would: its sockets and CDI specs stay behind."""
        return self._proc.kill()

    def restart(self, kill: bool = True, timeout: float = 30.0) -> ExternalPluginProcess:
        """Killed (or stopped) and started again. It keeps its prepared claims in memory only, so it
        comes back knowing none of them (test/e2e/dra/test-driver/app/kubeletplugin.go)."""
        self.kill() if kill else self.stop()
        return self.start(timeout)

    # -- what it holds ----------------------------------------------------------------------------
    def cdi_specs(self) -> list[Path]:
        """The CDI spec files this driver has written under the node's CDI root."""
        return sorted(self.cdi_dir.glob(f"{self.driver}-*.json"))

    def cdi_devices(self) -> frozenset[str]:
        """The qualified CDI device names that the node's CDI folder resolves (:func:`draguard.harness.cdi.resolvable`)."""
        return resolvable(self.cdi_dir)

    def prepared_claims(self) -> set[str]:
        """UIDs of the claims the driver holds prepared, read from its CDI spec file names."""
        return set(claims_of_cdi_specs(self.driver, [p.name for p in self.cdi_specs()]))


def claims_of_cdi_specs(driver: str, names: list[str]) -> frozenset[str]:
    """Claim UIDs named by the upstream test driver's CDI spec files among ``names``: it writes one per
    claim and request, ``<driver>-<claim UID>-<request>.json`` (test/e2e/dra/test-driver/app/kubeletplugin.go)."""
    prefix = f"{driver}-"
    return frozenset(n[len(prefix):len(prefix) + 36] for n in names if n.startswith(prefix) and n.endswith(".json"))


def external_device_class(name: str, driver: str = TEST_DRIVER_NAME) -> Obj:
    """A DeviceClass selecting every device of ``driver``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


def published_slices(kube: Kube, node: str, driver: str = TEST_DRIVER_NAME) -> list[Obj]:
    """The ResourceSlices ``driver`` has published for ``node``."""
    items, _ = kube.list("ResourceSlice", field_selector=f"spec.nodeName={node},spec.driver={driver}")
    return items


def delete_published_slices(kube: Kube, node: str, driver: str = TEST_DRIVER_NAME) -> int:
    """Delete the driver's slices of ``node`` (the driver leaves them behind when it stops); how many."""
    return sum(kube.delete("ResourceSlice", s["metadata"]["name"]) for s in published_slices(kube, node, driver))
