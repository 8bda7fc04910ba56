"""The local backend: a real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager).

Each cluster has a name and a run directory ``<state>/clusters/<name>/`` holding its certificates,
kubeconfigs, etcd data, component logs and ``cluster.json`` (ports, pids, feature gates). Several
clusters can run at once: every port is picked free. Any one component can be restarted (the chaos
steps restart the scheduler, the controller manager and the apiserver). ``down`` stops everything and
checks that no process or port is left; a cluster whose owner died is found through ``cluster.json``.

Talks to: the binaries (``binaries.resolve``), the API server (through ``Kube``), the filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError, UsageError
from ..kube import Kube
from draguard.harness.core.paths import state_dir
from . import binaries as bins
from .pki import Pki, write_kubeconfig
from draguard.harness.core.process import Supervised, free_port, kill_pid, last_lines, pid_alive, port_is_free

__all__ = ["LocalCluster", "ClusterConfig", "COMPONENT_ORDER", "clusters_root", "list_clusters"]

COMPONENT_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
RESTARTABLE = {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "apiserver", "scheduler", "controller-manager"}
_START_ATTEMPTS = 5
"""Starts of the scheduler or controller manager in one restart before its exit is reported."""
_API_CLIENTS = ("kube-scheduler", "kube-controller-manager")
"""The components the keeper starts again when they exit on their own (clients of the API server)."""
_ALIASES = {"apiserver": "kube-apiserver", "scheduler": "kube-scheduler", "controller-manager": "kube-controller-manager"}

# API group versions that features need served, per gate (1.37; see shared/reference/dra-facts.md §5).
_GATE_RUNTIME_CONFIG = {
    "GenericWorkload": ("scheduling.k8s.io/v1beta1",),
    "DRAWorkloadResourceClaims": ("scheduling.k8s.io/v1beta1",),
    "CompositePodGroup": ("scheduling.k8s.io/v1alpha3",),
    "DRAResourcePoolStatus": ("resource.k8s.io/v1alpha3",),
}


def clusters_root() -> Path:
    return state_dir() / "clusters"


def list_clusters() -> list[str]:
    root = clusters_root()
    return sorted(p.name for p in root.iterdir() if (p / "cluster.json").exists()) if root.exists() else []


DEFAULT_CLIENT_QPS = 500
DEFAULT_CLIENT_BURST = 1000
# The components' default client rate limits (scheduler 50/100, controller manager 20/30 requests per
# second) are the ceiling of a DRA workload on this control plane: each pod with a template claim
# costs the resourceclaim controller a claim create and a pod status update, the scheduler a binding
# and an allocation write. 800 such pods ran at 10 pods/s with the defaults and 44 pods/s at 500
# (issue 12). Upstream scheduler_perf lifts them the same way (test/integration/scheduler_perf/util.go
# sets the client QPS and burst of its in-process components to 5000).


@dataclass(frozen=True)
class ClusterConfig:
    """What a cluster is started with. Feature gates go to every component."""

    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: Mapping[str, str] = field(default_factory=dict)
    node_monitor_grace_period: str = "20s"
    client_qps: int | None = DEFAULT_CLIENT_QPS
    """``--kube-api-qps`` of the scheduler and the controller manager; None: each keeps its upstream default (50, 20)."""
    client_burst: int | None = DEFAULT_CLIENT_BURST
    """``--kube-api-burst`` of the scheduler and the controller manager; None: upstream defaults (100, 30)."""
    max_requests_inflight: int | None = None
    """kube-apiserver ``--max-requests-inflight`` (mutating: half of it); None: the apiserver's default (400/200)."""

    def effective_runtime_config(self) -> dict[str, str]:
        rc = dict(self.runtime_config)
        for gate, on in self.feature_gates.items():
            if on:
                for gv in _GATE_RUNTIME_CONFIG.get(gate, ()):
                    rc.setdefault(gv, "true")
        return rc

    def gates_flag(self) -> list[str]:
        if not self.feature_gates:
            return []
        return ["--feature-gates=" + ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(self.feature_gates.items()))]


def _validate_name(name: str) -> None:
    if not name or len(name) > 40 or not all(c.isalnum() or c in "-_" for c in name):
        raise UsageError(f"cluster name {name!r}: use 1-40 letters, digits, '-' or '_'")


_PORT_ATTEMPTS = 3


def _lost_a_port(message: str) -> bool:
    return "address already in use" in message or "is already taken" in message


