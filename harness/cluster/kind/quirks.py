"""What this host lacks for kind, and how each lack is worked around: detected, and applied only where it applies.

Each quirk has a name and a one-line note (shown when a cluster comes up). Where each is applied:

- ``capabilities``: the capability bounding set lacks capabilities a privileged container is given
  (``CAP_SYS_RESOURCE`` on some VMs), so runc fails with "unable to apply caps: operation not
  permitted". A runtime wrapper, registered with the private dockerd (``--add-runtime``,
  ``--default-runtime``), drops them from the bundle's ``config.json`` and from ``runc exec --process``
  JSON before it execs runc (:func:`write_runtime_wrapper`). Inside a node, containerd gives a privileged
  container the capabilities it has itself, so pods need no wrapper.
- ``oom-score-adj``: without ``CAP_SYS_RESOURCE`` containerd cannot lower a sandbox's ``oom_score_adj``
  ("can't get final child's PID from pipe: EOF"); the node's containerd gets ``restrict_oom_score_adj = true``
  (kind ``containerdConfigPatches``).
- ``cgroup-v1``: only cgroup v1 is usable; the kubelet refuses it unless ``failCgroupV1: false``
  (kind ``kubeadmConfigPatches``, ``KubeletConfiguration``).
- ``no-kindnetd``: the node image has no kindnetd image (draguard's offline image); kind's default CNI is
  turned off (``networking.disableDefaultCNI``) and the image's static bridge network is used.
- ``inotify``: the host's inotify limits are below what kind asks for (its known issue "Pod errors due to
  too many open files": every node's kubelet, containerd and systemd watch files under the host's one
  per-user limit, beside the host's own kubelets); :data:`INOTIFY_FLOOR` is set while draguard's
  private dockerd runs, journaled first and restored when it stops.

Talks to: /proc and /sys (reading), the filesystem (the wrapper).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Quirk", "detect", "kind_config_fragments", "write_runtime_wrapper", "CAP_NAMES", "missing_capabilities",
           "WRAPPER_RUNTIME", "INOTIFY_FLOOR", "low_inotify"]

# Capability numbers (linux/capability.h), as named in OCI runtime specs.
CAP_NAMES = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
    "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
]
WRAPPER_RUNTIME = "draguard-runc"


@dataclass(frozen=True)
class Quirk:
    name: str
    note: str
    data: tuple[str, ...] = ()


def missing_capabilities(status: str | None = None) -> list[str]:
    """Capabilities the kernel knows that this process's bounding set lacks."""
    if status is None:
        status = Path("/proc/self/status").read_text()
    bounding = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapBnd:")), None)
    if bounding is None:
        return []
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = len(CAP_NAMES) - 1
    return [CAP_NAMES[i] for i in range(min(last + 1, len(CAP_NAMES))) if not bounding >> i & 1]


def _cgroup_v2_usable(root: Path = Path("/sys/fs/cgroup")) -> bool:
    return (root / "cgroup.controllers").is_file()


def detect(offline_image: bool, status: str | None = None, cgroup_root: Path = Path("/sys/fs/cgroup"),
           proc_sys: Path = Path("/proc/sys")) -> list[Quirk]:
    quirks = []
    missing = missing_capabilities(status)
    if missing:
        quirks.append(Quirk("capabilities", f"the capability bounding set lacks {', '.join(missing)}: privileged "
                                            f"containers run through a runc wrapper that drops them", tuple(missing)))
    if "CAP_SYS_RESOURCE" in missing:
        quirks.append(Quirk("oom-score-adj", "CAP_SYS_RESOURCE is missing: the nodes' containerd sets restrict_oom_score_adj = true"))
    if not _cgroup_v2_usable(cgroup_root):
        quirks.append(Quirk("cgroup-v1", "only cgroup v1 is usable: the kubelet runs with failCgroupV1: false"))
    if offline_image:
        quirks.append(Quirk("no-kindnetd", "the offline node image has no kindnetd: disableDefaultCNI, the image's bridge network"))
    low = low_inotify(proc_sys)
    if low:
        quirks.append(Quirk("inotify", "inotify limits below kind's: " + ", ".join(f"{k} {v} < {INOTIFY_FLOOR[k]}" for k, v in low.items())
                            + ": raised while draguard's dockerd runs, restored after"))
    return quirks


INOTIFY_FLOOR = {"fs.inotify.max_user_instances": 512, "fs.inotify.max_user_watches": 524288}
"""kind's documented minimum (kind's known issues, "Pod errors due to too many open files")."""


def low_inotify(proc_sys: Path = Path("/proc/sys")) -> dict[str, int]:
    """Each inotify limit below :data:`INOTIFY_FLOOR` -> its value now."""
    low = {}
    for key, floor in INOTIFY_FLOOR.items():
        try:
            value = int((proc_sys / key.replace(".", "/")).read_text().strip())
        except (OSError, ValueError):
            continue
        if value < floor:
            low[key] = value
    return low


def kind_config_fragments(quirks: list[Quirk]) -> dict[str, Any]:
    """The parts of kind's ``Cluster`` config (v1alpha4) the quirks need."""
    names = {q.name for q in quirks}
    out: dict[str, Any] = {}
    if "cgroup-v1" in names:
        out["kubeadmConfigPatches"] = ["kind: KubeletConfiguration\nfailCgroupV1: false\n"]
    if "oom-score-adj" in names:
        out["containerdConfigPatches"] = ['[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n']
    if "no-kindnetd" in names:
        out["networking"] = {"disableDefaultCNI": True}
    return out


_WRAPPER = '''#!{python} -I
# draguard runtime wrapper (harness/cluster/kind/quirks.py): drops capabilities this host's bounding set lacks
# from the OCI config (create/run) and the process JSON (exec --process), then execs runc.
import json, os, sys
DROP = set({drop})
RUNC = {runc}

def strip(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return
    caps = (doc.get("process", doc) or {{}}).get("capabilities") or {{}}
    changed = False
    for key, values in list(caps.items()):
        if isinstance(values, list) and DROP.intersection(values):
            caps[key] = [v for v in values if v not in DROP]
            changed = True
    if changed:
        tmp = path + ".draguard"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg in ("create", "run"):
        bundle = "."
        rest = args[i + 1:]
        for j, a in enumerate(rest):
            if a in ("--bundle", "-b") and j + 1 < len(rest):
                bundle = rest[j + 1]
            elif a.startswith("--bundle="):
                bundle = a.split("=", 1)[1]
        strip(os.path.join(bundle, "config.json"))
        break
    if arg == "exec":
        rest = args[i + 1:]
        for j, a in enumerate(rest):
            if a in ("--process", "-p") and j + 1 < len(rest):
                strip(rest[j + 1])
            elif a.startswith("--process="):
                strip(a.split("=", 1)[1])
        break
os.execv(RUNC, [RUNC] + args)
'''


def write_runtime_wrapper(quirk: Quirk, dest: Path, runc: str) -> Path:
    """Write the runtime wrapper for the ``capabilities`` quirk at ``dest`` (mode 0755)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    text = _WRAPPER.format(python=python,
                           drop=json.dumps(sorted(quirk.data)), runc=json.dumps(runc))
    tmp = dest.with_name(dest.name + ".partial")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, dest)
    return dest
