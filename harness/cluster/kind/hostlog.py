"""The host changes a private container engine makes, journaled before they are made and undone when it goes.

Same design as the run journal (:mod:`draguard.harness.runner.journal`): JSON lines, each flushed and
fsynced before the change it describes; :func:`undo` replays them newest first from the file alone (so a
later process can undo what a killed one did), is safe to run twice, and removes the file at the end.

Entry kinds and their undo:

- ``sysctl`` (``key``, ``old``): write the old value back (dockerd turns ``net.ipv4.ip_forward`` on);
- ``links`` (``before``): delete the bridges named like the engine's (``docker0``, ``br-*``) that were not there;
- ``nft`` (``before``): delete the engine's chains (``DOCKER*``) and the rules that jump to them, then the
  tables that were not there and hold nothing else (rules another program added meanwhile stay);
- ``forward-policy`` (``old``): put the iptables FORWARD policy back (dockerd sets it to DROP when it turns
  forwarding on);
- ``dir`` (``path``): remove a directory the engine created where there was none (kind mounts
  ``/lib/modules``), if it is still empty;
- ``processes`` (``marker``): stop every process whose command line contains the marker (the engine's own
  exec root: dockerd, its containerd and shims), newest first;
- ``cgroup`` (``name``): kill every process left in that cgroup subtree of every hierarchy (the engine's
  containers, its nodes' systemd, kubelet and pods, when the engine was killed before it could stop them),
  then remove the subtree;
- ``mounts`` (``path``): unmount what a killed engine left mounted under ``path`` (its data root);
- ``tree`` (``path``): remove a directory tree (the engine's exec root and socket directory).

Talks to: ``ip``, ``nft``, ``iptables``, /proc.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draguard.harness.core.process import kill_pid

__all__ = ["HostLog", "bridges", "nft_tables", "processes_with", "sysctl_read", "kill_cgroup_tree", "forward_policy"]

Log = Callable[[str], None]


def sysctl_read(key: str) -> str | None:
    try:
        return Path("/proc/sys", *key.split(".")).read_text().strip()
    except OSError:
        return None


def bridges() -> list[str]:
    """Bridge links named as a container engine names them."""
    out = subprocess.run(["ip", "-j", "link", "show", "type", "bridge"], capture_output=True, text=True, check=False)
    try:
        links = json.loads(out.stdout or "[]")
    except ValueError:
        return []
    return sorted(str(link["ifname"]) for link in links if link.get("ifname") == "docker0" or str(link.get("ifname", "")).startswith("br-"))


def nft_tables() -> list[str]:
    """Every nftables table as ``family name``."""
    if shutil.which("nft") is None:
        return []
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False)
    return sorted(line.split(None, 1)[1].strip() for line in out.stdout.splitlines() if line.startswith("table "))


def processes_with(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and int(d.name) != os.getpid():
                pids.append(int(d.name))
    return sorted(pids)


def _strip_engine_chains(family_table: str) -> None:
    family, table = family_table.split()
    tool = {"ip": "iptables", "ip6": "ip6tables"}.get(family)
    if tool is None or shutil.which(tool) is None:
        return
    rules = subprocess.run([tool, "-t", table, "-S"], capture_output=True, text=True, check=False).stdout.splitlines()
    for rule in rules:
        if rule.startswith("-A ") and ("DOCKER" in rule or " br-" in rule or "docker0" in rule):
            subprocess.run([tool, "-t", table, "-D", *rule.split()[1:]], capture_output=True, check=False)
    for rule in rules:
        if rule.startswith("-N DOCKER"):
            chain = rule.split()[1]
            subprocess.run([tool, "-t", table, "-F", chain], capture_output=True, check=False)
            subprocess.run([tool, "-t", table, "-X", chain], capture_output=True, check=False)


_BASE_CHAINS = {"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}


def _only_empty_base_chains(family_table: str) -> bool:
    """Whether the table holds nothing but the iptables base chains, without rules."""
    out = subprocess.run(["nft", "list", "table", *family_table.split()], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        words = line.split()
        if not words or words[0] in ("table", "}", "#") or words[0].startswith("#") or words[0] == "type":
            continue
        if words[0] == "chain":
            if words[1] not in _BASE_CHAINS:
                return False
            continue
        return False  # a rule
    return True


def forward_policy() -> str | None:
    """The iptables FORWARD chain's policy (``ACCEPT``/``DROP``), None when there is no such chain."""
    if shutil.which("iptables") is None:
        return None
    out = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, check=False).stdout
    return next((line.split()[2] for line in out.splitlines() if line.startswith("-P FORWARD ")), None)


