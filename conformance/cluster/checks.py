"""The cluster checks, one function per behaviour users rely on, registered by profile.

Sources are upstream files and KEPs: KEP-4381 (structured parameters, DRA GA), KEP-5055 (device
taints), pkg/kubelet/cm/dra/manager.go (prepare before the containers start, unprepare when the
last pod using a claim is gone), pkg/controller/resourceclaim/controller.go (generated claims,
reservedFor, deallocation), pkg/controller/devicetainteviction (NoExecute evicts).
"""

from __future__ import annotations

import time

from draguard.harness.invariants.calls import drivers_answer
from draguard.harness.invariants.snapshot import DriverCall

from ..checks import CheckFailed, Skip, expect
from .suite import ClusterContext, cluster_check

__all__: list[str] = []


def _node(ctx: ClusterContext, devices: int = 1) -> str:
    for node in ctx.nodes:
        if len(ctx.devices(node)) >= devices:
            return node
    raise Skip(f"needs a node where {ctx.config.driver} publishes {devices} device(s); "
               f"published: {ctx.capabilities.get('publishedDevices')}")


def _run_one(ctx: ClusterContext, pod: str) -> tuple[str, list[str]]:
    """Wait for ``pod`` to run; check its claims are allocated by the driver and prepared on its node."""
    obj = ctx.wait_running(pod)
    node = obj["spec"]["nodeName"]
    claims = ctx.claims_of(obj)
    ctx.remember("Pod", obj)
    ctx.remember("ResourceClaim", *claims)
    expect(bool(claims), f"pod {pod} runs but names no ResourceClaim in its status", [f"Pod {pod}"])
    uids = []
    for claim in claims:
        devices = ctx.allocated(claim)
        expect(bool(devices) and all(d == ctx.config.driver for d, _, _ in devices),
               f"claim {claim['metadata']['name']} of running pod {pod} is allocated {devices}, "
               f"not devices of {ctx.config.driver}", [ctx.ref(claim)])
        reserved = [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or []]
        expect(pod in reserved, f"claim {claim['metadata']['name']} is not reserved for running pod {pod} "
               f"(reservedFor {reserved})", [ctx.ref(claim)])
        uid = claim["metadata"]["uid"]
        ctx.expect_prepared(node, uid, f"pod {pod} runs")
        uids.append(uid)
    return node, uids


@cluster_check("conformance.core.driver-publishes",
               rule="The driver publishes devices in ResourceSlices for the chosen nodes and the DeviceClass exists.",
               source="KEP-4381 (ResourceSlice, DeviceClass); resource.k8s.io/v1 types.go", allocates=False)
def driver_publishes(ctx: ClusterContext) -> None:
    caps = ctx.capabilities
    expect(bool(caps.get("resourceV1")), f"resource.k8s.io/v1 is not served (served: {caps.get('resourceVersions')})")
    expect(bool(ctx.nodes), f"{ctx.config.driver} publishes no device in a node-local ResourceSlice"
           + (f" on nodes matching {ctx.config.nodes}" if ctx.config.nodes else ""))
    expect(caps.get("deviceClass") is True, f"DeviceClass {ctx.config.device_class} does not exist")
    names = [(s["spec"]["pool"]["name"], d["name"]) for s in ctx.slices for d in s["spec"].get("devices") or []]
    expect(len(names) == len(set(names)), "a device name repeats within a pool",
           devices=[f"{p}/{d}" for p, d in names if names.count((p, d)) > 1])


@cluster_check("conformance.core.template-claim",
               rule="A pod with a claim from a ResourceClaimTemplate runs with devices of the driver, prepared "
                    "before it runs; when it is deleted the generated claim goes and the driver releases it.",
               source="KEP-4381; pkg/controller/resourceclaim/controller.go; pkg/kubelet/cm/dra/manager.go")
def template_claim(ctx: ClusterContext) -> None:
    pod = ctx.pod(template=ctx.template())
    node, uids = _run_one(ctx, pod)
    generated = [c["metadata"]["name"] for c in ctx.claims_of(ctx.get("Pod", pod) or {})]
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    for name in generated:
        ctx.wait_gone("ResourceClaim", name)
    ctx.expect_released(node, uids, f"pod {pod} deleted")


