"""Restart: prepared state survives a restart of the driver process, and unprepare after the restart
releases the devices; a prepare interrupted by a crash is cleaned up by the unprepare that follows.

The kubelet does not prepare again after a driver restart: it unprepares from its own checkpoint
when the pod ends (kubernetes ``pkg/kubelet/cm/dra/manager.go``), so the driver must remember what
it prepared (draguard guardrail 4; kubernetes-sigs/dra-driver-nvidia-gpu#840 for interrupted prepares).
Both checks need the ``restart`` hook, and are skipped before they start when it cannot be done: a
crash with no way to restart would leave the driver down for every check after it.
"""

from __future__ import annotations

from draguard.harness import cdi as cdi_specs
from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError

from .cdi import specs_naming
from .suite import SanityContext, expect, sanity_check


@sanity_check(
    "sanity.restart.state-survives",
    rule="after the driver restarts, a prepared claim is still prepared and its unprepare releases the devices",
    source="kubelet pkg/kubelet/cm/dra/manager.go (unprepare from the kubelet checkpoint after a driver restart)",
    needs=("restart",),
)
def state_survives(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    restart = ctx.hook("restart")
    claim = ctx.claim([d0])
    before = ctx.prepared_ok(claim)
    ids = [i for d in before.devices for i in d.cdi_device_ids]
    restart()
    ctx.wait_ready()
    # No prepare after the restart: the kubelet does not send one for a claim it has prepared.
    if ctx.config.cdi_dir is not None and ids:
        problems = cdi_specs.check_ids(ctx.config.cdi_dir, ids)
        expect(not problems, f"after the restart the CDI IDs of the prepared {claim} no longer resolve: {problems}",
               [str(claim)], [d0[1]])
    _released_after(ctx, claim, d0, "the restart")


def _released_after(ctx: SanityContext, claim: ClaimRef, device: tuple[str, str], after: str) -> None:
    """Unprepare ``claim`` after ``after`` (a restart): it must succeed, leave no CDI spec of the claim, and
    free ``device`` (pool, name) for another claim's prepare."""
    ctx.unprepared_ok(claim)
    if ctx.config.cdi_dir is not None:
        left = specs_naming(ctx.config.cdi_dir, claim.uid)
        expect(not left, f"after {after}, unprepare of {claim} answered success but left its CDI spec(s) {left}: "
               f"the driver forgot what it had prepared", [str(claim)], [device[1]])
    other = ctx.claim([device])
    answer = ctx.prepare(other)
    expect(other.uid in answer and not answer[other.uid].error,
           f"after {after} and the unprepare of {claim}, {device[1]} cannot be prepared: {answer.get(other.uid)!r}",
           [str(claim), str(other)], [device[1]])


@sanity_check(
    "sanity.restart.interrupted-prepare",
    rule="a prepare interrupted by a driver crash is undone by the unprepare the kubelet sends after the restart",
    source="kubernetes-sigs/dra-driver-nvidia-gpu#840 (claims stuck in PrepareStarted)",
    aimed_at=("prepare-started-leak",),
    needs=("crash_in_prepare", "restart"),
)
def interrupted_prepare(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    restart = ctx.hook("restart")
    claim = ctx.claim([d0])
    ctx.call_hook("crash_in_prepare")
    try:
        ctx.prepare(claim, timeout=5)
    except PluginCallError:
        pass  # the driver died under the call
    restart()
    ctx.wait_ready()
    ctx.unprepared_ok(claim)
    other = ctx.claim([d0])
    answer = ctx.prepare(other)
    expect(other.uid in answer and not answer[other.uid].error,
           f"after a crash inside the prepare of {claim}, a restart and its unprepare, {d0[1]} cannot be "
           f"prepared: {answer.get(other.uid)!r}", [str(claim), str(other)], [d0[1]])


@sanity_check(
    "sanity.restart.corrupt-checkpoint",
    rule="a driver that starts on a damaged checkpoint still knows the claims it had prepared: their unprepare "
         "releases the devices and removes the CDI specs",
    source="kubernetes-sigs/dra-driver-nvidia-gpu#1100 (a corrupted checkpoint; PR #1259 rebuilds and reports it)",
    aimed_at=("discard-corrupt-checkpoint",),
    needs=("restart_with_corrupt_checkpoint",),
)
def corrupt_checkpoint(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    ctx.prepared_ok(claim)
    ctx.call_hook("restart_with_corrupt_checkpoint")
    ctx.wait_ready()
    _released_after(ctx, claim, d0, "a restart on a damaged checkpoint")