class HostLog:
    """Append-only, fsynced; one per private engine."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, kind: str, **args: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps({"time": time.time(), "kind": kind, **args}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def entries(self) -> list[dict[str, Any]]:
        out = []
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                break  # a torn last line: everything before it stands
        return out

    def undo(self, log: Log = print) -> list[str]:
        done: list[str] = []
        for e in reversed(self.entries()):
            kind = e.get("kind")
            if kind == "processes":
                for pid in reversed(processes_with(e["marker"])):
                    kill_pid(pid, timeout=20.0)
                    done.append(f"stopped pid {pid}")
            elif kind == "sysctl" and e.get("old") is not None:
                if sysctl_read(e["key"]) != e["old"]:
                    Path("/proc/sys", *e["key"].split(".")).write_text(e["old"] + "\n")
                    done.append(f"{e['key']} = {e['old']}")
            elif kind == "links":
                for name in bridges():
                    if name not in e["before"]:
                        subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)
                        done.append(f"deleted bridge {name}")
            elif kind == "nft":
                for table in nft_tables():
                    _strip_engine_chains(table)
                    if table not in e["before"] and _only_empty_base_chains(table):  # another user's rules stay
                        subprocess.run(["nft", "delete", "table", *table.split()], capture_output=True, check=False)
                        done.append(f"deleted nft table {table}")
            elif kind == "forward-policy":
                if shutil.which("iptables") and e.get("old") and forward_policy() not in (None, e["old"]):
                    subprocess.run(["iptables", "-P", "FORWARD", e["old"]], capture_output=True, check=False)
                    done.append(f"iptables FORWARD policy {e['old']}")
            elif kind == "dir":
                path = Path(e["path"])
                try:
                    path.rmdir()
                    done.append(f"removed {path}")
                except OSError:
                    pass
            elif kind == "cgroup":
                killed = kill_cgroup_tree(e["name"])
                if killed:
                    done.append(f"killed {killed} process(es) left in cgroup {e['name']}")
            elif kind == "mounts":
                _unmount_under(Path(e["path"]))
            elif kind == "tree":
                if Path(e["path"]).exists():
                    _unmount_under(Path(e["path"]))
                    shutil.rmtree(e["path"], ignore_errors=True)
                    done.append(f"removed {e['path']}")
        for line in done:
            log(line)
        self.path.unlink(missing_ok=True)
        return done


def _cgroup_dirs(name: str) -> list[Path]:
    """``name`` under every mounted cgroup hierarchy (v1 and v2) where it exists."""
    out = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if fields[2] in ("cgroup", "cgroup2") and (Path(fields[1]) / name).is_dir():
                out.append(Path(fields[1]) / name)
    except OSError:
        pass
    return out


def kill_cgroup_tree(name: str, timeout: float = 20.0) -> int:
    """SIGKILL every process in cgroup ``name`` and below, in every hierarchy, then remove the cgroups; returns
    how many processes were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids: set[int] = set()
        for root in _cgroup_dirs(name):
            for procs in root.rglob("cgroup.procs"):
                try:
                    pids.update(int(p) for p in procs.read_text().split())
                except (OSError, ValueError):
                    continue
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.2)
    for root in _cgroup_dirs(name):
        for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) + [root]:
            try:
                d.rmdir()
            except OSError:
                pass
    return len(killed)


def _unmount_under(root: Path) -> None:
    """Lazily unmount whatever is still mounted under ``root`` (deepest first): a killed engine leaves
    its network namespaces and overlay mounts behind."""
    mounts = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            target = line.split()[1].replace("\\040", " ")
            if target == str(root) or target.startswith(str(root) + "/"):
                mounts.append(target)
    except OSError:
        return
    for target in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)