def _first_line(message: str) -> str:
    return message.splitlines()[0] if message else message


class LocalCluster:
    """A real local control plane. Use as a context manager or call ``up()``/``down()``."""

    def __init__(
        self,
        name: str = "default",
        config: ClusterConfig | None = None,
        bin_dir: str | Path | None = None,
        base_dir: Path | None = None,
        die_with_parent: bool = True,
        progress: Any = print,
        remove_on_exit: bool = False,
    ) -> None:
        """``remove_on_exit``: leaving the ``with`` block also deletes the cluster's directory (etcd data,
        logs; about 200 MB after 5000 pods), as the runner does with its own, unless ``DRAGUARD_KEEP_LOGS=1``.
        For throwaway clusters (benchmarks); a named cluster a user started keeps it."""
        _validate_name(name)
        self.name = name
        self.config = config or ClusterConfig()
        self.bin_dir = bin_dir
        self.dir = (base_dir or clusters_root()) / name
        self.die_with_parent = die_with_parent
        self.progress = progress
        self.remove_on_exit = remove_on_exit
        self.components: dict[str, Supervised] = {}
        self.ports: dict[str, int] = {}
        self._binaries: bins.Binaries | None = None
        self._locks = {c: threading.Lock() for c in _API_CLIENTS}
        """Held while a restart or the keeper stops and starts that component."""
        self._stop_keeping = threading.Event()
        self.exits: list[str] = []
        """Components that exited on their own and were started again by the keeper, with their exit status."""
        self._keeper: threading.Thread | None = None

    # -- paths --------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.dir / "cluster.json"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def kube(self) -> Kube:
        return Kube.from_kubeconfig(self.kubeconfig)

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down(remove=self.remove_on_exit and os.environ.get("DRAGUARD_KEEP_LOGS") != "1")

    def up(self, timeout: float = 90.0) -> LocalCluster:
        """Start every component and wait until the API serves; raises HarnessError, leaving nothing running."""
        if self.state_file.exists():
            state = self._read_state()
            if any(pid_alive(p) for p in state.get("pids", {}).values()):
                raise HarnessError(
                    f"cluster {self.name!r} is already running (see {self.state_file}); "
                    f"run `draguard cluster down --name {self.name}` first"
                )
        self._binaries = bins.resolve(self.bin_dir, progress=self.progress)
        started = time.monotonic()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._prepare()
                for component in COMPONENT_ORDER:
                    self.components[component] = self._supervised(component)
                    self.components[component].start(timeout=max(5.0, timeout - (time.monotonic() - started)))
                    self._write_state()
                self._wait_api_ready(timeout - (time.monotonic() - started))
            except HarnessError as exc:
                self.down(remove=False)
                # Another process (a parallel run) may bind a port between our check and the
                # component's own bind: start again on fresh ports rather than fail the run.
                if attempt < _PORT_ATTEMPTS and _lost_a_port(str(exc)):
                    self.components.clear()
                    if self.progress:
                        self.progress(f"a port was taken while starting ({_first_line(str(exc))}); retrying on new ports")
                    continue
                raise
            except BaseException:
                self.down(remove=False)
                raise
            break
        self._write_state()
        self._stop_keeping.clear()
        self._keeper = threading.Thread(target=self._keep, name=f"keeper-{self.name}", daemon=True)
        self._keeper.start()
        return self

    def _keep(self) -> None:
        """Start the scheduler or the controller manager again when it exits on its own, once the API
        server answers, as the kubelet restarts a crashed static pod (restartPolicy Always). Both can
        exit after they serve /healthz: the controller manager exits when the API server goes away
        while it builds its controllers (controllermanager.go "Error building controllers"), which an
        apiserver-restart step overlapping a controller-manager-restart step does. Without this, no
        claim is released for the rest of the run. Back-off doubles from 1 s to 30 s while it fails."""
        backoff = {c: 1.0 for c in _API_CLIENTS}
        not_before = {c: 0.0 for c in _API_CLIENTS}
        while not self._stop_keeping.wait(0.5):
            for component in _API_CLIENTS:
                sup = self.components.get(component)
                if (sup is None or sup.alive() or time.monotonic() < not_before[component]
                        or not self._probe_for("kube-apiserver")()):
                    continue
                with self._locks[component]:
                    if self._stop_keeping.is_set() or sup.alive():
                        continue
                    code = sup.returncode
                    self.exits.append(f"{component} exited with code {code} at {time.strftime('%H:%M:%S')}; last lines "
                                      f"of its log:\n{last_lines(sup.log, 3)}")
                    try:
                        sup.start(30.0)
                    except HarnessError as exc:
                        not_before[component] = time.monotonic() + backoff[component]
                        backoff[component] = min(backoff[component] * 2, 30.0)
                        self._say(f"{component} exited (code {code}); starting it again failed: {_first_line(str(exc))}")
                        continue
                    self._say(f"{component} exited on its own (code {code}); started again, as the kubelet would")
                    sup.restarts += 1
                    backoff[component] = 1.0
                    self._write_state()

    def _say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    def _prepare(self) -> None:
        for sub in ("etcd", "logs"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        for key in ("etcd-client", "etcd-peer", "apiserver", "scheduler", "controller-manager"):
            self.ports[key] = free_port()
        pki = Pki(self.dir / "pki")
        pki.generate(
            {
                "admin": ("draguard-admin", "system:masters"),
                "scheduler": ("system:kube-scheduler", None),
                "controller-manager": ("system:kube-controller-manager", None),
            }
        )
        write_kubeconfig(self.kubeconfig, self.server, pki, "admin", f"draguard-{self.name}")
        write_kubeconfig(self.dir / "scheduler.kubeconfig", self.server, pki, "scheduler", f"draguard-{self.name}")
        write_kubeconfig(
            self.dir / "controller-manager.kubeconfig", self.server, pki, "controller-manager", f"draguard-{self.name}"
        )

    def _argv(self, component: str) -> list[str]:
        assert self._binaries is not None
        exe = str(self._binaries.path(component))
        pki = Pki(self.dir / "pki")
        gates = self.config.gates_flag()
        p = self.ports
        if component == "etcd":
            return [
                exe,
                "--name=draguard",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=https://127.0.0.1:{p['etcd-client']}",
                f"--advertise-client-urls=https://127.0.0.1:{p['etcd-client']}",
                f"--listen-peer-urls=https://127.0.0.1:{p['etcd-peer']}",
                f"--initial-advertise-peer-urls=https://127.0.0.1:{p['etcd-peer']}",
                f"--initial-cluster=draguard=https://127.0.0.1:{p['etcd-peer']}",
                # Clients and peers need a certificate from the cluster's CA (kubeadm's etcd flags).
                f"--cert-file={pki.etcd_crt}",
                f"--key-file={pki.etcd_key}",
                "--client-cert-auth=true",
                f"--trusted-ca-file={pki.ca_crt}",
                f"--peer-cert-file={pki.etcd_crt}",
                f"--peer-key-file={pki.etcd_key}",
                "--peer-client-cert-auth=true",
                f"--peer-trusted-ca-file={pki.ca_crt}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]
        if component == "kube-apiserver":
            rc = self.config.effective_runtime_config()
            return [
                exe,
                f"--etcd-servers=https://127.0.0.1:{p['etcd-client']}",
                f"--etcd-cafile={pki.ca_crt}",
                f"--etcd-certfile={pki.etcd_client[0]}",
                f"--etcd-keyfile={pki.etcd_client[1]}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                f"--tls-cert-file={pki.serving_crt}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_crt}",
                f"--cert-dir={self.dir / 'pki' / 'apiserver-generated'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--authorization-mode=Node,RBAC",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                *([f"--max-requests-inflight={self.config.max_requests_inflight}",
                   f"--max-mutating-requests-inflight={max(1, self.config.max_requests_inflight // 2)}"]
                  if self.config.max_requests_inflight else []),
                *gates,
                *(["--runtime-config=" + ",".join(f"{k}={v}" for k, v in sorted(rc.items()))] if rc else []),
            ]
        if component == "kube-controller-manager":
            return [
                exe,
                *self._component_flags("controller-manager"),
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_crt}",
                f"--cluster-signing-cert-file={pki.ca_crt}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--node-monitor-grace-period={self.config.node_monitor_grace_period}",
                "--node-monitor-period=2s",
                "--profiling=false",
                *gates,
            ]
        if component == "kube-scheduler":
            return [
                exe,
                *self._component_flags("scheduler"),
                "--profiling=false",
                *gates,
            ]
        raise HarnessError(f"unknown component {component!r}")

    def _component_flags(self, role: str) -> list[str]:
        """Flags the scheduler and the controller manager share: identity, no leader election, serving."""
        kc = self.dir / f"{role}.kubeconfig"
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[role]}",
            *([f"--kube-api-qps={self.config.client_qps}"] if self.config.client_qps else []),
            *([f"--kube-api-burst={self.config.client_burst}"] if self.config.client_burst else []),
        ]

    def _supervised(self, component: str) -> Supervised:
        port_key = {"etcd": "etcd-client", "kube-apiserver": "apiserver", "kube-controller-manager": "controller-manager", "kube-scheduler": "scheduler"}[component]
        if not port_is_free(self.ports[port_key]):
            raise HarnessError(f"{component}: port {self.ports[port_key]} on 127.0.0.1 is already taken")
        return Supervised(
            name=component,
            argv=self._argv(component),
            log=self.logs / f"{component}.log",
            ready=self._probe_for(component),
            die_with_parent=self.die_with_parent,
        )

    def _wait_api_ready(self, timeout: float) -> None:
        """Ready means: /readyz, the default namespace and service account controller work, DRA v1 served."""
        kube = self.kube()
        deadline = time.monotonic() + max(timeout, 5.0)
        last = ""
        while time.monotonic() < deadline:
            try:
                groups = kube.request("GET", "/apis/resource.k8s.io/v1")
                if groups.get("resources") and kube.get("Namespace", "default") is not None:
                    return
            except HarnessError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise HarnessError(f"API server of cluster {self.name!r} never became usable: {last}")

    def restart(self, component: str, timeout: float = 60.0) -> None:
        """Restart one component (SIGTERM, then start again with the same flags and ports)."""
        component = _ALIASES.get(component, component)
        if component not in self.components:
            raise UsageError(f"unknown component {component!r}; components: {', '.join(COMPONENT_ORDER)}")
        sup = self.components[component]
        if component not in _API_CLIENTS:
            sup.stop()
            sup.restarts += 1
            sup.start(timeout)
            self._wait_api_ready(timeout)
        else:
            with self._locks[component]:  # the keeper must not start it between the stop and the start
                sup.stop()
                sup.restarts += 1
                self._start_api_client(sup, time.monotonic() + timeout)
        self._write_state()

    def _start_api_client(self, sup: Supervised, deadline: float) -> None:
        """Start the scheduler or the controller manager, again while it exits because the API server
        does not answer (another step restarting it): both read the request-header CA from the API
        while starting and exit when they cannot (k8s.io/apiserver pkg/server/options/authentication.go,
        ApplyTo), and the kubelet restarts such a static pod. A component that keeps exiting with the
        API usable (a bad flag) is reported after a few tries, as the kubelet's back-off would show it."""
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                sup.start(max(deadline - time.monotonic(), 1.0))
                return
            except HarnessError:
                if sup.alive() or attempt == _START_ATTEMPTS or time.monotonic() >= deadline:
                    raise  # not ready in time, out of tries or out of time: the caller reports it
            self._wait_api_ready(deadline - time.monotonic())
            time.sleep(0.5)

    def down(self, remove: bool = False) -> None:
        """Stop every component in reverse order; verify that no pid and no port is left."""
        self._stop_keeping.set()
        for lock in self._locks.values():  # a start the keeper began ends first
            with lock:
                pass
        if self._keeper is not None and self._keeper is not threading.current_thread():
            self._keeper.join(timeout=5)
        pids = {c: s.pid for c, s in self.components.items() if s.pid}
        if not pids and self.state_file.exists():
            pids = {k: int(v) for k, v in self._read_state().get("pids", {}).items()}
            self.ports = {k: int(v) for k, v in self._read_state().get("ports", {}).items()}
        for component in reversed(COMPONENT_ORDER):
            if component in self.components:
                if remove:  # nothing of it is kept: no component needs to shut down cleanly (saves ~3 s a run)
                    self.components[component].kill()
                else:  # need not be graceful either: the apiserver alone would wait ~10 s for its watches
                    self.components[component].stop(timeout=3.0)
            elif component in pids:
                kill_pid(pids[component], timeout=0.0 if remove else 10.0)
        # An attached cluster's processes are not our children: SIGKILL returns before they are gone
        # (``cluster up`` then ``down --purge`` read them alive at once and kept the directory).
        deadline = time.monotonic() + 10.0
        while any(pid_alive(p) for p in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        leftovers = [f"{c} (pid {p})" for c, p in pids.items() if pid_alive(p)]
        if leftovers:
            raise HarnessError(f"cluster {self.name!r}: could not stop {', '.join(leftovers)}")
        self.components.clear()
        if self.state_file.exists():
            self.state_file.unlink()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- state ----------------------------------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "name": self.name,
            "kubeconfig": str(self.kubeconfig),
            "server": self.server if "apiserver" in self.ports else None,
            "ports": self.ports,
            "pids": {c: s.pid for c, s in self.components.items() if s.pid and s.alive()},
            "owner": os.getpid(),
            "binaries": str(self._binaries.directory) if self._binaries else None,
            "version": bins.K8S_VERSION,
            "featureGates": dict(self.config.feature_gates),
            "runtimeConfig": self.config.effective_runtime_config(),
            "clientQps": self.config.client_qps,
            "clientBurst": self.config.client_burst,
            "maxRequestsInflight": self.config.max_requests_inflight,
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)

    def _read_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state_file.read_text()))
        except (OSError, ValueError):
            return {}

    @classmethod
    def remove_stopped(cls, name: str = "default", base_dir: Path | None = None) -> bool:
        """Delete the run directory of a cluster that was stopped without ``remove`` (``down``, then
        ``down --purge``); False when there is none, or it is still running (use :meth:`down`)."""
        cluster = cls(name, base_dir=base_dir)
        if not cluster.dir.is_dir() or cluster.state_file.exists():
            return False
        shutil.rmtree(cluster.dir, ignore_errors=True)
        return True

    @classmethod
    def attach(cls, name: str = "default", base_dir: Path | None = None) -> LocalCluster:
        """A handle on a cluster started by another process (for status, down and restarts)."""
        cluster = cls(name, base_dir=base_dir)
        state = cluster._read_state()
        if not state:
            raise UsageError(f"no cluster named {name!r} (looked in {cluster.dir})")
        cluster.ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        cluster.config = ClusterConfig(
            feature_gates=state.get("featureGates", {}),
            runtime_config=state.get("runtimeConfig", {}),
            client_qps=state.get("clientQps", DEFAULT_CLIENT_QPS),
            client_burst=state.get("clientBurst", DEFAULT_CLIENT_BURST),
            max_requests_inflight=state.get("maxRequestsInflight"),
        )
        if state.get("binaries"):
            cluster._binaries = bins.Binaries(Path(state["binaries"]), "cache")
        for component, pid in state.get("pids", {}).items():
            sup = cluster._supervised_for_attach(component)
            sup.pid = int(pid)
            cluster.components[component] = sup
        return cluster

    def _supervised_for_attach(self, component: str) -> Supervised:
        return Supervised(name=component, argv=self._argv(component), log=self.logs / f"{component}.log",
                          ready=self._probe_for(component), die_with_parent=False)

    def _probe_for(self, component: str) -> Any:
        return {
            "etcd": lambda: _http_ok(f"https://127.0.0.1:{self.ports['etcd-client']}/health", tls=self._etcd_tls()),
            "kube-apiserver": lambda: _http_ok(f"{self.server}/readyz", insecure=True),
            "kube-controller-manager": lambda: _http_ok(
                f"https://127.0.0.1:{self.ports['controller-manager']}/healthz", insecure=True
            ),
            "kube-scheduler": lambda: _http_ok(f"https://127.0.0.1:{self.ports['scheduler']}/healthz", insecure=True),
        }[component]

    def _etcd_tls(self) -> ssl.SSLContext:
        """A client context for etcd: the cluster CA and the apiserver's etcd client certificate."""
        pki = Pki(self.dir / "pki")
        ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        ctx.load_cert_chain(str(pki.etcd_client[0]), str(pki.etcd_client[1]))
        return ctx

    def dead(self) -> list[str]:
        """Components started here that are not running now, each with its exit status and last log lines."""
        return [f"{name} (exit code {sup.returncode}); last lines of {sup.log}:\n{last_lines(sup.log, 5)}"
                for name, sup in self.components.items() if sup.pid and not sup.alive()]

    def status(self) -> dict[str, dict[str, Any]]:
        """Per component: pid, alive, ready."""
        out: dict[str, dict[str, Any]] = {}
        for component in COMPONENT_ORDER:
            sup = self.components.get(component)
            alive = bool(sup and sup.alive())
            out[component] = {
                "pid": sup.pid if sup else None,
                "alive": alive,
                "ready": bool(alive and self._probe_for(component)()),
                "restarts": sup.restarts if sup else 0,
            }
        return out


_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def _http_ok(url: str, insecure: bool = False, tls: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=tls or (_INSECURE if insecure else None)) as resp:
            return bool(resp.status == 200)
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return False
