"""NodePrepareResources: the shape of its answer, per-claim errors, idempotence, replaced and foreign
claims, a device already in use (and one given with admin access), and a prepare that finishes after
its claim was unprepared.

Rules from the kubelet's use of the call (kubernetes ``pkg/kubelet/cm/dra/manager.go``: one call per
driver with all of a pod's claims, an answer entry required per claim UID, retried on error) and
from draguard's guardrail 4 (handlers are idempotent; errors are per claim). Each call a check here
expects to succeed is made ``--idempotent-count`` times and the answers compared
(:meth:`~.suite.SanityContext.prepared_ok`), as csi-sanity repeats its calls.
"""

from __future__ import annotations

import threading
import time

from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError

from .cdi import specs_naming
from .suite import OTHER_DRIVER, OTHER_NODE, CheckFailed, SanityContext, expect, sanity_check

MANAGER = "kubelet pkg/kubelet/cm/dra/manager.go (prepareResources)"
GUARDRAIL = "draguard guardrail 4 (lock-free, idempotent handlers; errors per claim)"


def _devices(result: object) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(d.pool_name, d.device_name, d.cdi_device_ids) for d in getattr(result, "devices", ())]


@sanity_check(
    "sanity.prepare.empty-request",
    rule="NodePrepareResources with no claims answers an empty result, not an error",
    source=MANAGER,
)
def empty_request(ctx: SanityContext) -> None:
    answer = ctx.client().prepare([], timeout=ctx.config.call_timeout)
    expect(answer == {}, f"an empty prepare answered entries {sorted(answer)}")


@sanity_check(
    "sanity.prepare.one-entry-per-claim",
    rule="NodePrepareResources answers exactly one entry per claim UID in the request",
    source=f"{MANAGER}: a claim missing from the answer fails the pod",
)
def one_entry_per_claim(ctx: SanityContext) -> None:
    (d0, d1) = ctx.devices(2)
    a, b = ctx.claim([d0]), ctx.claim([d1])
    answer = ctx.prepare(a, b)
    expect(set(answer) == {a.uid, b.uid}, f"asked for {[a.uid, b.uid]}, answered {sorted(answer)}", [str(a), str(b)])
    for ref in (a, b):
        expect(not answer[ref.uid].error, f"prepare of {ref} failed: {answer[ref.uid].error}", [str(ref)])


