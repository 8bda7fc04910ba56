"""Concurrency: concurrent prepare and unprepare of one claim and of many claims end consistent, and no
call waits longer than a stated bound while another call of the driver is slow.

The kubelet calls a driver from many pod workers at once (kubernetes ``pkg/kubelet/cm/dra/manager.go``
holds no driver-wide lock around the calls), and draguard's guardrail 4 asks for lock-free,
idempotent handlers: a device reset that takes minutes must not hold up pods on other devices.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError

from .cdi import specs_naming
from .suite import CheckFailed, SanityContext, Skip, expect, sanity_check

GUARDRAIL = "draguard guardrail 4 (lock-free, idempotent handlers)"


def _released(ctx: SanityContext, claims: list[ClaimRef], devices: list[tuple[str, str]]) -> None:
    """Every claim is unprepared and its devices can be prepared again, in one batch."""
    answer = ctx.unprepare(*claims)
    expect(all(answer.get(c.uid) == "" for c in claims), f"final unprepare answered {answer!r}", [str(c) for c in claims])
    if ctx.config.cdi_dir is not None:
        left = [s for c in claims for s in specs_naming(ctx.config.cdi_dir, c.uid)]
        expect(not left, f"after the final unprepare CDI spec(s) {left} remain", [str(c) for c in claims])
    fresh = [ctx.claim([d]) for d in devices]
    got = ctx.prepare(*fresh)
    bad = {c.uid: got.get(c.uid) for c in fresh if c.uid not in got or got[c.uid].error}
    expect(not bad, f"after the concurrent calls the devices cannot be prepared again: {bad!r}",
           [str(c) for c in fresh], [d for _, d in devices])


@sanity_check(
    "sanity.concurrency.one-claim",
    rule="concurrent prepares of one claim all answer the same devices and CDI device IDs; concurrent prepares "
    "and unprepares of it each get an answer and leave it consistent (prepared again, the same devices)",
    source=GUARDRAIL,
)
def one_claim(ctx: SanityContext) -> None:
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    # 1. Prepares only: the kubelet retries a prepare whose answer it lost, so concurrent prepares of one
    # claim are retries of one another and must agree. Deterministic: whatever the interleaving, every
    # call but the first finds the claim prepared (or being prepared).
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _prepare_answer(ctx, claim), range(8)))
    failed = [a for a in answers if isinstance(a, str)]
    expect(not failed, f"{len(failed)} of 8 concurrent prepares of {claim} failed: {failed[:3]}", [str(claim)], [d0[1]])
    distinct = sorted({repr(a) for a in answers})
    expect(len(distinct) == 1, f"8 concurrent prepares of {claim} answered {len(distinct)} different device lists: "
           f"{distinct[:2]}", [str(claim)], [d0[1]])
    # 2. Prepares and unprepares mixed.
    rng = random.Random(7)
    ops = [rng.choice(("prepare", "unprepare")) for _ in range(24)]
    problems: list[str] = []

    def call(op: str) -> None:
        try:
            answer = ctx.prepare(claim) if op == "prepare" else ctx.unprepare(claim)
        except PluginCallError as exc:
            problems.append(f"{op}: {exc}")
            return
        if claim.uid not in answer:
            problems.append(f"{op} answered no entry for the claim: {answer!r}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(call, ops))
    expect(not problems, f"{len(problems)} of {len(ops)} concurrent calls on {claim} went wrong: {problems[:3]}",
           [str(claim)], [d0[1]])
    # 3. Consistent afterwards: whichever call came last, a prepare now gives the claim the same devices (the
    # mix may have left it prepared or not: which one is a race, so nothing after this depends on it).
    again, first = _prepare_answer(ctx, claim), answers[0]
    if isinstance(again, str) or isinstance(first, str):
        expect(False, f"after the concurrent calls a prepare of {claim} failed: {again}", [str(claim)], [d0[1]])
        return
    expect([d[:2] for d in again] == [d[:2] for d in first],
           f"after the concurrent calls {claim} was prepared with {again}, first with {first}", [str(claim)], [d0[1]])
    _released(ctx, [claim], [d0])


def _prepare_answer(ctx: SanityContext, claim: ClaimRef) -> str | list[tuple[str, str, tuple[str, ...]]]:
    """One prepare of ``claim``: its devices as (pool, device, CDI IDs), or what went wrong."""
    try:
        result = ctx.prepare(claim).get(claim.uid)
    except PluginCallError as exc:
        return str(exc)
    if result is None:
        return "no entry for the claim"
    if result.error:
        return result.error
    return sorted((d.pool_name, d.device_name, tuple(sorted(d.cdi_device_ids))) for d in result.devices)


@sanity_check(
    "sanity.concurrency.many-claims",
    rule="concurrent prepares, then unprepares, of many claims (one call each) all succeed",
    source=GUARDRAIL,
)
def many_claims(ctx: SanityContext) -> None:
    devices = ctx.devices(min(8, max(2, len(ctx.node_devices()) // 4)))
    claims = [ctx.claim([d]) for d in devices]
    with ThreadPoolExecutor(len(claims)) as pool:
        prepared = list(pool.map(lambda c: ctx.prepare(c).get(c.uid), claims))
        bad = [(str(c), r) for c, r in zip(claims, prepared) if r is None or r.error]
        expect(not bad, f"concurrent prepares failed: {bad[:3]}", [c for c, _ in bad])
        unprepared = list(pool.map(lambda c: ctx.unprepare(c).get(c.uid), claims))
        bad2 = [(str(c), r) for c, r in zip(claims, unprepared) if r != ""]
        expect(not bad2, f"concurrent unprepares failed: {bad2[:3]}", [c for c, _ in bad2])
    _released(ctx, claims, devices)


def _timed_while_slow(ctx: SanityContext, slow_call: Callable[[], object], quick_call: Callable[[], object],
                      what: str) -> str | None:
    """Run ``slow_call`` in the background, then time ``quick_call``; a problem, or None."""
    done = threading.Event()

    def background() -> None:
        try:
            slow_call()
        except PluginCallError:
            pass
        finally:
            done.set()

    threading.Thread(target=background, daemon=True).start()
    time.sleep(0.3)  # the slow call is inside the driver now
    if done.is_set():
        return None  # could not make it slow: not judged here
    start = time.monotonic()
    try:
        quick_call()
    except PluginCallError as exc:
        return f"{what}: the other call failed: {exc}"
    took = time.monotonic() - start
    slow_still = not done.is_set()
    done.wait(30)
    if took > ctx.config.blocking_bound:
        return f"{what}: it took {took:.2f}s (bound {ctx.config.blocking_bound:.1f}s){' while the slow call ran' if slow_still else ''}"
    return None


@sanity_check(
    "sanity.concurrency.not-blocked",
    rule="while one claim's prepare or device release is slow, a prepare of another claim answers within the bound",
    source=f"{GUARDRAIL}; kubernetes-sigs/dra-driver-nvidia-gpu PR #332 (a driver lock held across unprepare)",
    aimed_at=("lock-across-reset",),
    needs=("slow_prepare", "slow_release"),
    needs_all=False,
)
def not_blocked(ctx: SanityContext) -> None:
    # Each half runs only where its hook can be done (decided before any call): a plain call made
    # without its slow counterpart measures no blocking, and must not stand in for one.
    can = {name: not ctx.hook_unavailable(name) for name in ("slow_prepare", "slow_release")}
    if not any(can.values()):
        raise Skip("; ".join(ctx.hook_unavailable(n) for n in can))
    (d0, d1) = ctx.devices(2)
    slow_for = max(3.0, ctx.config.blocking_bound * 2 + 1)
    problems: list[str] = []
    # 1. A slow prepare of one claim.
    if can["slow_prepare"]:
        a, b = ctx.claim([d0]), ctx.claim([d1])
        ctx.call_hook("slow_prepare", a, slow_for)
        p = _timed_while_slow(ctx, lambda: ctx.prepare(a, timeout=slow_for + 10), lambda: ctx.prepared_ok(b),
                              f"prepare of {b} while the prepare of {a} was slow")
        if p:
            problems.append(p)
        ctx.unprepare(a, b)
    # 2. A slow device release (reset) inside an unprepare.
    if can["slow_release"]:
        c, e = ctx.claim([d0]), ctx.claim([d1])
        ctx.prepared_ok(c)
        ctx.call_hook("slow_release", d0[1], slow_for)
        p = _timed_while_slow(ctx, lambda: ctx.unprepare(c, timeout=slow_for + 10), lambda: ctx.prepared_ok(e),
                              f"prepare of {e} while the release of {d0[1]} for {c} was slow")
        if p:
            problems.append(p)
    if problems:
        raise CheckFailed("; ".join(problems))
