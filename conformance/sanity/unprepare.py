"""NodeUnprepareResources: the shape of its answer, idempotence, unknown and deleted claims, and a
release that fails once.

The kubelet unprepares from its own checkpoint (claim UID, namespace, name) after the last pod using
a claim is gone, possibly after the claim was deleted, and for claims whose prepare may never have
reached the driver (kubernetes ``pkg/kubelet/cm/dra/manager.go``, ``unprepareResources``). Each call
a check here expects to succeed is made ``--idempotent-count`` times, every answer compared.
"""

from __future__ import annotations

from .suite import SanityContext, Skip, expect, sanity_check

MANAGER = "kubelet pkg/kubelet/cm/dra/manager.go (unprepareResources)"
GUARDRAIL = "draguard guardrail 4 (the good unprepare: an unknown claim is success; reset, then deregister)"


@sanity_check(
    "sanity.unprepare.empty-request",
    rule="NodeUnprepareResources with no claims answers an empty result, not an error",
    source=MANAGER,
)
def empty_request(ctx: SanityContext) -> None:
    answer = ctx.client().unprepare([], timeout=ctx.config.call_timeout)
    expect(answer == {}, f"an empty unprepare answered entries {sorted(answer)}")


@sanity_check(
    "sanity.unprepare.one-entry-per-claim",
    rule="NodeUnprepareResources answers exactly one entry per claim UID in the request",
    source=MANAGER,
)
def one_entry_per_claim(ctx: SanityContext) -> None:
    (d0, d1) = ctx.devices(2)
    a, b = ctx.claim([d0]), ctx.claim([d1])
    ctx.prepared_ok(a)
    ctx.prepared_ok(b)
    answer = ctx.unprepare(a, b)
    expect(set(answer) == {a.uid, b.uid}, f"asked for {[a.uid, b.uid]}, answered {sorted(answer)}", [str(a), str(b)])
    expect(answer == {a.uid: "", b.uid: ""}, f"unprepare answered {answer!r}", [str(a), str(b)])


@sanity_check(
    "sanity.unprepare.idempotent",
    rule="unpreparing a claim again, after it was unprepared, succeeds every time",
    source=f"{GUARDRAIL}; kubelet retries unprepare until it succeeds",
)
def idempotent(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    ctx.prepared_ok(claim)
    ctx.unprepared_ok(claim)  # --idempotent-count calls, each must succeed
    if ctx.repeats() < 2:  # idempotence needs a second call whatever the count
        ctx.unprepared_ok(claim)


@sanity_check(
    "sanity.unprepare.unknown-claim",
    rule="NodeUnprepareResources succeeds for a claim the plugin never prepared",
    source=f"{GUARDRAIL}; kubernetes/kubernetes#131957",
    aimed_at=("unknown-unprepare-error",),
)
def unknown_claim(ctx: SanityContext) -> None:
    ghost = ctx.unknown_claim()
    answer = ctx.unprepare(ghost)
    expect(answer.get(ghost.uid) == "", f"unprepare of the never-prepared {ghost} answered {answer!r}", [str(ghost)])


@sanity_check(
    "sanity.unprepare.deleted-claim",
    rule="unprepare works from the claim UID and local state after the ResourceClaim was deleted",
    source="NVIDIA/k8s-dra-driver#340 (fixed by PR #342); kubelet unprepares from its checkpoint",
    aimed_at=("unprepare-needs-claim",),
)
def deleted_claim(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    ctx.prepared_ok(claim)
    ctx.delete_claim(claim)
    answer = ctx.unprepare(claim)
    expect(answer.get(claim.uid) == "", f"unprepare of the deleted {claim} answered {answer!r}", [str(claim)], [d0[1]])
    other = ctx.claim([d0])
    ctx.prepared_ok(other)  # the device was released


@sanity_check(
    "sanity.unprepare.failed-release-retried",
    rule="after a device release fails, a retried unprepare releases it: a new claim can use the device",
    source=f"{GUARDRAIL}; draguard issue 3 (forget before reset leaks the device)",
    aimed_at=("forget-before-reset",),
    needs=("fail_release",),
)
def failed_release_retried(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    ctx.prepared_ok(claim)
    ctx.call_hook("fail_release", d0[1])
    answers = [ctx.unprepare(claim)]
    while answers[-1].get(claim.uid) != "" and len(answers) < 4:  # the kubelet retries until it succeeds
        answers.append(ctx.unprepare(claim))
    expect(answers[-1].get(claim.uid) == "", f"unprepare of {claim} never succeeded: {answers!r}", [str(claim)])
    try:  # where the hardware can be asked, the device must have been reset (not only forgotten)
        reset_state = ctx.hook("device_reset_state")
    except Skip:
        reset_state = None
    if reset_state is not None:
        state = reset_state(d0[1])
        expect(state == "clean", f"unprepare of {claim} answered {answers!r}, but device {d0[1]} was never reset: "
               f"the hardware says {state!r} (the driver forgot the claim before the reset)", [str(claim)], [d0[1]])
    other = ctx.claim([d0])
    answer = ctx.prepare(other)
    expect(other.uid in answer and not answer[other.uid].error,
           f"after a failed release of {d0[1]} and unprepare answers {answers!r}, the device cannot be prepared "
           f"for a new claim: {answer.get(other.uid)!r}", [str(claim), str(other)], [d0[1]])


@sanity_check(
    "sanity.unprepare.sharing-torn-down",
    rule="after unprepare of a claim whose opaque config set up sharing (MPS), no sharing is left on its device",
    source="draguard guardrail 6 (shared accelerators name a sharing strategy, with deterministic cleanup)",
    aimed_at=("leave-sharing-state",),
    needs=("device_sharing",),
    capability="sharing-mps",
)
def sharing_torn_down(ctx: SanityContext) -> None:
    sharing = ctx.hook("device_sharing")  # skip before touching anything when the hardware cannot be asked
    (d0,) = ctx.devices(1)
    mps = {"driver": ctx.config.driver, "parameters": {"sharing": {"strategy": "MPS"}}}
    claim = ctx.claim([d0], config=[mps])
    ctx.prepared_ok(claim)
    ctx.unprepared_ok(claim)
    left = sharing(d0[1])
    expect(left is None, f"after unprepare of {claim} device {d0[1]} still has {left} sharing set up",
           [str(claim)], [d0[1]])
