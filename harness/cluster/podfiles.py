"""Files on a node reached through the Kubernetes API: read, written and removed inside the running pod of a
DaemonSet on that node with the API's exec (:meth:`~draguard.harness.kube.Kube.exec`, as ``kubectl exec``
does), where the pod mounts the node's directories as hostPaths.

This is how draguard reaches an installed driver's files on a cluster's own nodes without entering them:
draguard's fake driver's fault file and device truth (deploy/fake-driver.yaml mounts
``/var/lib/kubelet/plugins/gpu.draguard.dev`` and ``/var/lib/draguard-fake``), and the node probe's
read-only views (deploy/node-probe.yaml). A write replaces the file atomically (a temporary file renamed
over it), so a reader that watches it (the fake driver's fault control) never sees half of it.

:func:`undo_pod_file` is the run journal's ``pod-file`` undo: it puts a file back (or removes it) from the
journal's arguments alone, through whatever pod of the DaemonSet runs on the node then.

Talks to: the API server (pods, exec).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Kube, Obj

__all__ = ["PodFiles", "undo_pod_file", "running_pod"]

_READ = 'if [ -e "$1" ]; then exec cat "$1"; else exit 3; fi'
_ABSENT = 3
"""The exit status of :data:`_READ` for a file that is not there (not an error: no file)."""
_WRITE = 'printf "%s" "$2" > "$1.draguard-tmp" && mv -f "$1.draguard-tmp" "$1"'


def running_pod(kube: Kube, namespace: str, daemonset: str, node: str, container: str) -> Obj | None:
    """The pod of DaemonSet ``namespace/daemonset`` on ``node`` whose ``container`` runs now (not being
    deleted), or None."""
    pods, _ = kube.list("Pod", namespace, field_selector=f"spec.nodeName={node}")
    for pod in pods:
        owned = any(o.get("kind") == "DaemonSet" and o.get("name") == daemonset and o.get("controller")
                    for o in pod["metadata"].get("ownerReferences") or [])
        status = pod.get("status") or {}
        if not owned or pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        if any(c.get("name") == container and (c.get("state") or {}).get("running")
               for c in status.get("containerStatuses") or []):
            return pod
    return None


@dataclass
class PodFiles:
    """Files of one node seen through the running pod of a DaemonSet there (its ``container``)."""

    kube: Kube
    namespace: str
    daemonset: str
    node: str
    container: str
    wait: float = 60.0
    """Seconds to wait for a running pod on the node (a driver pod being replaced)."""

    def pod(self) -> str:
        """The name of the DaemonSet's running pod on the node; HarnessError when none runs within :attr:`wait`."""
        deadline = time.monotonic() + self.wait
        while True:
            pod = running_pod(self.kube, self.namespace, self.daemonset, self.node, self.container)
            if pod is not None:
                return str(pod["metadata"]["name"])
            if time.monotonic() > deadline:
                raise HarnessError(f"node {self.node}: no running pod of DaemonSet {self.namespace}/{self.daemonset} "
                                   f"there after {self.wait:.0f}s to reach its files through")
            time.sleep(0.5)

    def run(self, command: list[str], timeout: float = 60.0) -> tuple[int, bytes, str]:
        """Run ``command`` in the pod's container: (exit status, stdout, stderr)."""
        pod = self.pod()
        return self.kube.exec(pod, self.namespace, command, container=self.container, timeout=timeout)

    def read(self, path: str) -> str | None:
        """The file's text; None when it is not there (HarnessError when it cannot be read)."""
        code, out, err = self.run(["sh", "-c", _READ, "sh", path])
        if code == _ABSENT:
            return None
        if code != 0:
            raise HarnessError(f"node {self.node}: cannot read {path} in the pod of {self.namespace}/{self.daemonset}: "
                               f"{err.strip()[-300:] or f'exit {code}'}")
        return out.decode(errors="replace")

    def write(self, path: str, content: str | None) -> None:
        """Replace the file with ``content`` atomically, or remove it (None)."""
        command = ["rm", "-f", path] if content is None else ["sh", "-c", _WRITE, "sh", path, content]
        code, _, err = self.run(command)
        if code != 0:
            what = "remove" if content is None else "write"
            raise HarnessError(f"node {self.node}: cannot {what} {path} in the pod of {self.namespace}/{self.daemonset}: "
                               f"{err.strip()[-300:] or f'exit {code}'}")

    def undo_args(self, path: str, content: str | None) -> dict[str, Any]:
        """The journal's ``pod-file`` arguments that put ``path`` back to ``content`` (None: no file)."""
        return {"namespace": self.namespace, "daemonSet": self.daemonset, "node": self.node, "container": self.container,
                "path": path, "content": content}


def undo_pod_file(kube: Kube | None, args: dict[str, Any]) -> None:
    """The journal's ``pod-file`` undo: ``path`` back to ``content`` (removed when None) through the
    DaemonSet's running pod on the node; nothing to do without the cluster (unreachable or gone: its nodes'
    files with it) or when the DaemonSet is gone, HarnessError when its pod there cannot be reached."""
    if kube is None:
        return
    if kube.get("DaemonSet", str(args["daemonSet"]), str(args["namespace"])) is None:
        return
    files = PodFiles(kube, str(args["namespace"]), str(args["daemonSet"]), str(args["node"]), str(args["container"]))
    files.write(str(args["path"]), args.get("content"))