@cluster_check("conformance.core.claim-lifecycle",
               rule="A claim is prepared before its pod runs, unprepared after the pod ends, and deallocated.",
               source="pkg/kubelet/cm/dra/manager.go (PrepareResources before containers, UnprepareResources "
                      "after); pkg/controller/resourceclaim/controller.go (reservedFor, deallocation)")
def claim_lifecycle(ctx: ClusterContext) -> None:
    claim = ctx.claim()
    name = claim["metadata"]["name"]
    pod = ctx.pod(claim=name)
    node, uids = _run_one(ctx, pod)
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    ctx.wait_deallocated(name)
    after = ctx.get("ResourceClaim", name)
    expect(after is not None and not (after.get("status") or {}).get("reservedFor"),
           f"claim {name} still reserved after its only pod ended: {(after or {}).get('status')}")
    ctx.expect_released(node, uids, f"pod {pod} ended")


@cluster_check("conformance.core.force-delete",
               rule="A force-deleted pod's claim is unprepared and its devices released, even when the claim "
                    "is deleted from the API at the same time.",
               source="pkg/kubelet/cm/dra/manager.go (unprepare from the checkpoint after a pod is gone); "
                      "draguard guardrail: unprepare works from the claim UID and local state",
               aimed_at=("unprepare-needs-claim",), needs=("node access",))
def force_delete(ctx: ClusterContext) -> None:
    access = ctx.node_access("that the driver released the devices of a force-deleted pod")
    claim = ctx.claim()
    name = claim["metadata"]["name"]
    pod = ctx.pod(claim=name)
    node, uids = _run_one(ctx, pod)
    held = callable(getattr(access, "hold_release", None))
    if held or callable(getattr(access, "fail_release", None)):
        # Unprepare fails in the driver until the claim is gone from the API, so the kubelet's
        # successful retry comes after it: a driver that needs the claim to unprepare never releases
        # it. (Failing only the first unprepare left a race: the controller deallocates and deletes
        # the claim a second or two after the pod, and a retry before that found the claim still
        # there; the unprepare-needs-claim mutant passed this check in about one CI run in ten.)
        device = ctx.allocated(ctx.get("ResourceClaim", name) or {})[0][2]
        ctx.hook("hold_release" if held else "fail_release")(node, device)
    ctx.delete_pod(pod, force=True)
    ctx.kube.delete("ResourceClaim", name, ctx.namespace)
    ctx.wait_gone("Pod", pod)
    ctx.wait_gone("ResourceClaim", name)
    if held:
        ctx.hook("clear")(node)
    ctx.expect_released(node, uids, f"pod {pod} force-deleted with its claim")


@cluster_check("conformance.core.reuse",
               rule="Devices freed by ended pods are prepared again for new pods, N times over, with no leak.",
               source="draguard guardrail: no leak; pkg/kubelet/cm/dra/manager.go")
def reuse(ctx: ClusterContext) -> None:
    node = _node(ctx)
    template = ctx.template(all_devices=True)
    for i in range(ctx.config.reuse_count):
        pod = ctx.pod(template=template, node=node)
        try:
            _, uids = _run_one(ctx, pod)
        except CheckFailed as exc:
            raise CheckFailed(f"round {i + 1} of {ctx.config.reuse_count} (every device of {node}): {exc}") from exc
        ctx.delete_pod(pod)
        ctx.wait_gone("Pod", pod)
        ctx.expect_released(node, uids, f"round {i + 1}")


@cluster_check("conformance.core.concurrent-prepare",
               rule="Pods started at once on one node, each with a claim of its own, all run: the driver prepares "
                    "different claims side by side, and releases them all when the pods end.",
               source="pkg/kubelet/cm/dra/manager.go (the kubelet's pod workers prepare the claims of different pods "
                      "at the same time); draguard guardrail: no driver-wide lock across slow work")
def concurrent_prepare(ctx: ClusterContext) -> None:
    node = max(ctx.nodes, key=lambda n: len(ctx.devices(n)), default=None)
    count = min(ctx.config.concurrent_pods, len(ctx.devices(node))) if node is not None else 0
    if node is None or count < 2:
        raise Skip(f"needs a node where {ctx.config.driver} publishes two devices; "
                   f"published: {ctx.capabilities.get('publishedDevices')}")
    template = ctx.template()
    pods = [ctx.pod(template=template, node=node) for _ in range(count)]
    held = {p: _run_one(ctx, p)[1] for p in pods}
    for p in pods:
        ctx.delete_pod(p)
    for p in pods:
        ctx.wait_gone("Pod", p)
        ctx.expect_released(node, held[p], f"pod {p} ended ({count} started at once)")


