"""Checks of a scenario that span fields: names unique, references resolved, "exactly one of".

They run over the plain parsed data (dicts and lists), not over the validated model, so that they
report their problems even when the same file also has type errors: the loader gives every problem
of a file in one pass. Each check guards against wrong types silently (the schema pass reports
those) and yields an :class:`~draguard.harness.scenario.issues.Issue` on the exact field.

Fault parameters are validated here too, against the params model that the fault kind registered
in :data:`~draguard.harness.core.registry.FAULTS` (or the registry passed in).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from draguard.harness.agents import CAPABILITIES, capable
from draguard.harness.agents import MAX_NODES as AGENT_MAX_NODES
from draguard.harness.core.registry import Registry
from draguard.harness.dralimits import MAX_DEVICE_INDEX, MAX_NUMA_NODE
from draguard.harness.scenario.format import (
    MAX_CLAIMS,
    MAX_CLAIMS_PER_POD,
    MAX_NODES,
    MAX_NODES_PER_GROUP,
    MAX_PODS,
    MAX_REPLICAS,
)
from draguard.harness.scenario.issues import Issue, Path, from_validation_error, render_path

__all__ = ["check_document", "expand_node_names", "lacking"]

_MEMBER_KEYWORDS = ("random", "all")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _exactly_one(item: dict[str, Any], keys: tuple[str, ...], path: Path) -> Iterator[Issue]:
    present = [k for k in item if k in keys and item[k] is not None]  # file order
    if not present:
        yield Issue(path, f"set one of {', '.join(repr(k) for k in keys)}")
    elif len(present) > 1:
        yield Issue(path + (present[1],), f"set only one of {', '.join(repr(k) for k in present)}", on_key=True)


def _unique(items: list[Any], key: str, path: Path, what: str) -> Iterator[Issue]:
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        name = _str(_dict(item).get(key))
        if name is None:
            continue
        if name in seen:
            first = render_path(path + (seen[name], key))
            yield Issue(path + (i, key), f"duplicate {what} {name!r}; already used by {first}")
        else:
            seen[name] = i


def _group_size(group: dict[str, Any]) -> int:
    """How many nodes a group declares; 0 when its ``count`` is out of bounds (the schema pass says so)."""
    if _str(group.get("namePrefix")) is None:
        return 1 if _str(group.get("name")) is not None else 0
    count = group.get("count")
    if count is None:
        return 1
    n = _int(count)
    return n if n is not None and 1 <= n <= MAX_NODES_PER_GROUP else 0


def _claims_of(workload: dict[str, Any]) -> int:
    """ResourceClaims a workload creates; 0 when its replicas or claims are out of bounds (the schema pass says so)."""
    replicas = _int(workload.get("replicas"))
    claims = _list(workload.get("claims"))
    if replicas is None or not 0 < replicas <= MAX_REPLICAS or len(claims) > MAX_CLAIMS_PER_POD:
        return 0
    shared = sum(1 for c in claims if _dict(c).get("source") == "shared")
    return replicas * (len(claims) - shared) + shared


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def expand_node_names(group: dict[str, Any]) -> list[str]:
    """Node names of one node group: ``[name]`` or ``<namePrefix>-0`` ... ``<namePrefix>-<count-1>``.

    Never allocates in proportion to an unchecked number: a ``count`` outside 1..MAX_NODES_PER_GROUP
    expands to nothing (the schema pass reports the count itself).
    """
    if _str(group.get("namePrefix")) is not None:
        return [f"{group['namePrefix']}-{i}" for i in range(_group_size(group))]
    name = _str(group.get("name"))
    return [name] if name is not None else []


def interposes(driver_kind: str, backend: str, interpose: bool | None) -> bool:
    """Whether the gRPC interposer sits in front of the driver: as ``driver.interpose`` says, and by
    default for an external driver where draguard runs it (the local backend: its sockets are here)."""
    if interpose is not None:
        return interpose
    return driver_kind == "external" and backend == "local"


def lacking(driver_kind: str, backend: str, interpose: bool, daemon_set: bool = False,
            restart_command: bool = False) -> dict[str, str]:
    """The capabilities (``needs`` of faults and invariants) a run with these settings lacks -> why.

    ``restart-driver``, ``stop-driver`` and ``kill-node`` are what a fleet offers (``draguard.harness.fleet``):
    the fake driver and draguard's node agents always; an external driver through its DaemonSet (named by
    ``driver.daemonSet``, or found on a kind cluster), or restarted (not stopped) by ``driver.restartCommand``,
    and the nodes of a kind cluster through their containers. One home for validation (raw documents), the
    default ``expect.hold`` and the runner."""
    lacks: dict[str, str] = {}
    if driver_kind != "fake":
        lacks["fake-driver"] = "spec.driver.kind is external, and only draguard's fake driver has this fault"
        lacks["fake-nodes"] = "spec.driver.kind is external: the cluster's own nodes run the pods, not draguard's"
        lacks["rolling-update"] = ("spec.driver.kind is external: draguard starts a second instance beside the first "
                                   "only of its own fake driver (a DaemonSet rollout with surge is not driven)")
        if not daemon_set and backend not in ("kind", "local"):
            lacks["stop-driver"] = ("spec.driver.kind is external and names no driver.daemonSet (nor runs on "
                                    "cluster.backend: kind, where draguard finds it, or local, where draguard "
                                    "runs it): draguard cannot stop it")
            if not restart_command:
                lacks["restart-driver"] = ("spec.driver.kind is external and names no driver.daemonSet or "
                                           "restartCommand (nor runs on cluster.backend: kind, where draguard "
                                           "finds it, or local, where draguard runs it): draguard cannot restart it")
        if backend == "kubeconfig":
            lacks["kill-node"] = ("spec.cluster.backend is kubeconfig: the cluster's nodes are not draguard's to stop "
                                  "(on cluster.backend: kind they are)")
    if backend != "local":
        lacks["local-backend"] = f"spec.cluster.backend is {backend}: draguard cannot restart that control plane"
    if not interpose:
        lacks["interposer"] = "spec.driver.interpose is not true"
        if driver_kind != "fake":
            lacks["rpc-faults"] = ("spec.driver.kind is external and no gRPC interposer sits in front of it (on "
                                   "cluster.backend: local it does): nothing can make its calls fail")
        # The devices a prepare answered are read from the interposer's record (DriverCall.answers).
        lacks["interposer-answers"] = ("spec.driver.interpose is not true: no record of the devices the driver "
                                       "answers at prepare")
    return lacks


class _Checker:
    def __init__(self, doc: dict[str, Any], faults: Registry[Any], invariants: Registry[Any]) -> None:
        self.doc = doc
        self.spec = _dict(doc.get("spec"))
        self.faults = faults
        self.invariants = invariants
        self.issues: list[Issue] = []
        driver = _dict(self.spec.get("driver"))
        self.driver_kind = _str(driver.get("kind")) or "fake"
        self.workloads = {
            name: w for w in _list(self.spec.get("workloads")) if (name := _str(_dict(w).get("name"))) is not None
        }
        self.node_names: list[str] = []
        self.node_agents: dict[str, str] = {}
        self.agent_counts: dict[str, int] = {}
        self.too_many_nodes = sum(_group_size(_dict(g)) for g in _list(self.spec.get("nodes"))) > MAX_NODES
        if not self.too_many_nodes:  # names are built only once their total is known to be bounded
            for group in _list(self.spec.get("nodes")):
                names = expand_node_names(_dict(group))
                self.node_names += names
                agent = _str(_dict(group).get("agent")) or "fake"
                self.node_agents.update((n, agent) for n in names)
        for agent in self.node_agents.values():
            self.agent_counts[agent] = self.agent_counts.get(agent, 0) + 1
        self.classes = {
            name for c in _list(self.spec.get("deviceClasses")) if (name := _str(_dict(c).get("name"))) is not None
        }
        if self.driver_kind == "external" and _str(driver.get("deviceClass")):
            self.classes.add(driver["deviceClass"])

    def add(self, path: Path, message: str, on_key: bool = False) -> None:
        self.issues.append(Issue(path, message, on_key))

    def extend(self, issues: Iterator[Issue]) -> None:
        self.issues.extend(issues)

    def run(self) -> list[Issue]:
        for check in (self.cluster, self.driver, self.nodes, self.device_classes, self.workloads_, self.timeline,
                      self.expect):  # fmt: skip
            check()
        return self.issues

    # -- sections ------------------------------------------------------------------------------

    def cluster(self) -> None:
        cluster = _dict(self.spec.get("cluster"))
        backend = _str(cluster.get("backend")) or "local"
        if backend != "kubeconfig":
            for key in ("kubeconfig", "context"):
                if cluster.get(key) is not None:
                    self.add(("spec", "cluster", key), f"{key!r} needs backend: kubeconfig", on_key=True)
        if backend != "kind" and cluster.get("kindCluster") is not None:
            self.add(("spec", "cluster", "kindCluster"), "'kindCluster' needs backend: kind", on_key=True)
        if backend == "kind" and self.driver_kind == "fake":
            self.add(("spec", "cluster", "backend"), "backend kind runs a driver installed in the kind cluster "
                     "(driver.kind: external), whose nodes are the cluster's, not this file's; for draguard's fake "
                     "driver installed there (deploy/fake-driver.yaml) run this scenario as written for it with "
                     "--cluster kind --driver gpu.draguard.dev --device-class draguard-fake-driver, which maps its "
                     "nodes onto the cluster's and keeps its mutant")
        if backend != "local":
            for key in ("clientQps", "clientBurst", "maxRequestsInflight"):
                if cluster.get(key) is not None:
                    self.add(("spec", "cluster", key), f"{key!r} configures the local control plane; an existing "
                             "cluster keeps its own", on_key=True)  # fmt: skip

    def driver(self) -> None:
        driver = _dict(self.spec.get("driver"))
        path: Path = ("spec", "driver")
        if self.driver_kind == "external":
            if driver.get("deviceClass") is None:
                self.add(path, "missing 'deviceClass': the DeviceClass the external driver installs")
            if driver.get("mutant") is not None:
                self.add(path + ("mutant",), "mutants exist for the fake driver only", on_key=True)
            if driver.get("hosting") is not None:
                self.add(path + ("hosting",), "'hosting' is how draguard runs its fake driver: fake driver only",
                         on_key=True)  # fmt: skip
            if driver.get("interpose") is True and (_str(_dict(self.spec.get("cluster")).get("backend")) or "local") != "local":
                self.add(path + ("interpose",), "the interposer needs the plugin sockets on this machine: "
                         "backend local only, where draguard runs the driver", on_key=True)  # fmt: skip
            if driver.get("restartCommand") is not None and (_str(_dict(self.spec.get("cluster")).get("backend")) or "local") == "local":
                self.add(path + ("restartCommand",), "'restartCommand' restarts a driver installed in a cluster; on "
                         "backend local draguard runs the driver itself and restarts it", on_key=True)  # fmt: skip
            if driver.get("daemonSet") is not None and (_str(_dict(self.spec.get("cluster")).get("backend")) or "local") == "local":
                self.add(path + ("daemonSet",), "'daemonSet' names a driver installed in a cluster; on backend local "
                         "draguard runs the driver itself", on_key=True)  # fmt: skip
        elif driver.get("daemonSet") is not None:
            self.add(path + ("daemonSet",), "'daemonSet' is for an external driver", on_key=True)
        elif driver.get("restartCommand") is not None:
            self.add(path + ("restartCommand",), "'restartCommand' is for an external driver; draguard restarts "
                     "its fake driver itself", on_key=True)  # fmt: skip
        elif driver.get("deviceClass") is not None:
            self.add(path + ("deviceClass",), "'deviceClass' is for an external driver; declare deviceClasses "
                     "for the fake driver", on_key=True)  # fmt: skip

    def nodes(self) -> None:
        groups = _list(self.spec.get("nodes"))
        if self.driver_kind == "fake" and isinstance(self.spec.get("nodes", []), list) and not groups:
            self.add(("spec", "nodes"), "the fake driver needs at least one node group in 'nodes'")
        if self.too_many_nodes:
            total = sum(_group_size(_dict(g)) for g in groups)
            self.add(("spec", "nodes"), f"expected at most {MAX_NODES} nodes in all groups together, got {total}")
        seen: dict[str, Path] = {}
        for i, raw in enumerate(groups):
            group = _dict(raw)
            path: Path = ("spec", "nodes", i)
            if not isinstance(raw, dict):
                continue
            self.extend(_exactly_one(group, ("name", "namePrefix"), path))
            if group.get("count") is not None and group.get("namePrefix") is None:
                self.add(path + ("count",), "'count' needs 'namePrefix' (nodes are named <namePrefix>-<i>)",
                         on_key=True)  # fmt: skip
            key = "namePrefix" if group.get("namePrefix") is not None else "name"
            for name in [] if self.too_many_nodes else expand_node_names(group):
                if name in seen:
                    self.add(path + (key,), f"node {name!r} is declared twice; first by {render_path(seen[name])}")
                    break
                seen[name] = path + (key,)
            agent = _str(group.get("agent")) or "fake"
            count = self.agent_counts.get(agent, 0)
            if agent in AGENT_MAX_NODES and count > AGENT_MAX_NODES[agent] and (group.get("count") is not None):
                self.add(path + ("count",), f"{count} nodes of agent {agent!r}: at most {AGENT_MAX_NODES[agent]} per "
                         "scenario (the fake agent serves many nodes in one process)", on_key=True)  # fmt: skip
            topology = group.get("topology")
            if self.driver_kind == "fake" and topology is None:
                self.add(path, "missing 'topology': the fake driver needs the devices of each node")
            elif self.driver_kind == "external" and topology is not None:
                self.add(path + ("topology",), "'topology' is for the fake driver; an external driver publishes "
                         "its own devices", on_key=True)  # fmt: skip
            if isinstance(topology, dict):
                self.topology(topology, path + ("topology",))

    def topology(self, topology: dict[str, Any], path: Path) -> None:
        self.extend(_exactly_one(topology, ("preset", "gpus", "devices"), path))
        gpus = _int(topology.get("gpus"))
        if topology.get("gpus") is None:
            for key in ("productName", "memory", "nvlinkDomains", "numaNodes", "allowMultipleAllocations"):
                if key in topology:
                    self.add(path + (key,), f"{key!r} describes generated GPUs; it needs 'gpus'", on_key=True)
        else:
            memory = topology.get("memory")
            if isinstance(memory, str) and memory.endswith("m"):
                self.add(path + ("memory",), "memory must be a whole number of bytes (no 'm' suffix)")
        if gpus is not None:
            for key in ("nvlinkDomains", "numaNodes"):
                n = _int(topology.get(key))
                if n is not None and n > 0 and gpus % n:
                    self.add(path + (key,), f"{gpus} gpus cannot be split evenly into {n} {key}")
        self.extend(_unique(_list(topology.get("devices")), "name", path + ("devices",), "device name"))
        gates = _dict(_dict(self.spec.get("cluster")).get("featureGates"))
        for i, device in enumerate(_list(topology.get("devices"))):
            self.device(_dict(device), path + ("devices", i), gates)
        if topology.get("allowMultipleAllocations") is True and gates.get("DRAConsumableCapacity") is False:
            self.add(path + ("allowMultipleAllocations",), "allowMultipleAllocations needs the DRAConsumableCapacity "
                     "feature gate, which the cluster switches off: the API server would drop it", on_key=True)  # fmt: skip

    def device(self, device: dict[str, Any], path: Path, gates: dict[str, Any]) -> None:
        """Fields of an explicit device that the fake driver could not publish as written."""
        attributes = _dict(device.get("attributes"))
        for key, most in (("index", MAX_DEVICE_INDEX), ("numaNode", MAX_NUMA_NODE)):
            if key not in attributes:
                continue
            value = _int(attributes[key])
            if value is None or value < 0:
                self.add(path + ("attributes", key), f"the fake driver publishes {key!r} as a non-negative integer")
            elif value > most:
                self.add(path + ("attributes", key), f"the fake driver publishes {key!r} as an integer of at most "
                         f"{most}, got {_short(value)}")  # fmt: skip
        for key in ("productName", "architecture", "pcieRoot", "nvlinkDomain"):
            if key in attributes and not isinstance(attributes[key], str):
                self.add(path + ("attributes", key), f"the fake driver publishes {key!r} as a string")
        memory = _dict(device.get("capacity")).get("memory")
        if isinstance(memory, str) and memory.endswith("m"):
            self.add(path + ("capacity", "memory"), "memory must be a whole number of bytes (no 'm' suffix)")
        if device.get("allowMultipleAllocations") is True and gates.get("DRAConsumableCapacity") is False:
            self.add(path + ("allowMultipleAllocations",), "allowMultipleAllocations needs the DRAConsumableCapacity "
                     "feature gate, which the cluster switches off: the API server would drop it", on_key=True)  # fmt: skip
        if _list(device.get("taints")) and gates.get("DRADeviceTaints") is False:
            self.add(path + ("taints",), "device taints need the DRADeviceTaints feature gate, which the cluster "
                     "switches off: the API server would drop them", on_key=True)  # fmt: skip

    def device_classes(self) -> None:
        self.extend(_unique(_list(self.spec.get("deviceClasses")), "name", ("spec", "deviceClasses"),
                            "device class name"))  # fmt: skip

    def workloads_(self) -> None:
        workloads = _list(self.spec.get("workloads"))
        self.extend(_unique(workloads, "name", ("spec", "workloads"), "workload name"))
        pods = sum(r for w in workloads if (r := _int(_dict(w).get("replicas"))) is not None and 0 < r <= MAX_REPLICAS)
        if pods > MAX_PODS:
            self.add(("spec", "workloads"), f"expected at most {MAX_PODS} pods (replicas) in all workloads together, "
                     f"got {pods}")  # fmt: skip
        elif (total := sum(_claims_of(_dict(w)) for w in workloads)) > MAX_CLAIMS:
            self.add(("spec", "workloads"), f"expected at most {MAX_CLAIMS} ResourceClaims in all workloads together "
                     f"(a template claim per pod, a shared one per workload), got {total}")  # fmt: skip
        gates = _dict(_dict(self.spec.get("cluster")).get("featureGates"))
        for i, raw in enumerate(workloads):
            if not isinstance(raw, dict):
                continue
            w: dict[str, Any] = raw
            path: Path = ("spec", "workloads", i)
            replicas = _int(w.get("replicas"))
            if w.get("gang") == "podgroup" and gates.get("GenericWorkload") is not True:
                self.add(path + ("gang",), "gang: podgroup needs the Workload/PodGroup API: set "
                         "spec.cluster.featureGates.GenericWorkload: true")  # fmt: skip
            min_count = _int(w.get("minCount"))
            if w.get("minCount") is not None and w.get("gang") != "podgroup":
                self.add(path + ("minCount",), "'minCount' needs gang: podgroup", on_key=True)
            elif min_count is not None and replicas is not None and min_count > replicas:
                self.add(path + ("minCount",), f"expected at most replicas ({replicas}), got {min_count}")
            if w.get("priority") is not None and w.get("priorityClassName") is not None:
                self.add(path + ("priorityClassName",), "set only one of 'priority', 'priorityClassName'",
                         on_key=True)  # fmt: skip
            other = _str(w.get("interleaveWith"))
            if other is not None:
                if other == w.get("name"):
                    self.add(path + ("interleaveWith",), "a workload cannot interleave with itself")
                elif other not in self.workloads:
                    self.add(path + ("interleaveWith",), self._unknown("workload", other, self.workloads))
            claims = _list(w.get("claims"))
            self.extend(_unique(claims, "name", path + ("claims",), "claim name"))
            for j, claim in enumerate(claims):
                if isinstance(claim, dict):
                    self.claim(claim, path + ("claims", j))

    def claim(self, claim: dict[str, Any], path: Path) -> None:
        requests = _list(claim.get("requests"))
        self.extend(_unique(requests, "name", path + ("requests",), "request name"))
        names = {n for r in requests if (n := _str(_dict(r).get("name"))) is not None}
        for k, raw in enumerate(requests):
            if not isinstance(raw, dict):
                continue
            rpath = path + ("requests", k)
            self.extend(_exactly_one(raw, ("deviceClassName", "firstAvailable"), rpath))
            if raw.get("firstAvailable") is not None:
                for key in ("selectors", "allocationMode", "count", "adminAccess", "tolerations"):
                    if key in raw:
                        self.add(rpath + (key,), f"{key!r} belongs in each 'firstAvailable' entry", on_key=True)
                subs = _list(raw.get("firstAvailable"))
                self.extend(_unique(subs, "name", rpath + ("firstAvailable",), "sub-request name"))
                for s, sub in enumerate(subs):
                    if isinstance(sub, dict):
                        self.request_body(sub, rpath + ("firstAvailable", s))
            else:
                self.request_body(raw, rpath)
        for k, raw in enumerate(_list(claim.get("constraints"))):
            if not isinstance(raw, dict):
                continue
            cpath = path + ("constraints", k)
            self.extend(_exactly_one(raw, ("matchAttribute", "distinctAttribute"), cpath))
            self.request_refs(raw, cpath, names)
        for k, raw in enumerate(_list(claim.get("config"))):
            if isinstance(raw, dict):
                self.request_refs(raw, path + ("config", k), names)

    def request_body(self, request: dict[str, Any], path: Path) -> None:
        cls = _str(request.get("deviceClassName"))
        if cls is not None and cls not in self.classes:
            self.add(path + ("deviceClassName",), self._unknown("device class", cls, self.classes,
                     hint="declare it in spec.deviceClasses"))  # fmt: skip
        if request.get("allocationMode") == "All" and request.get("count") is not None:
            self.add(path + ("count",), "'count' needs allocationMode: ExactCount; All takes every matching device",
                     on_key=True)  # fmt: skip

    def request_refs(self, item: dict[str, Any], path: Path, names: set[str]) -> None:
        for r, name in enumerate(_list(item.get("requests"))):
            if isinstance(name, str) and name not in names:
                self.add(path + ("requests", r), self._unknown("request", name, names))

    def capabilities(self) -> dict[str, str]:
        """What this scenario's run can do -> why not, for each capability it lacks."""
        cluster = _dict(self.spec.get("cluster"))
        driver = _dict(self.spec.get("driver"))
        backend = _str(cluster.get("backend")) or "local"
        interpose = driver.get("interpose")
        return lacking(self.driver_kind, backend,
                       interposes(self.driver_kind, backend, interpose if isinstance(interpose, bool) else None),
                       isinstance(driver.get("daemonSet"), dict), isinstance(driver.get("restartCommand"), str))

    def timeline(self) -> None:
        steps = _list(self.spec.get("timeline"))
        self.extend(_unique(steps, "name", ("spec", "timeline"), "step name"))
        earlier: list[str] = []
        for i, raw in enumerate(steps):
            if isinstance(raw, dict):
                self.step(raw, ("spec", "timeline", i), earlier)
                earlier.append(_str(raw.get("name")) or f"{i}-{raw.get('fault')}")

    def step(self, step: dict[str, Any], path: Path, earlier: list[str] | None = None) -> None:
        self.extend(_exactly_one(step, ("at", "when", "after"), path))
        after = step.get("after")
        if isinstance(after, dict) and isinstance(after.get("step"), str) and earlier is not None:
            if after["step"] not in earlier:
                self.add(path + ("after", "step"), self._unknown("earlier step", after["step"], earlier,
                         hint="a step can only follow one listed before it"))  # fmt: skip
        for key in ("timeout",):
            if step.get(key) is not None and step.get("at") is not None:
                self.add(path + (key,), f"{key!r} is for 'when' and 'after' steps; an 'at' step has no condition",
                         on_key=True)  # fmt: skip
        when = step.get("when")
        if isinstance(when, dict):
            workload = self.workload_ref(when, path + ("when",))
            count = _int(when.get("count"))
            replicas = _int(_dict(workload).get("replicas"))
            if count is not None and replicas is not None and count > replicas:
                self.add(path + ("when", "count"), f"expected at most replicas ({replicas}), got {count}")
        target = step.get("target")
        if isinstance(target, dict):
            self.target(target, path + ("target",))
        kind = _str(step.get("fault"))
        if kind is None:
            return
        if kind not in self.faults:
            names = self.faults.names()
            close = difflib.get_close_matches(kind, names, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            known = ", ".join(names) or "none registered (is draguard.chaos imported?)"
            self.add(path + ("fault",), f"unknown fault kind {kind!r}; {guess}known: {known}")
            return
        entry = self.faults.get(kind)
        lacks = self.capabilities()
        for need in entry.meta.get("needs", ()):
            if need in lacks:
                self.add(path + ("fault",), f"fault {kind!r} cannot run here: it needs {need}, but {lacks[need]}")
        self.node_capability(kind, _dict(target), path)
        params_model = entry.params
        params = step.get("params", {})
        if not isinstance(params, dict):
            return  # the schema pass reports it
        if params_model is None:
            if params:
                self.add(path + ("params",), f"fault {kind!r} takes no params")
            return
        arriving = params.get("workload")
        if isinstance(arriving, str) and arriving not in self.workloads:
            self.add(path + ("params", "workload"), self._unknown("workload", arriving, self.workloads))
        try:
            params_model.model_validate(params)
        except ValidationError as exc:
            self.extend(iter(from_validation_error(exc, params, params_model, path + ("params",))))

    def node_capability(self, kind: str, target: dict[str, Any], path: Path) -> None:
        """A fault that needs a node capability may only target nodes whose agent has it."""
        needed = self.faults.get(kind).meta.get("node_capability")
        if not isinstance(needed, str):
            return
        node = _str(target.get("node"))
        nodes = [node] if node in self.node_agents else self.node_names
        for name in nodes:
            agent = self.node_agents.get(name, "fake")
            if not capable(agent, needed):
                have = ", ".join(sorted(CAPABILITIES.get(agent, ()))) or "none"
                self.add(path + ("fault",), f"fault {kind!r} needs node capability {needed!r}, which node {name!r} "
                         f"(agent {agent!r}) lacks; its capabilities: {have}")  # fmt: skip
                return

    def workload_ref(self, item: dict[str, Any], path: Path) -> dict[str, Any] | None:
        name = _str(item.get("workload"))
        if name is None:
            return None
        if name not in self.workloads:
            self.add(path + ("workload",), self._unknown("workload", name, self.workloads))
            return None
        return _dict(self.workloads[name])

    def target(self, target: dict[str, Any], path: Path) -> None:
        if not any(target.get(k) is not None for k in ("workload", "node")):
            self.add(path, "set 'workload' or 'node' (or both)")
        workload = self.workload_ref(target, path)
        for key in ("member", "claim"):
            if target.get(key) is not None and target.get("workload") is None:
                self.add(path + (key,), f"{key!r} needs 'workload'", on_key=True)
        member = _int(target.get("member"))
        replicas = _int(_dict(workload).get("replicas"))
        if member is not None and replicas is not None and not 0 <= member < replicas:
            self.add(path + ("member",), f"expected a member index from 0 to {replicas - 1}, 'random' or 'all', "
                     f"got {member}")  # fmt: skip
        claim = _str(target.get("claim"))
        if claim is not None and workload is not None:
            claims = {n for c in _list(workload.get("claims")) if (n := _str(_dict(c).get("name"))) is not None}
            if claim not in claims:
                self.add(path + ("claim",), self._unknown(f"claim of workload {workload.get('name')!r}", claim,
                                                          claims))  # fmt: skip
        node = _str(target.get("node"))
        if node is not None and node not in _MEMBER_KEYWORDS and self.node_names and node not in self.node_names:
            self.add(path + ("node",), self._unknown("node", node, [*self.node_names, *_MEMBER_KEYWORDS]))
        if target.get("device") is not None and target.get("node") is None:
            self.add(path + ("device",), "'device' needs 'node'", on_key=True)

    def expect(self) -> None:
        expect = _dict(self.spec.get("expect"))
        lists: dict[str, list[Any]] = {key: _list(expect.get(key)) for key in ("hold", "violate")}
        for key, names in lists.items():
            seen: set[str] = set()
            for i, name in enumerate(names):
                if not isinstance(name, str):
                    continue
                if name not in self.invariants:
                    self.add(("spec", "expect", key, i), self._unknown("invariant", name, self.invariants.names()))
                elif name in seen:
                    self.add(("spec", "expect", key, i), f"invariant {name!r} is listed twice")
                else:
                    lacks = self.capabilities()
                    for need in self.invariants.get(name).meta.get("needs", ()):
                        if need in lacks:
                            self.add(("spec", "expect", key, i),
                                     f"invariant {name!r} cannot be judged here: it needs {need}, but {lacks[need]}")
                seen.add(name)
        for i, name in enumerate(lists["violate"]):
            if isinstance(name, str) and name in lists["hold"]:
                self.add(("spec", "expect", "violate", i), f"invariant {name!r} cannot both hold and be violated")
        ignored: set[str] = set()
        for i, raw in enumerate(_list(expect.get("ignore"))):
            reason = _str(_dict(raw).get("reason"))
            if reason is not None and reason and not reason.strip():
                self.add(("spec", "expect", "ignore", i, "reason"), "expected a reason that says why this "
                         "invariant's verdict does not count here, got only blanks")  # fmt: skip
            name = _str(_dict(raw).get("invariant"))
            where: Path = ("spec", "expect", "ignore", i, "invariant")
            if name is None:
                continue
            if name not in self.invariants:
                self.add(where, self._unknown("invariant", name, self.invariants.names()))
            elif name in ignored:
                self.add(where, f"invariant {name!r} is ignored twice")
            for key, verb in (("hold", "hold"), ("violate", "be violated")):
                if name in lists[key]:
                    self.add(where, f"invariant {name!r} cannot both {verb} and be ignored: drop it from expect.{key} "
                             "or from expect.ignore")  # fmt: skip
            ignored.add(name)
        for i, raw in enumerate(_list(expect.get("evidence"))):
            item = _dict(raw)
            path: Path = ("spec", "expect", "evidence", i)
            inv = _str(item.get("invariant"))
            if inv is not None and inv not in lists["violate"]:
                self.add(path + ("invariant",), f"evidence is for violations: list {inv!r} in expect.violate first")
            if isinstance(raw, dict) and not any(item.get(k) is not None for k in ("workload", "claim", "node", "device")):
                self.add(path, "name what the violation must carry: one of 'workload', 'claim', 'node', 'device'")
            workload = self.workload_ref(item, path)
            for key in ("member", "claim"):
                if item.get(key) is not None and item.get("workload") is None:
                    self.add(path + (key,), f"{key!r} needs 'workload'", on_key=True)
            member = _int(item.get("member"))
            replicas = _int(_dict(workload).get("replicas"))
            if member is not None and replicas is not None and member >= replicas:
                self.add(path + ("member",), f"expected a member index from 0 to {replicas - 1}, got {member}")
            claim = _str(item.get("claim"))
            if claim is not None and workload is not None:
                claims = {n for c in _list(workload.get("claims")) if (n := _str(_dict(c).get("name"))) is not None}
                if claim not in claims:
                    self.add(path + ("claim",), self._unknown(f"claim of workload {workload.get('name')!r}", claim, claims))
            node = _str(item.get("node"))
            if node is not None and self.node_names and node not in self.node_names:
                self.add(path + ("node",), self._unknown("node", node, self.node_names))
        steps = [(_str(_dict(st).get("name")) or f"{i}-{_dict(st).get('fault')}")
                 for i, st in enumerate(_list(self.spec.get("timeline")))]  # fmt: skip
        for i, raw in enumerate(_list(expect.get("progress"))):
            item = _dict(raw)
            path = ("spec", "expect", "progress", i)
            count = _int(item.get("count"))
            after = _str(item.get("after"))
            if after is not None:
                if item.get("within") is None:
                    self.add(path + ("after",), "'after' starts the clock of 'within'; give 'within' too", on_key=True)
                if after not in steps:
                    self.add(path + ("after",), self._unknown("step", after, steps))
            for j, name in enumerate(_list(item.get("workloads"))):
                if not isinstance(name, str):
                    continue
                if name not in self.workloads:
                    self.add(path + ("workloads", j), self._unknown("workload", name, self.workloads))
                    continue
                replicas = _int(_dict(self.workloads[name]).get("replicas"))
                if count is not None and replicas is not None and count > replicas:
                    self.add(path + ("count",), f"expected at most the replicas of {name} ({replicas}), got {count}")
        for i, raw in enumerate(_list(expect.get("events"))):
            name = _str(_dict(raw).get("workload"))
            if name is not None and name not in self.workloads:
                self.add(("spec", "expect", "events", i, "workload"), self._unknown("workload", name, self.workloads))

    @staticmethod
    def _unknown(what: str, name: str, known: Any, hint: str = "") -> str:
        names = sorted(known)
        listed = ", ".join(names) if names else "none declared"
        close = difflib.get_close_matches(name, names, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown {what} {name!r}; {guess}expected one of: {listed}" + (f" ({hint})" if hint else "")


def check_document(doc: dict[str, Any], *, faults: Registry[Any], invariants: Registry[Any]) -> list[Issue]:
    """Every cross-field problem of the parsed document ``doc``."""
    return _Checker(doc, faults, invariants).run()

