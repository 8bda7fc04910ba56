"""Health: the DRAResourceHealth stream (KEP-4680) opens, reports only devices the driver published,
reports a device that broke, and is advertised at registration whenever it is served.

The 1.37 kubelet opens the stream only when the registration lists ``v1.DRAResourceHealth`` or
``v1alpha1.DRAResourceHealth`` (kubernetes ``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go``,
``pickHealthService``); a driver that serves the stream without advertising it is never watched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from draguard.harness.core.errors import HarnessError
from draguard.harness.grpcapi.plugin import HEALTH_SERVICES, DeviceHealthReport, PluginCallError, choose_health

from .suite import CheckFailed, SanityContext, Skip, expect, sanity_check

KEP = "KEP-4680 (DRAResourceHealth); kubelet pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (pickHealthService)"
FIRST_MESSAGE = 5.0


def _first(ctx: SanityContext, service: str, wait: float = FIRST_MESSAGE) -> list[DeviceHealthReport] | str:
    """The first message of the stream, or why there is none (``unimplemented``, ``silent``, an error)."""
    stream = ctx.client().watch_health(service, timeout=wait)
    try:
        return next(stream)
    except StopIteration:
        return "the stream ended without a message"
    except PluginCallError as exc:
        if exc.code == "UNIMPLEMENTED":
            return "unimplemented"
        if exc.code == "DEADLINE_EXCEEDED":
            return "silent"
        return str(exc)
    finally:
        stream.cancel()


def _advertised(ctx: SanityContext) -> str:
    if ctx.info is None:
        raise Skip(f"registration failed: {ctx.info_error}")
    service = choose_health(ctx.info.supported_versions)
    if service is None:
        raise Skip(f"the driver does not advertise a health service ({', '.join(HEALTH_SERVICES)})")
    return service


@sanity_check(
    "sanity.health.stream-opens",
    capability="health-stream",
    rule="an advertised health stream opens and sends a first message",
    source=KEP,
    aimed_at=(),
)
def stream_opens(ctx: SanityContext) -> None:
    service = _advertised(ctx)
    first = _first(ctx, service)
    if first == "unimplemented":
        raise Skip(f"{service} is advertised but the driver declines health reporting (UNIMPLEMENTED)")
    expect(not isinstance(first, str), f"{service} advertised, but the stream gave no message within "
           f"{FIRST_MESSAGE:.0f}s: {first}")


@sanity_check(
    "sanity.health.published-devices",
    capability="health-stream",
    rule="the health stream reports only devices the driver publishes in its ResourceSlices for the node",
    source=KEP,
)
def published_devices(ctx: SanityContext) -> None:
    service = _advertised(ctx)
    first = _first(ctx, service)
    if isinstance(first, str):
        raise Skip(f"no health message to judge: {first}")
    if ctx.setup_error or ctx.kube is None:
        raise HarnessError(f"the driver's ResourceSlices could not be read: {ctx.setup_error}")
    if not first:
        raise Skip("the first health message reports no device: nothing to judge")
    published = set(ctx.node_devices())
    unknown = sorted({(d.pool_name, d.device_name) for d in first} - published)
    expect(not unknown, f"the health stream reports devices the driver does not publish: {unknown}",
           devices=[d for _, d in unknown])


@sanity_check(
    "sanity.health.advertised",
    rule="a driver that serves the health stream lists a version of it that it serves in its registration",
    source=f"{KEP}: the kubelet never watches an unadvertised stream",
)
def advertised(ctx: SanityContext) -> None:
    if ctx.info is None:
        raise CheckFailed(f"registration failed: {ctx.info_error}")
    listed = set(ctx.info.supported_versions)
    served = []
    for service in HEALTH_SERVICES:
        first = _first(ctx, service, wait=2.0)
        if first != "unimplemented" and not (isinstance(first, str) and "UNAVAILABLE" in first):
            served.append(service)
    if not served:
        raise Skip("the driver serves no health stream")
    # One advertised version is enough: the kubelet picks among the advertised ones.
    expect(bool(set(served) & listed), f"the driver serves {served} but its registration lists only {sorted(listed)}")


@sanity_check(
    "sanity.health.reports-unhealthy",
    capability="health-stream",
    rule="a device that breaks is reported UNHEALTHY on the health stream",
    source=KEP,
    aimed_at=("silent-health", "xid-overreaction"),
    needs=("make_unhealthy",),
)
def reports_unhealthy(ctx: SanityContext) -> None:
    """Where the hooks can make the hardware itself fail (draguard's fake driver: its device truth, read
    through NVML), each kind of failure in turn: the GPU falls off the bus, an uncorrectable ECC error,
    a critical Xid; the device is repaired (and must be reported HEALTHY again) between them, and an
    application's Xid, after which the GPU still works, must not be reported UNHEALTHY. Otherwise the
    driver's own declaration of an unhealthy device (``make_unhealthy``)."""
    service = _advertised(ctx)
    ((pool, dev),) = ctx.devices(1)
    if ctx.hook_unavailable("raise_hardware_fault"):
        _expect_health(ctx, service, dev, "UNHEALTHY", lambda: ctx.call_hook("make_unhealthy", dev,
                                                                             "draguard sanity: simulated failure"),
                       f"{dev} broke")
        return
    try:
        for kind, xid in HARDWARE_FAULTS:
            what = f"{dev} raised {kind}" + (f" (Xid {xid})" if xid else "")
            _expect_health(ctx, service, dev, "UNHEALTHY",
                           lambda: ctx.call_hook("raise_hardware_fault", dev, kind, xid), what)
            _expect_health(ctx, service, dev, "HEALTHY", lambda: ctx.call_hook("repair_hardware", dev),
                           f"{dev} was repaired after it {what.split(' ', 1)[1]}")
        seen = _watch(ctx, service, dev, "UNHEALTHY", lambda: ctx.call_hook("raise_hardware_fault", dev, "xid", 13),
                      wait=APPLICATION_XID_WAIT)
        expect(not seen[0], f"{dev} raised Xid 13, an application's error after which the GPU still works, and "
               "the driver reported it UNHEALTHY: a health check must skip the application Xids (13, 31, 43, 45, "
               "68), as NVIDIA's device plugin does", devices=[dev])
    finally:
        ctx.call_hook("repair_hardware", dev)


