"""The run journal: what a run created and which faults it applied, written before they happen.

One JSON-lines file per run under ``<state>/journal/<run-id>.jsonl``, each line flushed and fsynced
before the action it describes. ``draguard cleanup`` replays every journal left behind by a run that
crashed, was SIGKILLed or interrupted: it undoes the faults (newest first), stops the processes the
run started, deletes every object carrying the run label, and removes the journal.

Entry kinds:

- ``run``: the run started (kubeconfig, namespace, label, and the process that runs it: a journal
  whose process still runs belongs to a run in progress, which ``draguard cleanup`` leaves alone);
- ``process``: a process started (pid, what it is) so cleanup can stop it;
- ``fault``: a fault is about to be applied, with its undo (``UndoAction``: a kind and arguments that
  :data:`UNDO_HANDLERS` knows how to replay without the run's memory);
- ``undone``: that fault was undone;
- ``end``: the run cleaned up after itself; the journal is then deleted.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

import psutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.paths import state_dir
from draguard.harness.core.process import kill_pid, pid_alive

from ..cluster.kind.cluster import KindNodes
from ..cluster.podfiles import undo_pod_file
from ..cluster.local import LocalCluster
from ..kube import KINDS, RUN_LABEL, ApiError, Kube

__all__ = ["Journal", "UndoAction", "UNDO_HANDLERS", "journal_dir", "pending_journals", "recover", "delete_labelled", "RUN_LABEL"]


# Kinds that carry the run label and are removed at the end (namespaced ones go with their namespace).
CLEANUP_KINDS = ("Pod", "ResourceClaim", "ResourceClaimTemplate", "PodGroup", "Workload", "DeviceTaintRule",
                 "DeviceClass", "PriorityClass", "ResourceSlice", "Node", "Namespace")


def journal_dir() -> Path:
    return state_dir() / "journal"


@dataclass(frozen=True)
class UndoAction:
    """How to undo one fault from the journal alone: a handler name and JSON arguments."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)


UndoHandler = Callable[[Kube | None, dict[str, Any]], None]


def _undo_delete_object(kube: Kube | None, args: dict[str, Any]) -> None:
    if kube is not None:
        kube.delete(args["kind"], args["name"], args.get("namespace"))


def _undo_write_file(kube: Kube | None, args: dict[str, Any]) -> None:
    path = Path(args["path"])
    if args.get("content") is None:
        path.unlink(missing_ok=True)
    else:
        tmp = path.with_suffix(".undo")
        tmp.write_text(args["content"])
        tmp.replace(path)


def _undo_patch_object(kube: Kube | None, args: dict[str, Any]) -> None:
    if kube is not None:
        try:
            kube.patch(args["kind"], args["name"], args["patch"], args.get("namespace"), args.get("patchType", "merge"))
        except ApiError as exc:
            if not exc.not_found:  # gone (a driver uninstalled since): nothing left to put back
                raise


def _undo_kind_node(kube: Kube | None, args: dict[str, Any]) -> None:
    nodes, node = KindNodes.from_undo_args(args)
    if args.get("action") == "unpause":
        nodes.unpause(node)


UNDO_HANDLERS: dict[str, UndoHandler] = {
    "kind-node": _undo_kind_node,
    "delete-object": _undo_delete_object,
    "write-file": _undo_write_file,
    "patch-object": _undo_patch_object,
    "pod-file": undo_pod_file,
    "none": lambda kube, args: None,
}
"""Undo kinds that need nothing but the journal; processes restarted by a fault are the runner's job
while it lives, and are stopped by cleanup when it died."""


