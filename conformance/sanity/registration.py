"""Registration: what ``Registration.GetInfo`` announces, and that the announced services answer.

The kubelet's DRA registration handler (kubernetes ``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go``,
``RegisterPlugin`` and ``validateSupportedServices``) accepts type ``DRAPlugin``, takes the first
advertised DRAPlugin version it speaks and dials the endpoint.
"""

from __future__ import annotations

import stat

from draguard.harness.grpcapi.plugin import DRA_VERSIONS, PLUGIN_TYPE, PluginCallError, PluginInfo

from .suite import CheckFailed, SanityContext, expect, sanity_check

KUBELET_MANAGER = "kubelet pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (RegisterPlugin)"


def _info(ctx: SanityContext) -> PluginInfo:
    if ctx.info is None:
        raise CheckFailed(f"GetInfo on {ctx.config.registration_socket} failed: {ctx.info_error}")
    return ctx.info


@sanity_check(
    "sanity.registration.info",
    rule="GetInfo answers type DRAPlugin and the driver's name",
    source=f"{KUBELET_MANAGER}; pluginregistration v1 constants (DRAPlugin)",
)
def info(ctx: SanityContext) -> None:
    i = _info(ctx)
    expect(i.type == PLUGIN_TYPE, f"GetInfo type is {i.type!r}, not {PLUGIN_TYPE!r}")
    expect(i.name == ctx.config.driver, f"GetInfo name is {i.name!r}, not the driver {ctx.config.driver!r}")


@sanity_check(
    "sanity.registration.endpoint",
    rule="GetInfo names the DRA socket as its endpoint, and a server listens there",
    source=f"{KUBELET_MANAGER} (the endpoint is dialled as given)",
)
def endpoint(ctx: SanityContext) -> None:
    i = _info(ctx)
    expect(bool(i.endpoint), "GetInfo gave no endpoint")
    if ctx.config.plugin_socket is not None:
        expect(
            i.endpoint == str(ctx.config.plugin_socket),
            f"GetInfo endpoint is {i.endpoint!r}, but the DRA socket is {ctx.config.plugin_socket}",
        )
    sock = ctx.dra_socket
    assert sock is not None
    try:
        is_socket = stat.S_ISSOCK(sock.stat().st_mode)
    except OSError as exc:
        raise CheckFailed(f"endpoint {sock}: {exc.strerror or exc}") from exc
    expect(is_socket, f"endpoint {sock} is not a unix socket")
    ctx.client().prepare([], timeout=ctx.config.call_timeout)


@sanity_check(
    "sanity.registration.versions",
    rule="the advertised versions include a DRAPlugin version the kubelet speaks (v1 and/or v1beta1)",
    source=f"{KUBELET_MANAGER} (validateSupportedServices: servicesSupportedByKubelet)",
)
def versions(ctx: SanityContext) -> None:
    i = _info(ctx)
    known = [v for v in i.supported_versions if v in DRA_VERSIONS]
    expect(bool(known), f"supported_versions {list(i.supported_versions)} lists none of {list(DRA_VERSIONS)}")


@sanity_check(
    "sanity.registration.serves-advertised",
    rule="every advertised DRAPlugin version answers NodePrepareResources and NodeUnprepareResources",
    source="kubelet pkg/kubelet/cm/dra/plugin/dra_plugin.go (calls the chosen version's service)",
)
def serves_advertised(ctx: SanityContext) -> None:
    i = _info(ctx)
    advertised = [v for v in i.supported_versions if v in DRA_VERSIONS]
    expect(bool(advertised), "no DRAPlugin version advertised")
    for version in advertised:
        client = ctx.client(version)
        try:
            client.prepare([], timeout=ctx.config.call_timeout)
            client.unprepare([], timeout=ctx.config.call_timeout)
        except PluginCallError as exc:
            raise CheckFailed(f"{version} is advertised but its call failed: {exc}") from exc


@sanity_check(
    "sanity.registration.notify",
    rule="NotifyRegistrationStatus is accepted",
    source="kubelet pkg/kubelet/pluginmanager/operationexecutor (notifies the plugin after registration)",
)
def notify(ctx: SanityContext) -> None:
    _info(ctx)
    ctx.client().notify(True, timeout=ctx.config.call_timeout)