UNREADABLE = {"draguard.dev/unreadable": {"nested": ["no", "driver", "reads", "this"]}}
"""Opaque parameters for the driver that a driver decoding its own configuration type cannot read: no
apiVersion or kind, a key of no driver's, a value that is neither a string nor a number."""


@cluster_check("conformance.core.claim-error-isolated",
               rule="When one claim of a pod fails to prepare, the driver answers that claim's error alone: the call "
                    "holding the pod's other claim does not fail as a whole, and the unprepare of the failed claim "
                    "succeeds when the pod goes.",
               source="k8s.io/kubelet/pkg/apis/dra/v1/api.proto (NodePrepareResourcesResponse: one result per claim, "
                      "each with its own error); pkg/kubelet/cm/dra/manager.go (one call per driver holds all of a "
                      "pod's claims); kubernetes/kubernetes#119012",
               needs=("gRPC interposer record",))
def claim_error_isolated(ctx: ClusterContext) -> None:
    """A claim with opaque parameters the driver cannot read (:data:`UNREADABLE`) fails to prepare in any
    driver that decodes its configuration; a driver that ignores them prepares it, and the check skips."""
    if ctx.calls is None or ctx.window is None:
        raise Skip(f"the per-claim answers are only seen in the interposer's record: {ctx.config.no_calls}")
    calls, window = ctx.calls, ctx.window
    node = _node(ctx, 2)
    good, bad = ctx.claim(), ctx.claim(parameters=UNREADABLE)
    names = {c["metadata"]["uid"]: c["metadata"]["name"] for c in (good, bad)}
    good_uid, bad_uid = good["metadata"]["uid"], bad["metadata"]["uid"]
    pod = ctx.pod(claims=[good["metadata"]["name"], bad["metadata"]["name"]], node=node)

    def answered() -> DriverCall | None:
        for call in calls.calls(window):
            if (call.method == "NodePrepareResources" and {good_uid, bad_uid} <= {u for _, _, u in call.claims}
                    and drivers_answer(call)):
                return call
        return None

    call: DriverCall = ctx.wait(answered, f"a NodePrepareResources of both claims of pod {pod}",
                                evidence=lambda: ctx.pod_state(pod))
    if call.status == "OK" and bad_uid not in call.claim_errors:
        raise Skip(f"the driver prepared claim {names[bad_uid]} with opaque parameters {UNREADABLE}: no claim failed, "
                   "so nothing shows how it answers one failure among several claims")
    expect(call.status == "OK", f"the driver failed the whole NodePrepareResources of claims {names[good_uid]} and "
           f"{names[bad_uid]} (pod {pod}) for the one it could not prepare: {call.status}: {call.error}",
           [f"ResourceClaim {ctx.namespace}/{n}" for n in names.values()])
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    ctx.expect_released(node, [good_uid, bad_uid], f"pod {pod} with a claim that failed to prepare deleted")


@cluster_check("conformance.sharing.shared-claim",
               rule="Two pods share one ResourceClaim: both run, it is prepared once and stays prepared "
                    "until the last of them ends.",
               source="KEP-4381 (shared claims, reservedFor); pkg/kubelet/cm/dra/manager.go (claim info per pod)")
def shared_claim(ctx: ClusterContext) -> None:
    claim = ctx.claim()
    name = claim["metadata"]["name"]
    first, second = ctx.pod(claim=name), ctx.pod(claim=name)
    node, uids = _run_one(ctx, first)
    node2, _ = _run_one(ctx, second)
    expect(node == node2, f"pods {first} and {second} sharing claim {name} run on {node} and {node2}")
    reserved = sorted(r.get("name") for r in (ctx.get("ResourceClaim", name) or {}).get("status", {}).get("reservedFor") or [])
    expect(reserved == sorted([first, second]), f"claim {name} reservedFor {reserved}, want both pods")
    ctx.delete_pod(first)
    ctx.wait_gone("Pod", first)
    time.sleep(1.0)
    expect(ctx.get("Pod", second) is not None and (ctx.get("Pod", second) or {}).get("status", {}).get("phase") == "Running",
           f"pod {second} stopped running when {first}, which shares claim {name}, ended: {ctx.pod_state(second)}")
    ctx.expect_prepared(node, uids[0], f"pod {first} ended while {second} still uses claim {name}")
    ctx.delete_pod(second)
    ctx.wait_gone("Pod", second)
    ctx.wait_deallocated(name)
    ctx.expect_released(node, uids, "both pods ended")


