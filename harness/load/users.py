"""Locust users that churn DRA claims (imported only in the load process: ``import locust`` patches
sockets with gevent process-wide).

Each task is one *operation*: create a gang of pods with template claims (``gang``), one pod with a
template claim (``template``) or several pods sharing one ResourceClaim (``shared``); wait until
every claim is allocated, every pod is prepared (its ``PodReadyToStartContainers`` condition, which
the kubelet sets only after NodePrepareResources succeeded) and Running; delete it; wait until every
pod and claim of the operation is gone (fully released: the resourceclaim controller deallocates
and removes a claim only once no pod uses it and, on a real kubelet, after unprepare). The times go
to locust as requests named ``allocated``, ``prepared``, ``running`` and ``released`` of type
``<kind>``; a step that does not happen in time is a failure of that request.

Users keep no state between tasks (an operation is created, awaited and deleted inside one task,
under a random name), so any worker can run any of them. Their settings are one JSON object,
:func:`settings`: a local runner and the master read it from the file named by
``$DRAGUARD_LOAD_CONFIG``; a worker (``locustmain --worker MASTER:PORT``, on this machine or
another) needs no file: the master forwards the same JSON as a custom option (``draguard_load``) in
each spawn message, locust's way of passing custom arguments to workers, and the worker installs it
with :func:`use_settings` before its users start. What each process shares is its
:class:`Tracker`: one watch of the load's pods and claims instead of one poll per operation.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import gevent
from locust import User, constant_throughput, task

from ..kube import RUN_LABEL, ApiError, Kube, Obj
from .engine import LOAD_LABEL

__all__ = ["ChurnUser", "Tracker", "settings", "use_settings", "OP_LABEL", "KIND_LABEL", "CONFIG_ENV",
           "SETTINGS_OPTION"]

OP_LABEL = "draguard.dev/load-op"
KIND_LABEL = "draguard.dev/load-kind"
CONFIG_ENV = "DRAGUARD_LOAD_CONFIG"
SETTINGS_OPTION = "draguard_load"
"""The custom parsed option in which the master forwards :func:`settings` to its workers."""

_settings: dict[str, Any] | None = None


def settings() -> dict[str, Any]:
    """The load's settings: those :func:`use_settings` installed (a worker), else the JSON file named
    by ``$DRAGUARD_LOAD_CONFIG`` (a local runner, the master), read once per process."""
    global _settings
    if _settings is None:
        path = os.environ.get(CONFIG_ENV)
        if not path:
            raise RuntimeError(f"no load settings: ${CONFIG_ENV} is not set and the master sent none")
        with open(path) as f:
            _settings = json.load(f)
    return _settings


def use_settings(values: dict[str, Any]) -> None:
    """Install the load's settings in this process (a worker: those its master forwarded)."""
    global _settings
    _settings = dict(values)