HARDWARE_FAULTS = (("fallen-off-bus", None), ("ecc", None), ("xid", 62))
"""The hardware failures the check raises in turn (Xid 79, Xid 48, a micro-controller halt)."""
APPLICATION_XID_WAIT = 3.0
"""Seconds an application's Xid is watched for an UNHEALTHY report that must not come (a health check
polls every second or so)."""


def _watch(ctx: SanityContext, service: str, dev: str, health: str, trigger: Callable[[], None],
           wait: float = 10.0) -> tuple[bool, list[list[DeviceHealthReport]]]:
    """Open the stream, ``trigger`` the change, and watch up to ``wait`` seconds for ``dev`` reported
    ``health``: whether it was, and the messages seen."""
    seen: list[list[DeviceHealthReport]] = []
    stream = ctx.client().watch_health(service, timeout=wait + 5)
    found = threading.Event()

    def read() -> None:
        try:
            for msg in stream:
                seen.append(msg)
                if any(d.device_name == dev and d.health == health for d in msg):
                    found.set()
                    return
        except PluginCallError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    trigger()
    found.wait(wait)
    stream.cancel()
    return found.is_set(), seen


def _expect_health(ctx: SanityContext, service: str, dev: str, health: str, trigger: Callable[[], None],
                   what: str) -> None:
    found, seen = _watch(ctx, service, dev, health, trigger)
    last = [(d.device_name, d.health) for d in seen[-1]] if seen else []
    expect(found, f"{what}, but {len(seen)} health message(s) in 10s never said {health} (last: {last})",
           devices=[dev])