@cluster_check("conformance.sharing.multi-container",
               rule="One claim used by several containers of a pod is allocated and prepared once for the pod.",
               source="KEP-4381 (container resources.claims); pkg/kubelet/cm/dra/manager.go")
def multi_container(ctx: ClusterContext) -> None:
    pod = ctx.pod(template=ctx.template(), containers=3)
    node, uids = _run_one(ctx, pod)
    expect(len(uids) == 1, f"pod {pod} with one claim for three containers has {len(uids)} claims")
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    ctx.expect_released(node, uids, f"pod {pod} deleted")


def _match_attribute(ctx: ClusterContext, node: str, count: int) -> str:
    attr = ctx.shared_attribute(node, count)
    if attr is None:
        raise Skip(f"no attribute that {count} devices of {ctx.config.driver} on {node} share a value of "
                   f"(attributes published: {ctx.capabilities.get('attributes')})")
    return attr


def _same_value(ctx: ClusterContext, pod: str, attr: str) -> None:
    obj = ctx.get("Pod", pod) or {}
    for claim in ctx.claims_of(obj):
        devices = ctx.allocated(claim)
        values = {ctx.attribute(pool, dev, attr) for _, pool, dev in devices}
        expect(len(values) == 1, f"claim {claim['metadata']['name']} with matchAttribute {attr} got devices "
               f"with values {values}", [ctx.ref(claim)], [f"{p}/{d}" for _, p, d in devices])


@cluster_check("conformance.topology.match-attribute",
               rule="A claim for two devices with matchAttribute runs with two devices sharing the attribute's value.",
               source="KEP-4381 (DeviceConstraint matchAttribute)", needs=("a shared attribute",))
def match_attribute(ctx: ClusterContext) -> None:
    node = _node(ctx, 2)
    attr = _match_attribute(ctx, node, 2)
    pod = ctx.pod(template=ctx.template(count=2, constraint=attr), node=node)
    node, uids = _run_one(ctx, pod)
    _same_value(ctx, pod, attr)


@cluster_check("conformance.gang.spread",
               rule="A gang of pods, one per node, each with a two-device matchAttribute claim, all run "
                    "with matching devices on their own nodes, and all are released when the gang ends.",
               source="KEP-4381 (matchAttribute); KEP-4671 (gang scheduling)", needs=("two nodes",))
def gang_spread(ctx: ClusterContext) -> None:
    nodes = [n for n in ctx.nodes if len(ctx.devices(n)) >= 2 and ctx.shared_attribute(n, 2)]
    if len(nodes) < 2:
        raise Skip(f"needs two nodes with two devices sharing an attribute value; have {nodes or 'none'}")
    attr = _match_attribute(ctx, nodes[0], 2)
    template = ctx.template(count=2, constraint=attr)
    pods = {ctx.pod(template=template, node=n): n for n in nodes}
    held: dict[str, list[str]] = {}
    for pod, node in pods.items():
        ran_on, uids = _run_one(ctx, pod)
        expect(ran_on == node, f"gang member {pod} pinned to {node} runs on {ran_on}")
        _same_value(ctx, pod, attr)
        for claim in ctx.claims_of(ctx.get("Pod", pod) or {}):
            pools = {p for _, p, _ in ctx.allocated(claim)}
            expect(all(any(s["spec"]["pool"]["name"] == p and s["spec"].get("nodeName") == node for s in ctx.slices)
                       for p in pools), f"gang member {pod} on {node} got devices of pools {pools}")
        held[node] = uids
    for pod in pods:
        ctx.delete_pod(pod)
    for pod, node in pods.items():
        ctx.wait_gone("Pod", pod)
        ctx.expect_released(node, held[node], "the gang ended")