class Tracker:
    """One watch per process over the load's pods and claims; operations read it, never the API."""

    _instance: Tracker | None = None

    def __init__(self, kube: Kube, namespace: str, run: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.selector = f"{LOAD_LABEL}={run}"
        self.pods: dict[str, dict[str, Obj]] = {}
        """Operation -> pod name -> pod."""
        self.claims: dict[str, dict[str, Obj]] = {}
        """Operation -> claim name -> claim."""
        self.prepared_at: dict[str, float] = {}
        gevent.spawn(self._watch, "Pod", self.pods, _pod_op)
        gevent.spawn(self._watch, "ResourceClaim", self.claims, _claim_op)

    @classmethod
    def get(cls) -> Tracker:
        if cls._instance is None:
            s = settings()
            cls._instance = cls(Kube.from_kubeconfig(s["kubeconfig"], s.get("context")), s["namespace"], s["run"])
        return cls._instance

    def _watch(self, kind: str, store: dict[str, dict[str, Obj]], op_of: Any) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    items, rv = self.kube.list(kind, self.namespace, self.selector)
                    store.clear()
                    for obj in items:
                        self._put(kind, store, op_of(obj), obj)
                for etype, obj in self.kube.watch(kind, self.namespace, rv, self.selector, timeout_seconds=60):
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if etype == "BOOKMARK":
                        continue
                    op = op_of(obj)
                    if etype == "DELETED":
                        group = store.get(op or "", {})
                        group.pop(obj["metadata"]["name"], None)
                        self.prepared_at.pop(obj["metadata"]["name"], None)
                        if not group:
                            store.pop(op or "", None)
                    else:
                        self._put(kind, store, op, obj)
            except Exception:  # noqa: BLE001 - 410 Gone, a lost connection: list again
                rv = ""
                gevent.sleep(0.5)

    def _put(self, kind: str, store: dict[str, dict[str, Obj]], op: str | None, obj: Obj) -> None:
        if op is None:
            return
        name = obj["metadata"]["name"]
        store.setdefault(op, {})[name] = obj
        if kind == "Pod" and name not in self.prepared_at and _prepared(obj):
            self.prepared_at[name] = time.monotonic()

    def of(self, op: str) -> tuple[list[Obj], list[Obj]]:
        """The pods and claims of operation ``op`` (template claims belong to their owner pod)."""
        return list(self.pods.get(op, {}).values()), list(self.claims.get(op, {}).values())


def _pod_op(pod: Obj) -> str | None:
    op = pod["metadata"].get("labels", {}).get(OP_LABEL)
    return str(op) if op else None


def _prepared(pod: Obj) -> bool:
    return any(c.get("type") == "PodReadyToStartContainers" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())  # fmt: skip


def _claim_op(claim: Obj) -> str | None:
    md = claim["metadata"]
    if OP_LABEL in md.get("labels", {}):
        return str(md["labels"][OP_LABEL])
    for owner in md.get("ownerReferences") or ():
        if owner.get("kind") == "Pod":
            return str(owner["name"]).rsplit("-", 1)[0]
    return None


def _allocated(claim: Obj) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


class _Failed(Exception):
    pass


def _pacing(user: User) -> float:
    s = settings()
    return float(constant_throughput(s["rate"] / max(1, s["users"]))(user))


class ChurnUser(User):
    """Creates and deletes one operation per task at the target rate (spread over the users)."""

    wait_time = _pacing

    def _fire(self, kind: str, name: str, started: float, error: str | None = None) -> None:
        self.environment.events.request.fire(
            request_type=kind, name=name, response_time=(time.monotonic() - started) * 1000.0, response_length=0,
            exception=_Failed(error) if error else None, context={},
        )  # fmt: skip

    @task
    def operation(self) -> None:
        s = settings()
        kinds: list[str] = s["kinds"]
        kind = kinds[int(uuid.uuid4().int % len(kinds))]
        tracker = Tracker.get()
        kube = tracker.kube
        op = f"{s['prefix']}-{kind[0]}{uuid.uuid4().hex[:8]}"
        size = 1 if kind == "template" else int(s["gang_size"])
        labels = {RUN_LABEL: s["run_label"], LOAD_LABEL: s["run"], OP_LABEL: op, KIND_LABEL: kind}
        ns = s["namespace"]
        started = time.monotonic()
        try:
            if kind == "shared":
                kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": f"{op}-shared", "namespace": ns, "labels": labels},
                             "spec": s["shared_claim_spec"]})  # fmt: skip
            for i in range(size):
                kube.create(_pod(op, i, ns, labels, kind, s))
        except ApiError as exc:
            self._fire(kind, "create", started, str(exc))
            self._delete(op, kind, size, s)
            return
        self._fire(kind, "create", started)
        timeout = float(s["op_timeout"])
        marks = {"allocated": False, "prepared": False, "running": False}
        deadline = started + timeout
        while time.monotonic() < deadline and not all(marks.values()):
            pods, claims = tracker.of(op)
            want_claims = 1 if kind == "shared" else size
            if not marks["allocated"] and len(claims) >= want_claims and all(_allocated(c) for c in claims):
                marks["allocated"] = True
                self._fire(kind, "allocated", started)
            if not marks["prepared"] and len(pods) == size and all(p["metadata"]["name"] in tracker.prepared_at
                                                                   for p in pods):  # fmt: skip
                marks["prepared"] = True
                at = max(tracker.prepared_at[p["metadata"]["name"]] for p in pods)
                self._fire(kind, "prepared", started + (time.monotonic() - at))  # measured to "at"
            if not marks["running"] and len(pods) == size and all((p.get("status") or {}).get("phase") == "Running"
                                                                  for p in pods):  # fmt: skip
                marks["running"] = True
                self._fire(kind, "running", started)
            gevent.sleep(0.05)
        for name, done in marks.items():
            if not done:
                self._fire(kind, name, started, f"{op}: not {name} after {timeout:.0f}s")
        self._delete(op, kind, size, s)

    def _delete(self, op: str, kind: str, size: int, s: dict[str, Any]) -> None:
        tracker = Tracker.get()
        kube, ns = tracker.kube, s["namespace"]
        started = time.monotonic()
        try:
            for i in range(size):
                kube.delete("Pod", f"{op}-{i}", ns, grace_seconds=0)
            if kind == "shared":
                kube.delete("ResourceClaim", f"{op}-shared", ns)
        except ApiError as exc:
            self._fire(kind, "released", started, str(exc))
            return
        deadline = started + float(s["op_timeout"])
        while time.monotonic() < deadline:
            pods, claims = tracker.of(op)
            if not pods and not claims:
                self._fire(kind, "released", started)
                return
            gevent.sleep(0.05)
        self._fire(kind, "released", started, f"{op}: pods or claims still there after {s['op_timeout']}s")


def _pod(op: str, i: int, namespace: str, labels: dict[str, str], kind: str, s: dict[str, Any]) -> Obj:
    claim: dict[str, str] = (
        {"name": "devices", "resourceClaimName": f"{op}-shared"} if kind == "shared"
        else {"name": "devices", "resourceClaimTemplateName": s["template"]}
    )  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{op}-{i}", "namespace": namespace, "labels": labels},
        "spec": {
            "containers": [{"name": "main", "image": s["image"], "resources": {"claims": [{"name": "devices"}]}}],
            "resourceClaims": [claim],
            "terminationGracePeriodSeconds": 0,
        },
    }  # fmt: skip
