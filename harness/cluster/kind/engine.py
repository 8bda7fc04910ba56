"""The container engine kind runs its nodes in: an existing docker or podman, or a private dockerd.

:func:`find` prefers, in order: draguard's private dockerd when it is already running; a docker that
answers ``docker info`` (``$DOCKER_HOST`` or the system socket); a podman that answers ``podman info``.
When none works, :class:`PrivateDockerd` starts Debian's ``dockerd`` with everything of its own: data
root (under the XDG cache, so imported node images survive it), exec root, socket, pid file and config
file (under the XDG state dir), no default bridge, its containers under the cgroup ``draguard-kind``, and,
where the host lacks capabilities, the runtime wrapper of :mod:`.quirks` as its default runtime. Every
host change it may make (bridges, nftables tables, the FORWARD policy, ``ip_forward``, ``/lib/modules``, that cgroup) is
journaled in :mod:`.hostlog` before it starts and undone when it stops, or by a later process when it was
killed. Talks to: docker/podman CLIs, ``dockerd``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from draguard.harness.cluster.kind import quirks as quirks_mod
from draguard.harness.cluster.kind.hostlog import HostLog, bridges, forward_policy, nft_tables, processes_with, sysctl_read
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.paths import cache_dir, state_dir
from draguard.harness.core.process import kill_pid, pid_alive, spawn

__all__ = ["Engine", "PrivateDockerd", "find", "engine_dir", "missing_engine_tools", "CGROUP_PARENT"]

Progress = Callable[[str], None]
CGROUP_PARENT = "draguard-kind"
"""The private dockerd's containers live under this cgroup, so that what a killed engine leaves can be found."""


def engine_dir() -> Path:
    return state_dir() / "kind" / "engine"


