"""CDI: every CDI device ID a prepare returns resolves in the driver's CDI spec directory, and no spec
of the claim is left after unprepare.

The container runtime resolves the IDs the kubelet passes on (``vendor/class=name``) against the
CDI specs on the node; an ID that does not resolve fails the container (containerd, CRI-O).
"""

from __future__ import annotations

from pathlib import Path

from draguard.harness import cdi as cdi_specs

from .suite import SanityContext, Skip, expect, sanity_check

__all__ = ["specs_naming"]

SOURCE = "CDI specification (tags.cncf.io/container-device-interface); kubelet passes CDI IDs to the runtime"


def specs_naming(cdi_dir: Path, text: str) -> list[str]:
    """Spec files in ``cdi_dir`` whose name or content mentions ``text`` (a claim UID)."""
    out = []
    for path in sorted(cdi_dir.glob("*")):
        if path.suffix not in (".json", ".yaml", ".yml") or not path.is_file():
            continue
        try:
            content = path.read_text()
        except OSError:
            continue
        if text in path.name or text in content:
            out.append(path.name)
    return out


def _resolve_problems(cdi_dir: Path, ids: list[str]) -> list[str]:
    """Resolved as a runtime does (JSON and YAML specs, versions, conflicts): draguard.harness.cdi."""
    return cdi_specs.check_ids(cdi_dir, ids)


@sanity_check(
    "sanity.cdi.ids-resolve",
    rule="every CDI device ID a prepare returns names a device with container edits in a CDI spec of the node",
    source=SOURCE,
    aimed_at=("incomplete-cdi",),
)
def ids_resolve(ctx: SanityContext) -> None:
    cdi_dir = ctx.cdi_dir()
    (d0, d1) = ctx.devices(2)
    claim = ctx.claim([d0, d1])
    result = ctx.prepared_ok(claim)
    ids = [i for d in result.devices for i in d.cdi_device_ids]
    if not ids:
        raise Skip(f"prepare of {claim} returned no CDI device IDs (allowed: a driver need not use CDI)")
    problems = _resolve_problems(cdi_dir, ids)
    specs = specs_naming(cdi_dir, claim.uid) or [p.name for p in cdi_dir.glob("*.json")]
    expect(not problems, f"CDI IDs {ids} of {claim} do not resolve in {cdi_dir}: {'; '.join(problems)} "
           f"(specs: {specs})", [str(claim)], [d0[1], d1[1]])


@sanity_check(
    "sanity.cdi.spec-removed",
    rule="after unprepare no CDI spec of the claim is left and its CDI device IDs no longer resolve",
    source=f"{SOURCE}; draguard guardrail 6 (deterministic cleanup when the pod ends)",
)
def spec_removed(ctx: SanityContext) -> None:
    cdi_dir = ctx.cdi_dir()
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    result = ctx.prepared_ok(claim)
    ids = [i for d in result.devices for i in d.cdi_device_ids]
    ctx.unprepared_ok(claim)
    left = specs_naming(cdi_dir, claim.uid)
    still = [i for i in ids if not cdi_specs.check_ids(cdi_dir, [i])]
    expect(not left and not still, f"after unprepare of {claim}: specs {left} remain, IDs {still} still resolve",
           [str(claim)], [d0[1]])



@sanity_check(
    "sanity.cdi.recreated-on-reprepare",
    rule="a repeated prepare of a prepared claim whose CDI spec is gone writes it again: its CDI device IDs resolve",
    source=f"{SOURCE}; after a node reboot the CDI spec directory (tmpfs) is empty and the kubelet prepares the "
           "running pods' claims again (kubernetes/kubernetes#141433, PR #141966)",
    aimed_at=("cdi-not-recreated",),
)
def recreated_on_reprepare(ctx: SanityContext) -> None:
    """A reboot's effect on the CDI directory, without rebooting: the claim's specs removed, then the
    same prepare again, as the kubelet sends it for a pod that still runs."""
    cdi_dir = ctx.cdi_dir()
    (d0,) = ctx.devices(1)
    claim = ctx.claim([d0])
    result = ctx.prepared_ok(claim)
    ids = [i for d in result.devices for i in d.cdi_device_ids]
    if not ids:
        raise Skip(f"prepare of {claim} returned no CDI device IDs (allowed: a driver need not use CDI)")
    removed = specs_naming(cdi_dir, claim.uid)
    if not removed:
        raise Skip(f"no CDI spec in {cdi_dir} names {claim.uid}: the driver's specs cannot be told apart to remove")
    for name in removed:
        (cdi_dir / name).unlink(missing_ok=True)
    again = ctx.prepared_ok(claim)
    ids = [i for d in again.devices for i in d.cdi_device_ids] or ids
    problems = _resolve_problems(cdi_dir, ids)
    expect(not problems, f"the CDI specs of {claim} ({', '.join(removed)}) were gone and it was prepared again, "
           f"yet its CDI IDs {ids} do not resolve in {cdi_dir}: {'; '.join(problems)}", [str(claim)], [d0[1]])
