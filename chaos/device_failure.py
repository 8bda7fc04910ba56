"""``device-failure``: the hardware fails a device (an XID error, a GPU fallen off the bus).

The device turns unhealthy in the node's device truth, as NVML would report it; nothing tells the
driver. A correct driver's health check sees it and reports it (the fake driver taints the device in
its ResourceSlice and streams it as UNHEALTHY), so the scheduler stops handing it out; a driver whose
health check is blind keeps publishing it as healthy, and the next container that gets it starts on
broken hardware (``container-devices``). The device is repaired at the start of cleanup.
"""

from __future__ import annotations

from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import DnsLabel, Params


class DeviceFailureParams(Params):
    device: DnsLabel
    """The device on each targeted node that fails (its name in the node's ResourceSlice)."""
    message: str = "Xid 79: GPU has fallen off the bus"
    """What the hardware reports (the health message a driver may pass on)."""


@FAULTS.register("device-failure", summary="the hardware fails a device; only the driver's health check can tell",
                 params=DeviceFailureParams, needs=("fake-driver",))
def device_failure(ctx: StepContext, params: DeviceFailureParams) -> None:
    for node in ctx.target_nodes():
        ctx.fail_device(node, params.device, params.message)
        ctx.fired()
        ctx.note(f"device {params.device} on {node} failed: {params.message}")