@dataclass(frozen=True)
class Engine:
    """How to reach a container engine: the CLI and the environment kind and that CLI need."""

    provider: str  # "docker" or "podman"
    cli: str
    env: dict[str, str] = field(default_factory=dict)
    private: bool = False

    def environ(self) -> dict[str, str]:
        env = dict(os.environ, **self.env)
        if self.provider == "podman":
            env["KIND_EXPERIMENTAL_PROVIDER"] = "podman"
        return env

    def run(self, args: Sequence[str], timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.cli, *args], env=self.environ(), capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise HarnessError(f"{self.cli} {' '.join(args[:3])} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
        return proc

    def has_image(self, tag: str) -> bool:
        return self.run(["image", "inspect", tag], check=False).returncode == 0

    def containers(self, label: str | None = None) -> list[str]:
        args = ["ps", "-aq"] + (["--filter", f"label={label}"] if label else [])
        return self.run(args).stdout.split()


def _answers(cli: str, env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run([cli, "info", "--format", "{{json .ServerVersion}}"], env=dict(os.environ, **env),
                              capture_output=True, text=True, timeout=20, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and proc.stdout.strip() not in ("", "null", '""')


def missing_engine_tools() -> list[str]:
    """What starting a private dockerd needs and does not find."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (a private dockerd)")
    for tool, package in (("dockerd", "docker.io"), ("docker", "docker.io"), ("runc", "runc"), ("iptables", "iptables"),
                          ("ip", "iproute2")):  # fmt: skip
        if shutil.which(tool) is None:
            missing.append(f"{tool} (Debian package {package})")
    return missing


class PrivateDockerd:
    """draguard's own dockerd; one per machine user, shared by every kind cluster draguard runs."""

    def __init__(self, base: Path | None = None, data_root: Path | None = None) -> None:
        self.base = base or engine_dir()
        self.data_root = data_root or cache_dir() / "kind" / "docker"
        self.socket = self.base / "docker.sock"
        self.exec_root = self.base / "exec"
        self.pidfile = self.base / "dockerd.pid"
        self.log = self.base / "dockerd.log"
        self.hostlog = HostLog(self.base / "host.jsonl")

    @property
    def engine(self) -> Engine:
        cli = shutil.which("docker") or "docker"
        return Engine("docker", cli, {"DOCKER_HOST": f"unix://{self.socket}"}, private=True)

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def running(self) -> bool:
        return self.pid() is not None and self.socket.exists() and _answers(self.engine.cli, self.engine.env)

    def start(self, host_quirks: list[quirks_mod.Quirk], progress: Progress = print, timeout: float = 60.0) -> Engine:
        if self.running():
            return self.engine
        missing = missing_engine_tools()
        if missing:
            raise UsageError(f"no working docker or podman, and cannot start a private dockerd: missing {', '.join(missing)}")
        if self.hostlog.path.exists():  # a dockerd of ours that was killed: undo what it left first
            self.hostlog.undo(progress)
        self.base.mkdir(parents=True, exist_ok=True)
        self.data_root.mkdir(parents=True, exist_ok=True)
        config = self.base / "daemon.json"
        config.write_text("{}\n")  # not the system's /etc/docker/daemon.json
        argv = [shutil.which("dockerd") or "dockerd", f"--config-file={config}", f"--data-root={self.data_root}",
                f"--exec-root={self.exec_root}", f"--host=unix://{self.socket}", f"--pidfile={self.pidfile}",
                "--bridge=none", "--storage-driver=overlay2", "--exec-opt=native.cgroupdriver=cgroupfs",
                f"--cgroup-parent=/{CGROUP_PARENT}", "--log-level=warn"]
        caps = next((q for q in host_quirks if q.name == "capabilities"), None)
        if caps is not None:
            runc = shutil.which("runc") or "/usr/sbin/runc"
            wrapper = quirks_mod.write_runtime_wrapper(caps, self.base / quirks_mod.WRAPPER_RUNTIME, runc)
            argv += [f"--add-runtime={quirks_mod.WRAPPER_RUNTIME}={wrapper}", f"--default-runtime={quirks_mod.WRAPPER_RUNTIME}"]
        # Journal what dockerd may change, before it runs.
        self.hostlog.record("sysctl", key="net.ipv4.ip_forward", old=sysctl_read("net.ipv4.ip_forward"))
        if any(q.name == "inotify" for q in host_quirks):
            for key, value in quirks_mod.low_inotify().items():
                self.hostlog.record("sysctl", key=key, old=str(value))
                Path("/proc/sys", *key.split(".")).write_text(str(quirks_mod.INOTIFY_FLOOR[key]))
        self.hostlog.record("links", before=bridges())
        self.hostlog.record("nft", before=nft_tables())
        self.hostlog.record("forward-policy", old=forward_policy() or "ACCEPT")
        if not Path("/lib/modules").exists():  # kind mounts it into every node; docker creates it when missing
            self.hostlog.record("dir", path="/lib/modules")
        self.hostlog.record("tree", path=str(self.exec_root))
        self.hostlog.record("mounts", path=str(self.data_root))
        self.hostlog.record("cgroup", name=CGROUP_PARENT)
        self.hostlog.record("processes", marker=str(self.exec_root))
        progress(f"starting a private dockerd (socket {self.socket})")
        with self.log.open("a") as log:
            proc = spawn(argv, die_with_parent=False, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not _answers(self.engine.cli, self.engine.env):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-5:])
                self.stop(progress)
                raise HarnessError(f"the private dockerd did not start (log {self.log}):\n{tail}")
            time.sleep(0.3)
        # Containers here can only be left from an engine that was killed (a clean stop removes them all);
        # dockerd restarts them (kind's nodes have --restart=on-failure:1): they go.
        leftovers = self.engine.run(["ps", "-aq"], check=False).stdout.split()
        if leftovers:
            self.engine.run(["rm", "-f", "-v", *leftovers], timeout=300, check=False)
            progress(f"removed {len(leftovers)} container(s) left by a private dockerd that was killed")
        return self.engine

    def stop(self, progress: Progress = print) -> list[str]:
        """Remove every container and network, stop dockerd, undo its host changes."""
        done: list[str] = []
        if self.running():
            eng = self.engine
            ids = eng.run(["ps", "-aq"], check=False).stdout.split()
            if ids:
                eng.run(["rm", "-f", "-v", *ids], timeout=300, check=False)
                done.append(f"removed {len(ids)} container(s)")
            eng.run(["network", "prune", "-f"], check=False)
            eng.run(["volume", "prune", "-f"], check=False)
        pid = self.pid()
        if pid is not None:
            kill_pid(pid, timeout=30.0)
            done.append(f"stopped dockerd (pid {pid})")
        done += self.hostlog.undo(progress)
        for leftover in processes_with(str(self.exec_root)):
            kill_pid(leftover)
        self.pidfile.unlink(missing_ok=True)
        self.socket.unlink(missing_ok=True)
        return done


def find(host_quirks: list[quirks_mod.Quirk], start: bool = True, progress: Progress = print) -> Engine:
    """The engine to run kind on (see the module docstring); starts the private dockerd if ``start``.
    ``DRAGUARD_KIND_ENGINE=private`` passes over an existing docker or podman."""
    private = PrivateDockerd()
    if private.running():
        return private.engine
    if os.environ.get("DRAGUARD_KIND_ENGINE") != "private":
        docker = shutil.which("docker")
        if docker and _answers(docker, {}):
            return Engine("docker", docker)
        podman = shutil.which("podman")
        if podman and _answers(podman, {}):
            return Engine("podman", podman)
    if not start:
        raise UsageError("no container engine is running: run `draguard cluster up --backend kind` first")
    return private.start(host_quirks, progress)


def describe(engine: Engine) -> str:
    return json.dumps({"provider": engine.provider, "private": engine.private, **engine.env})