class Journal:
    """Append-only, fsynced. One per run."""

    def __init__(self, run_id: str, directory: Path | None = None) -> None:
        self.run_id = run_id
        self.path = (directory or journal_dir()) / f"{run_id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = 0
        self._lock = threading.Lock()  # steps run concurrently, each journaling its own actions

    def write(self, entry: dict[str, Any]) -> int:
        with self._lock:
            self._seq += 1
            record = {"seq": self._seq, "time": time.time(), **entry}
            with self.path.open("a") as f:
                f.write(json.dumps(record, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return self._seq

    def run_started(self, kubeconfig: str | None, namespace: str, label: str, cluster_dir: str | None) -> None:
        self.write({"entry": "run", "kubeconfig": kubeconfig, "namespace": namespace, "label": label,
                    "clusterDir": cluster_dir, "owner": _owner(os.getpid())})

    def process(self, pid: int, what: str) -> None:
        self.write({"entry": "process", "pid": pid, "what": what})

    def fault(self, step: str, fault: str, undo: UndoAction) -> int:
        return self.write({"entry": "fault", "step": step, "fault": fault, "undo": {"kind": undo.kind, "args": undo.args}})

    def undone(self, seq: int) -> None:
        self.write({"entry": "undone", "of": seq})

    def close(self) -> None:
        """The run cleaned up after itself: nothing is left to recover."""
        self.path.unlink(missing_ok=True)


def _owner(pid: int) -> dict[str, Any]:
    """The process writing a journal: its pid and start time (a pid alone may be reused)."""
    try:
        return {"pid": pid, "started": psutil.Process(pid).create_time()}
    except psutil.Error:
        return {"pid": pid, "started": None}


def still_running(entries: list[dict[str, Any]]) -> int | None:
    """The pid of the process that writes this journal when it is still running (a run in progress,
    not one that crashed), else None."""
    run = next((e for e in entries if e.get("entry") == "run"), {})
    owner = run.get("owner") or {}
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or not pid_alive(pid):
        return None
    return pid if _owner(pid).get("started") == owner.get("started") else None


def read(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a torn last line from a crash mid-write: everything before it stands
    return out


def pending_journals(directory: Path | None = None) -> list[Path]:
    d = directory or journal_dir()
    return sorted(d.glob("*.jsonl")) if d.exists() else []


def delete_labelled(kube: Kube, run_id: str) -> list[str]:
    """Delete every object that carries the run's label (pods without grace); returns what went."""
    done = []
    for kind in CLEANUP_KINDS:
        k = KINDS[kind]
        try:
            items = kube.items(kind, label_selector=f"{RUN_LABEL}={run_id}")
        except HarnessError:
            continue
        for item in items:
            md = item["metadata"]
            ns = md.get("namespace") if k.namespaced else None
            kube.delete(kind, md["name"], ns, grace_seconds=0 if kind == "Pod" else None)
            done.append(f"deleted {kind} {ns + '/' if ns else ''}{md['name']}")
    return done


def recover(path: Path, kubeconfig: str | None = None, log: Callable[[str], None] = print) -> list[str]:
    """Undo what one journal describes; returns what was done. Safe to run twice. A journal whose run is
    still in progress (its process alive) is left alone: that run cleans up after itself."""
    entries = read(path)
    done: list[str] = []
    running = still_running(entries)
    if running is not None:
        return [f"still running (pid {running}): left alone"]
    run = next((e for e in entries if e.get("entry") == "run"), {})
    kube: Kube | None = None
    config = kubeconfig or run.get("kubeconfig")
    if config and Path(config).exists():
        try:
            kube = Kube.from_kubeconfig(config)
            kube.server_version()
        except HarnessError as exc:
            log(f"cluster of run {path.stem} unreachable ({exc}); undoing local state only")
            kube = None
    undone = {e["of"] for e in entries if e.get("entry") == "undone"}
    for e in reversed(entries):
        if e.get("entry") == "fault" and e["seq"] not in undone:
            handler = UNDO_HANDLERS.get(e["undo"]["kind"])
            if handler is None:
                log(f"unknown undo kind {e['undo']['kind']!r} in {path}")
                continue
            handler(kube, e["undo"]["args"])
            done.append(f"undid {e['fault']} ({e['step']})")
    for e in reversed(entries):
        if e.get("entry") == "process" and pid_alive(int(e["pid"])):
            kill_pid(int(e["pid"]))
            done.append(f"stopped {e['what']} (pid {e['pid']})")
    label = run.get("label")
    if kube is not None and label:
        done += delete_labelled(kube, label)
    cluster_dir = run.get("clusterDir")
    if cluster_dir and (Path(cluster_dir) / "cluster.json").exists():
        LocalCluster.attach(Path(cluster_dir).name, base_dir=Path(cluster_dir).parent).down(remove=True)
        done.append(f"stopped local cluster {Path(cluster_dir).name}")
    path.unlink(missing_ok=True)
    return done