@cluster_check("conformance.chaos.driver-restart",
               rule="A driver restarted while a pod uses its devices keeps the pod running, serves new pods, "
                    "and releases the old pod's devices when it ends.",
               source="pkg/kubelet/cm/dra/plugin (re-registration); draguard guardrail: state survives restarts",
               needs=("restart",))
def driver_restart(ctx: ClusterContext) -> None:
    restart = ctx.hook("restart")
    node = _node(ctx, 2)
    pod = ctx.pod(template=ctx.template(), node=node)
    _, uids = _run_one(ctx, pod)
    restart(node)
    ctx.exempt_cdi(uids[0], "it was prepared before the driver restarted: conformance.chaos.restart-cleanup judges "
                   "whether such a claim's CDI specs go")
    time.sleep(1.0)
    expect((ctx.get("Pod", pod) or {}).get("status", {}).get("phase") == "Running",
           f"pod {pod} stopped running when the driver restarted: {ctx.pod_state(pod)}")
    ctx.expect_prepared(node, uids[0], "after the driver restarted")
    after = ctx.pod(template=ctx.template(), node=node)
    _, uids2 = _run_one(ctx, after)
    for p, u in ((pod, uids), (after, uids2)):
        ctx.delete_pod(p)
        ctx.wait_gone("Pod", p)
        ctx.expect_released(node, u, f"pod {p} ended after the restart")


@cluster_check("conformance.chaos.restart-cleanup",
               rule="A claim prepared before the driver restarted leaves no CDI spec on its node once its pod ends "
                    "after the restart: the driver's record of what it prepared outlives its process.",
               source="pkg/kubelet/cm/dra/manager.go (the kubelet unprepares from its checkpoint, whatever the driver "
                      "went through); CDI specification (a spec left names devices of a claim that is gone); "
                      "draguard guardrail: state survives restarts",
               needs=("restart", "the node's CDI folder"))
def restart_cleanup(ctx: ClusterContext) -> None:
    restart = ctx.hook("restart")
    node = _node(ctx)
    if ctx.cdi_dir(node) is None:
        raise Skip("needs the node's CDI folder (--cdi-dir) to see what the driver leaves there")
    pod = ctx.pod(template=ctx.template(), node=node)
    _, uids = _run_one(ctx, pod)
    restart(node)
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    ctx.expect_released(node, uids, f"pod {pod}, started before the driver restarted, ended after it")


@cluster_check("conformance.chaos.kubelet-restart",
               rule="When the kubelet restarts while pods run, it prepares their claims again; the driver answers "
                    "each repeated prepare as it did the first, the pods keep running and their claims are released "
                    "when they end.",
               source="pkg/kubelet/cm/dra/manager.go and claiminfo.go (a restarted kubelet prepares the claims of "
                      "running pods again); k8s.io/kubelet/pkg/apis/dra/v1/api.proto (NodePrepareResources: the "
                      "kubelet may call it several times for the same claim)",
               needs=("restart_kubelet",))
def kubelet_restart(ctx: ClusterContext) -> None:
    restart_kubelet = ctx.hook("restart_kubelet")
    node = _node(ctx, 2)
    template = ctx.template()
    pods = [ctx.pod(template=template, node=node) for _ in range(2)]
    held = {p: _run_one(ctx, p)[1] for p in pods}
    since = len(ctx.calls.calls(ctx.window)) if ctx.calls is not None and ctx.window is not None else 0
    restart_kubelet(node)
    uids = [u for us in held.values() for u in us]
    if ctx.calls is not None and ctx.window is not None:
        calls, window = ctx.calls, ctx.window

        def prepared_again() -> bool:
            again = {uid for c in calls.calls(window)[since:] if c.method == "NodePrepareResources" and c.node == node
                     for _, _, uid in c.claims}
            return set(uids) <= again

        ctx.wait(prepared_again, f"the restarted kubelet of {node} preparing claims {', '.join(uids)} again")
    else:
        ctx.notes.append("whether the restarted kubelet prepared the claims again is not seen without the "
                         "interposer's record")
        time.sleep(5.0)
    for p in pods:
        obj = ctx.wait_running(p)
        for claim in ctx.claims_of(obj):
            ctx.expect_prepared(node, claim["metadata"]["uid"], f"pod {p} after the kubelet restarted")
    for p in pods:
        ctx.delete_pod(p)
    for p in pods:
        ctx.wait_gone("Pod", p)
        ctx.expect_released(node, held[p], f"pod {p} ended after the kubelet restarted")


