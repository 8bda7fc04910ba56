"""``device-failure``: the hardware of a device raises a fault: it falls off the bus, an uncorrectable ECC
error, or a given Xid error.

The device truth records it and NVML reports it (a lost GPU answers nothing, an Xid is an event, an ECC
error a count); nothing tells the driver. A correct driver's health check sees it and reports the device
(the fake driver taints it in its ResourceSlice and streams it as UNHEALTHY), so the scheduler stops
handing it out; a driver whose health check is blind keeps publishing it as healthy, and the next
container that gets it starts on broken hardware (``container-devices``). An application's Xid (13, 31,
43, 45, 68) leaves the GPU working: a correct health check ignores it, as NVIDIA's device plugin does.
The device is repaired at the start of cleanup.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from draguard.harness.core.registry import FAULTS
from draguard.harness.devices.truth import HardwareFault
from draguard.harness.runner.context import StepContext
from draguard.harness.scenario.format import DnsLabel, Params


class DeviceFailureParams(Params):
    device: DnsLabel
    """The device on each targeted node that fails (its name in the node's ResourceSlice)."""
    kind: Literal["fallen-off-bus", "ecc", "xid"] = "fallen-off-bus"
    """``fallen-off-bus``: the GPU is lost (Xid 79); ``ecc``: an uncorrectable ECC error (Xid 48); ``xid``:
    the Xid error given in ``xid``."""
    xid: int | None = Field(default=None, ge=1, le=999)
    """The Xid number (``kind: xid`` only)."""
    message: str | None = None
    """What the hardware reports (default: the fault's Xid and meaning)."""

    @model_validator(mode="after")
    def _xid_with_its_kind(self) -> DeviceFailureParams:
        if (self.kind == "xid") != (self.xid is not None):
            raise ValueError("give 'xid' exactly when kind is xid (fallen-off-bus is Xid 79, ecc Xid 48)")
        return self


@FAULTS.register("device-failure", summary="the hardware of a device raises a fault (fallen off the bus, ECC, an Xid); "
                 "only the driver's health check can tell", params=DeviceFailureParams, needs=("fake-driver",))
def device_failure(ctx: StepContext, params: DeviceFailureParams) -> None:
    fault = HardwareFault.of(params.kind, params.xid, params.message)
    for node in ctx.target_nodes():
        ctx.fail_device(node, params.device, fault)
        ctx.fired()
        ctx.note(f"device {params.device} on {node}: {fault.message}"
                 + ("" if fault.breaks else " (the GPU still works)"))