@sanity_check(
    "sanity.prepare.per-claim-errors",
    rule="a claim that cannot be prepared fails alone: the call succeeds and the other claims are prepared",
    source=GUARDRAIL,
    aimed_at=("batch-abort-on-error",),
)
def per_claim_errors(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    good = ctx.claim([d0])
    missing = ctx.unknown_claim()  # deleted from the API between the kubelet's check and the driver's read
    try:
        answer = ctx.prepare(missing, good)
    except PluginCallError as exc:
        raise CheckFailed(f"one claim that does not exist ({missing}) failed the whole call with {good}: {exc}") from exc
    expect(missing.uid in answer and bool(answer[missing.uid].error),
           f"the missing claim {missing} got {answer.get(missing.uid)!r}, not an error", [str(missing)])
    expect(good.uid in answer and not answer[good.uid].error,
           f"the good claim {good} got {answer.get(good.uid)!r} beside a bad one", [str(good)], [d0[1]])


@sanity_check(
    "sanity.prepare.idempotent",
    rule="preparing a prepared claim again returns the same devices and the same CDI device IDs",
    source=f"{GUARDRAIL}; k8s.io/dynamic-resource-allocation kubeletplugin (PrepareResourceClaims must be idempotent)",
    aimed_at=("non-idempotent-prepare",),
)
def idempotent(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    first = _devices(ctx.prepared_ok(claim))  # --idempotent-count calls, each answer compared with the first
    expect(bool(first), f"prepare of {claim} returned no devices", [str(claim)])
    if ctx.repeats() < 2:  # idempotence needs a second call whatever the count
        again = _devices(ctx.prepared_ok(claim))
        expect(again == first, f"prepare #2 of {claim} returned {again}, the first returned {first}",
               [str(claim)], [d0[1]])


@sanity_check(
    "sanity.prepare.replaced-claim",
    rule="a claim re-created under the same name with a new UID is not confused with the old one",
    source="kubelet pkg/kubelet/cm/dra/manager.go (claims are keyed by UID; the old claim with the same name)",
    aimed_at=("unprepare-needs-claim",),
)
def replaced_claim(ctx: SanityContext) -> None:
    (d0, d1) = ctx.devices(2)
    old = ctx.claim([d0])
    ctx.prepared_ok(old)
    ctx.delete_claim(old)
    new = ctx.claim([d1], name=old.name)
    got = _devices(ctx.prepared_ok(new))
    expect([(p, d) for p, d, _ in got] == [d1], f"the new {new} was prepared with {got}, it is allocated {[d1]}",
           [str(old), str(new)])
    answer = ctx.unprepare(old)
    expect(answer.get(old.uid) == "", f"unprepare of the old {old} (same name) answered {answer!r}", [str(old)])
    again = _devices(ctx.prepared_ok(new))
    expect(again == got, f"after the old claim was unprepared, the new {new} prepares as {again}, was {got}",
           [str(new)])
    stale = ClaimRef(namespace=new.namespace, name=new.name, uid=ctx.unknown_claim().uid)
    try:
        answer_stale = ctx.prepare(stale)
        ok = stale.uid in answer_stale and not answer_stale[stale.uid].error
    except PluginCallError:
        ok = False  # refused as a whole: not confused either
    expect(not ok, f"a prepare naming {new.name} with a UID the API does not have ({stale.uid}) succeeded",
           [str(stale), str(new)])


def _refused(ctx: SanityContext, claim: ClaimRef, what: str) -> None:
    answer = ctx.prepare(claim)
    expect(claim.uid in answer, f"prepare of {what} {claim} answered no entry", [str(claim)])
    result = answer[claim.uid]
    expect(bool(result.error), f"prepare of {what} {claim} succeeded with devices {_devices(result)}", [str(claim)])


@sanity_check(
    "sanity.prepare.foreign-driver",
    rule="a claim allocated only devices of another driver is refused for that claim",
    source="kubelet pkg/kubelet/cm/dra/manager.go (a driver is called only for its own devices)",
)
def foreign_driver(ctx: SanityContext) -> None:
    ((pool, dev),) = ctx.devices(1)
    _refused(ctx, ctx.claim([(pool, dev)], driver=OTHER_DRIVER), f"a claim of driver {OTHER_DRIVER}")


@sanity_check(
    "sanity.prepare.foreign-node",
    rule="a claim allocated on another node is refused for that claim",
    source="ResourceClaim status.allocation.nodeSelector (resource.k8s.io/v1): the claim is usable only there",
)
def foreign_node(ctx: SanityContext) -> None:
    ((_, dev),) = ctx.devices(1)
    _refused(ctx, ctx.claim([(OTHER_NODE, dev)], node=OTHER_NODE), f"a claim allocated on node {OTHER_NODE}")


@sanity_check(
    "sanity.prepare.device-in-use",
    rule="a device held by a prepared claim is not prepared for a second claim until the first is unprepared",
    source="kubernetes-sigs/dra-driver-nvidia-gpu PR #817 (a scheduler race hands one device to two claims)",
    aimed_at=("double-allocation",),
)
def device_in_use(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    first, second = ctx.claim([d0]), ctx.claim([d0])
    ctx.prepared_ok(first)
    answer = ctx.prepare(second)
    expect(second.uid in answer and bool(answer[second.uid].error),
           f"{d0[1]} was prepared for {second} while {first} held it", [str(first), str(second)], [d0[1]])
    ctx.unprepared_ok(first)
    ctx.prepared_ok(second)


@sanity_check(
    "sanity.prepare.admin-access",
    rule="a claim given with admin access a device another claim holds is prepared with that device, and "
         "unpreparing it leaves the holder's preparation as it was",
    source="KEP-5018 (DRA admin access: an admin-access request is allocated devices already in use, to monitor or "
           "maintain them; kubernetes/enhancements keps/sig-auth/5018-dra-adminaccess)",
    capability="admin-access",
)
def admin_access(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    holder = ctx.claim([d0])
    held = _devices(ctx.prepared_ok(holder))
    admin = ctx.claim([d0], admin_access=True)
    got = _devices(ctx.prepared_ok(admin))
    expect([d[:2] for d in got] == [d0], f"prepare of {admin} (admin access to {d0[1]}, held by {holder}) answered "
           f"{got}", [str(holder), str(admin)], [d0[1]])
    ctx.unprepared_ok(admin)
    again = _devices(ctx.prepared_ok(holder))
    expect(again == held, f"after {admin} was unprepared, {holder} answers {again}; before, {held}",
           [str(holder), str(admin)], [d0[1]])
    if ctx.config.cdi_dir is not None:
        expect(bool(specs_naming(ctx.config.cdi_dir, holder.uid)),
               f"after {admin} was unprepared, no CDI spec names {holder} (its container could not start)",
               [str(holder), str(admin)], [d0[1]])


@sanity_check(
    "sanity.prepare.stale",
    rule="a prepare still running when its claim is unprepared does not leave the claim prepared",
    source="kubernetes-sigs/dra-driver-nvidia-gpu#1162 (fixed by PR #1188); kubelet call timeout 45 s",
    aimed_at=("stale-prepare",),
    needs=("slow_prepare",),
)
def stale(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    slow = 3.0
    ctx.call_hook("slow_prepare", claim, slow)
    started = time.monotonic()
    done = threading.Event()

    def late_prepare() -> None:
        try:  # the kubelet gives up on the call; the driver goes on with it
            ctx.prepare(claim, timeout=0.5)
        except PluginCallError:
            pass
        finally:
            done.set()

    threading.Thread(target=late_prepare, daemon=True).start()
    done.wait(5)
    ctx.unprepared_ok(claim)
    time.sleep(max(0.0, slow + 1.0 - (time.monotonic() - started)))  # the slow prepare has finished now
    if ctx.config.cdi_dir is not None:
        left = specs_naming(ctx.config.cdi_dir, claim.uid)
        expect(not left, f"after the late prepare of {claim} the CDI spec(s) {left} exist", [str(claim)])
    other = ctx.claim([d0])
    answer = ctx.prepare(other)
    expect(other.uid in answer and not answer[other.uid].error,
           f"{d0[1]} is still held after {claim} was unprepared during its prepare: {answer.get(other.uid)!r}",
           [str(claim), str(other)], [d0[1]])