@cluster_check("conformance.chaos.taint-eviction",
               rule="A NoExecute DeviceTaintRule on a device in use evicts the pod, and the driver releases the claim.",
               source="KEP-5055 (device taints); pkg/controller/devicetainteviction",
               needs=("DeviceTaintRule API",))
def taint_eviction(ctx: ClusterContext) -> None:
    if not ctx.capabilities.get("deviceTaintRules"):
        raise Skip(f"the DeviceTaintRule API is not served in resource.k8s.io/v1 (served versions: "
                   f"{ctx.capabilities.get('resourceVersions')})")
    pod = ctx.pod(template=ctx.template())
    node, uids = _run_one(ctx, pod)
    claim = ctx.claims_of(ctx.get("Pod", pod) or {})[0]
    driver, pool, device = ctx.allocated(claim)[0]
    ctx.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": f"{ctx.run_id}-{pod}"},
                "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                         "taint": {"key": "draguard.dev/conformance", "value": "broken", "effect": "NoExecute"}}})

    def evicted() -> bool:
        obj = ctx.get("Pod", pod)
        return obj is None or obj["metadata"].get("deletionTimestamp") is not None \
            or obj.get("status", {}).get("phase") in ("Failed", "Succeeded")

    ctx.wait(evicted, f"pod {pod} on tainted device {pool}/{device} to be evicted", evidence=lambda: ctx.pod_state(pod))
    ctx.wait_gone("Pod", pod)
    ctx.expect_released(node, uids, f"pod {pod} evicted")


@cluster_check("conformance.chaos.release-failure",
               rule="When the release of a device fails once, the claim is unprepared on retry and the device "
                    "is usable again: nothing is forgotten before the device is reset.",
               source="draguard guardrail: reset before forgetting; pkg/kubelet/cm/dra/manager.go (unprepare retried)",
               aimed_at=("forget-before-reset",), needs=("fail_release", "node access"))
def release_failure(ctx: ClusterContext) -> None:
    fail_release = ctx.hook("fail_release")
    ctx.node_access("the driver's device release")
    node = _node(ctx)
    template = ctx.template(all_devices=True)
    pod = ctx.pod(template=template, node=node)
    _, uids = _run_one(ctx, pod)
    devices = [d for _, _, d in ctx.allocated(ctx.claims_of(ctx.get("Pod", pod) or {})[0])]
    fail_release(node, devices[0])
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod)
    ctx.expect_released(node, uids, f"pod {pod} ended with a failing release of {devices[0]}")
    again = ctx.pod(template=template, node=node)
    _run_one(ctx, again)


@cluster_check("conformance.chaos.evict-during-prepare",
               rule="A pod deleted while its claim is being prepared leaves nothing prepared and no device held.",
               source="pkg/kubelet/cm/dra/manager.go (unprepare after a failed or abandoned prepare); "
                      "draguard guardrail: no stale prepare",
               aimed_at=("stale-prepare",), needs=("slow_prepare", "node access"))
def evict_during_prepare(ctx: ClusterContext) -> None:
    slow = ctx.hook("slow_prepare")
    access = ctx.node_access("what the driver holds after an interrupted prepare")
    node = _node(ctx)
    claim = ctx.claim()
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    seconds = ctx.config.prepare_delay
    slow(node, uid, seconds)
    started = time.monotonic()
    pod = ctx.pod(claim=name, node=node)
    ctx.wait(lambda: (ctx.get("Pod", pod) or {}).get("spec", {}).get("nodeName"), f"pod {pod} scheduled",
             evidence=lambda: ctx.pod_state(pod))
    time.sleep(1.0)  # the prepare is in the driver now, held for `seconds`
    ctx.delete_pod(pod)
    ctx.wait_gone("Pod", pod, timeout=seconds + ctx.config.wait_timeout)
    ctx.wait_deallocated(name)
    time.sleep(max(0.0, started + seconds + 2.0 - time.monotonic()))  # the held prepare has ended in the driver
    ctx.expect_released(node, [uid], f"pod {pod} deleted during prepare")
    held = access.held(node)
    expect(uid not in held.values(), f"the driver on {node} still holds devices for claim {uid}: {held}")
