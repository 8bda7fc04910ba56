"""``ai-conformance``: evidence for the CNCF Kubernetes AI Conformance programme
(github.com/cncf/k8s-ai-conformance, requirements defined in github.com/kubernetes-sigs/ai-conformance).

A platform submits ``vX.Y/<product>/PRODUCT.yaml``: the checklist of ``docs/AIConformance-X.Y.yaml``
with, per requirement, ``status`` (Implemented, Not Implemented, Partially Implemented, N/A),
``evidence`` links and ``notes``; ``id``, ``description`` and ``level`` are submitted unchanged. From
v1.37 test artifacts may be attached and linked as ``file://vX.Y/<product>/junit.xml#TestName``
(the checklist's "Hybrid Verification Approach"). The programme's validator (scripts/validate.go)
requires every MUST to be Implemented and notes on every N/A.

:data:`REQUIREMENTS` maps the DRA-related requirements to the draguard checks that give evidence for
them, with how much of the requirement they cover. ``render`` writes ``ai-conformance/PRODUCT.yaml``:
those requirements of the checklist for the cluster's release, each with the status the run's checks
support, links ``file://vX.Y/<product>/junit_01.xml#<check id>`` to the testcases that ran (the
bundle's root is the submission folder) and notes saying what was seen, what draguard does not
check, and why a requirement does not apply. ``verify`` checks that each DRA-related requirement of
the checklist is there with the checklist's id, description and level, that the links resolve inside
the bundle (in its own submission folder), that each status is one ``junit_01.xml`` supports, and
names every requirement a failed check leaves unmet, linked or not.
docs/ai-conformance.md is the table of this map (tests/certify keeps it true).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ruamel.yaml import YAML

from draguard.harness.core.errors import UsageError
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.bundle import Verification

from . import PROGRAMMES, BundleView, release_of

__all__ = ["AiConformance", "Requirement", "REQUIREMENTS", "OTHER_REQUIREMENTS", "CHECKLISTS", "FRAGMENT", "checklist_for", "product_dir",
           "mapping_table"]

FRAGMENT = "ai-conformance/PRODUCT.yaml"
CHECKLISTS = ("v1.33", "v1.34", "v1.35", "v1.36", "v1.37")
"""The checklists (cncf/k8s-ai-conformance docs/AIConformance-X.Y.yaml) whose levels are recorded here."""

Coverage = Literal["full", "partial"]


@dataclass(frozen=True)
class Requirement:
    """A requirement of the programme and the draguard checks that give evidence for it."""

    id: str
    category: str
    """The checklist's section: accelerators, schedulingOrchestration, security, ..."""
    kar: str
    """Its Kubernetes AI Requirement in kubernetes-sigs/ai-conformance (kars/)."""
    description: str
    """The checklist's description, verbatim (submissions must not change it)."""
    levels: Mapping[str, str]
    """Checklist release → MUST or SHOULD; a release missing here does not list the requirement."""
    checks: tuple[str, ...]
    coverage: Coverage
    covered: str
    """What the checks show, in one sentence."""
    gap: str
    """What the programme asks that the checks do not show ("" when coverage is full)."""
    off_checklist: str = ""
    """Why a later checklist no longer lists it."""
    scenarios: tuple[str, ...] = ()
    """Scenarios of the library (scenarios/<name>.yaml) that show the behaviour under ``draguard run``;
    certify does not run them, so they are in the docs' table, not in the fragment."""

    def level(self, release: str) -> str | None:
        return self.levels.get(release)


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(
        id="dra_support", category="accelerators", kar="KAR-0051",
        description="Support Dynamic Resource Allocation (DRA) APIs to enable more flexible and fine-grained "
                    "resource requests beyond simple counts.",
        levels={"v1.33": "SHOULD", "v1.34": "MUST", "v1.35": "MUST"},
        checks=("conformance.core.driver-publishes", "conformance.core.template-claim",
                "conformance.core.claim-lifecycle", "conformance.core.reuse", "conformance.topology.match-attribute"),
        coverage="full",
        covered="the driver publishes its devices in resource.k8s.io/v1 ResourceSlices, and pods get them through "
                "ResourceClaimTemplates and ResourceClaims, including a matchAttribute constraint (a request beyond "
                "a count), prepared before they run and released after",
        gap="",
        off_checklist="from v1.36 the checklist no longer lists it: KAR-0051 is covered by Kubernetes conformance "
                      "itself since v1.35 (the [sig-node] [DRA] CRUD Tests [Conformance] of each resource.k8s.io/v1 "
                      "type); this entry keeps draguard's evidence that the driver works through those APIs",
        scenarios=("device-taint-nvlink-claim", "legacy-extended-resource-mix"),
    ),
    Requirement(
        id="gpu_sharing", category="accelerators", kar="KAR-0003",
        description="For accelerators that support static GPU sharing, provide well-defined mechanisms for at least "
                    "one GPU sharing strategy to improve utilization for workloads that do not require a full "
                    "dedicated GPU. If hardware-level partitioning is supported, then these fractional GPU resources "
                    "should be exposed as schedulable resources. If software-based sharing (e.g. time-slicing) is "
                    "supported, then oversubscription of GPUs should be allowed. Forward-looking: Once the "
                    "accelerator supports static GPU sharing as part of DRA, the platform should expose the DRA "
                    "mechanism to allow users to leverage static GPU sharing. Once the accelerator supports dynamic "
                    "GPU sharing as part of DRA and the partitionable devices feature is GA, the platform should "
                    "expose the DRA mechanism to allow users to leverage dynamic GPU sharing.",
        levels={"v1.35": "SHOULD", "v1.36": "SHOULD", "v1.37": "SHOULD"},
        checks=("conformance.sharing.shared-claim", "conformance.sharing.multi-container",
                "sanity.unprepare.sharing-torn-down"),
        coverage="partial",
        covered="one allocated device is shared by several pods and containers through one ResourceClaim, prepared "
                "once, and a sharing set-up (MPS) made for a claim is torn down at unprepare",
        gap="draguard does not check that hardware partitions (MIG) are published as schedulable devices, nor that "
            "time-slicing oversubscribes a GPU",
        scenarios=("mig-partitions-with-full-gpus", "mps-shared-claim-correct-driver", "shared-claim-gang",
                   "mps-state-left-behind", "shared-claim-no-strategy"),
    ),
    Requirement(
        id="gang_scheduling", category="schedulingOrchestration", kar="KAR-0053",
        description="The platform must allow for the installation and successful operation of at least one gang "
                    "scheduling solution that ensures all-or-nothing scheduling for distributed AI workloads (e.g. "
                    "Kueue, Volcano, etc.) To be conformant, the vendor must demonstrate that their platform can "
                    "successfully run at least one such solution.",
        levels={r: "MUST" for r in CHECKLISTS},
        checks=("conformance.gang.spread",),
        coverage="partial",
        covered="a gang of pods, one per node, each with a two-device matchAttribute claim, all run with matching "
                "devices on their own nodes and are all released when the gang ends",
        gap="draguard installs no gang scheduler (Kueue, Volcano) and does not check that a gang larger than the "
            "free capacity stays wholly pending (the requirement's all-or-nothing negative case)",
        scenarios=("gang-deadlock-gang-scheduling", "gang-deadlock-per-pod", "driver-restart-mid-gang",
                   "preempt-gang-member"),
    ),
    Requirement(
        id="secure_accelerator_access", category="security", kar="KAR-0049",
        description="Ensure that access to accelerators from within containers is properly isolated and mediated by "
                    "the Kubernetes resource management framework (device plugin or DRA) and container runtime, "
                    "preventing unauthorized access or interference between workloads.",
        levels={r: "MUST" for r in CHECKLISTS},
        checks=("sanity.prepare.device-in-use", "sanity.prepare.foreign-node", "sanity.prepare.foreign-driver",
                "sanity.cdi.ids-resolve", "sanity.cdi.spec-removed", "sanity.unprepare.failed-release-retried",
                "sanity.unprepare.sharing-torn-down", "conformance.chaos.release-failure"),
        coverage="partial",
        covered="the driver's side of isolation: a device held by one claim is not prepared for another, claims of "
                "another node or driver are refused, a container is given its devices through CDI specs that exist "
                "and are removed at unprepare, and a device is released (reset) before it is given to the next claim",
        gap="draguard does not start containers on a real node to probe that a pod without a claim sees no "
            "accelerator, nor that one pod cannot open another pod's device (the container runtime's part, "
            "KAR-0049's test plan)",
        scenarios=("cdi-devices-correct-driver", "incomplete-cdi-spec", "double-allocation-handoff",
                   "reset-failure-correct-driver", "reset-leak-forget-before-reset", "shared-claim-no-strategy"),
    ),
)
"""The DRA-related requirements draguard gives evidence for; docs/ai-conformance.md lists the others."""

OTHER_REQUIREMENTS = ("driver_runtime_management", "virtualized_accelerator", "ai_inference",
                      "advanced_inference_ingress", "high_performance_networking", "disaggregated_inference",
                      "cluster_autoscaling", "pod_autoscaling", "accelerator_metrics", "ai_service_metrics",
                      "workload_sandboxing", "robust_controller")
"""The v1.37 checklist's other requirements: draguard gathers no evidence for them (docs/ai-conformance.md
says why for each)."""


def checklist_for(release: str | None) -> str:
    """The checklist for a cluster's release: its own, or the newest recorded for a newer release.
    :class:`UsageError` (exit 2) for a release older than the programme."""
    if release is None:
        return CHECKLISTS[-1]
    key = tuple(int(x) for x in release[1:].split("."))
    known = {tuple(int(x) for x in r[1:].split(".")): r for r in CHECKLISTS}
    if key < min(known):
        raise UsageError(f"--programme ai-conformance: Kubernetes {release} is older than the programme's first "
                         f"checklist ({CHECKLISTS[0]})")
    return known.get(key) or CHECKLISTS[-1]


def product_dir(product: Mapping[str, Any]) -> str:
    """The submission folder's name for the product: its name in lower-case kebab."""
    return re.sub(r"[^a-z0-9]+", "-", str(product.get("name", "")).lower()).strip("-") or "product"


def _status(req: Requirement, level: str, checks: Sequence[CheckResult]) -> tuple[str, str]:
    """The status the run supports and the notes saying why."""
    ran = [c for c in checks if c.status in ("passed", "failed", "error")]
    failed = [c for c in ran if c.status != "passed"]
    if failed:
        seen = "; ".join(f"{c.id} {c.status}: {c.reason}" for c in failed)
        return "Not Implemented", f"draguard saw the driver fail: {seen}."
    if ran:
        # The requirement's wording of what draguard covers holds only when every one of its checks ran:
        # a check skipped (or not selected) in this run leaves that part unseen, and the notes say so.
        unseen = [f"{c.id} ({c.status}: {c.reason})" if c.reason else f"{c.id} ({c.status})"
                  for c in checks if c.status not in ("passed", "failed", "error")]
        unseen += [f"{cid} (not run)" for cid in req.checks if cid not in {c.id for c in checks}]
        if unseen:
            passed = ", ".join(c.id for c in ran)
            return "Partially Implemented", (f"draguard checked {passed}; not checked in this run: {'; '.join(unseen)}. "
                                             "Run those checks, or add the platform's own evidence, then set the "
                                             "status to Implemented.")
        said = f"draguard checked that {req.covered}."
        if req.coverage == "full":
            return "Implemented", said
        return "Partially Implemented", f"{said} But {req.gap}; add that evidence, then set the status to Implemented."
    why = "; ".join(f"{c.id}: {c.reason or c.status}" for c in checks) or "none of its checks was in this run"
    absent = [cid for cid in req.checks if cid not in {c.id for c in checks}]
    if absent and checks:
        why += f"; not run: {', '.join(absent)}"
    if level == "SHOULD":
        return "N/A", f"does not apply to this driver as run: {why}."
    return "", f"draguard gathered no evidence for this MUST: {why}. Provide the platform's own evidence."


def _entry(req: Requirement, level: str, result: RunResult, link: str) -> dict[str, Any]:
    by_id = {c.id: c for c in result.checks}
    checks = [by_id[cid] for cid in req.checks if cid in by_id]
    status, notes = _status(req, level, checks)
    evidence = [f"{link}/junit_01.xml#{c.id}" for c in checks if c.status in ("passed", "failed", "error")]
    if evidence:
        evidence.append(f"{link}/e2e.log")
    return {"id": req.id, "description": req.description, "level": level, "status": status, "evidence": evidence,
            "notes": notes}


_META = (("platformName", "name"), ("platformVersion", "version"), ("vendorName", "vendor"),
         ("websiteUrl", "website_url"), ("repoUrl", "repo_url"), ("documentationUrl", "documentation_url"),
         ("productLogoUrl", "product_logo_url"), ("description", "description"),
         ("contactEmailAddress", "contact_email_address"), ("k8sConformanceUrl", "k8s_conformance_url"))


def fragment(result: RunResult, product: Mapping[str, Any], release: str | None) -> dict[str, Any]:
    """The PRODUCT.yaml fragment as data."""
    checklist = checklist_for(release)
    link = f"file://{checklist}/{product_dir(product)}"
    meta: dict[str, Any] = {"kubernetesVersion": checklist}
    meta.update({key: str(product.get(field) or "") for key, field in _META})
    spec: dict[str, list[dict[str, Any]]] = {}
    outside: list[dict[str, Any]] = []
    for req in REQUIREMENTS:
        level = req.level(checklist)
        if level is not None:
            spec.setdefault(req.category, []).append(_entry(req, level, result, link))
        elif req.off_checklist:
            last = max((r for r in req.levels), key=lambda r: tuple(int(x) for x in r[1:].split(".")))
            entry = _entry(req, req.levels[last], result, link)
            entry["notes"] = f"Not on the {checklist} checklist: {req.off_checklist}. {entry['notes']}"
            outside.append(entry)
    out: dict[str, Any] = {"metadata": meta, "spec": spec}
    if outside:
        out["outsideChecklist"] = outside
    return out


def _dump(data: Mapping[str, Any], header: str) -> str:
    buf = io.StringIO()
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.dump(dict(data), buf)
    return header + buf.getvalue()


@PROGRAMMES.register("ai-conformance", summary="CNCF Kubernetes AI Conformance: a PRODUCT.yaml fragment with evidence",
                     source="https://github.com/cncf/k8s-ai-conformance")
class AiConformance:
    """Render the fragment into the bundle; verify its links and the requirements it claims."""

    def preflight(self, release: str | None) -> None:
        checklist_for(release)

    def render(self, result: RunResult, product: Mapping[str, Any], submission: Mapping[str, Any]) -> dict[str, str]:
        release = release_of(submission.get("kubernetesVersion"))
        data = fragment(result, product, release)
        checklist = data["metadata"]["kubernetesVersion"]
        header = (f"# CNCF Kubernetes AI Conformance: the DRA-related requirements of the {checklist} checklist\n"
                  f"# (cncf/k8s-ai-conformance docs/AIConformance-{checklist[1:]}.yaml), filled in by draguard from "
                  f"run {result.run_id}.\n"
                  f"# Evidence links name this bundle's files as the submission folder "
                  f"{checklist}/{product_dir(product)}/ holds them.\n"
                  "# Merge these entries into the full checklist; the others are the platform's to fill in.\n")
        return {FRAGMENT: _dump(data, header)}

    def verify(self, view: BundleView, v: Verification) -> None:
        data = view.yaml(FRAGMENT)
        if data is None:
            v.problems.append(f"{FRAGMENT}: missing or not YAML (the bundle was made with --programme ai-conformance)")
            return
        cases = view.cases or {}
        checklist = str((data.get("metadata") or {}).get("kubernetesVersion") or "")
        wanted = release_of(view.submission.get("kubernetesVersion"))
        if wanted is not None and checklist != checklist_for(wanted):
            v.problems.append(f"{FRAGMENT}: kubernetesVersion {checklist!r} is not the checklist of the run's "
                              f"Kubernetes {wanted} ({checklist_for(wanted)})")
        known = {r.id: r for r in REQUIREMENTS}
        folder = f"{checklist}/{product_dir(view.yaml('PRODUCT.yaml') or {})}"
        placed = self._placed(data)
        if checklist in CHECKLISTS:
            self._as_the_checklist_says(checklist, placed, v)
        for where, entry in placed:
            rid = str(entry.get("id"))
            level = str(entry.get("level"))
            linked = [self._resolve(view, str(link), rid, folder, v) for link in entry.get("evidence") or ()]
            tested = [cases[name] for name in linked if name is not None and name in cases]
            req = known.get(rid)
            # A check of the requirement that failed leaves it unmet whether or not the entry links it.
            own = [cases[cid] for cid in (req.checks if req else ()) if cid in cases and cid not in linked]
            failed = [c for c in tested + own if c.status in ("failed", "error")]
            status = str(entry.get("status") or "")
            if failed:
                v.requirements.append(f"{rid} ({level}): not met: " + "; ".join(
                    f"{c.name} {c.status}: {c.message}" for c in failed))
                if status != "Not Implemented":
                    v.problems.append(f"{FRAGMENT}: {rid} says {status!r} but its evidence {failed[0].name} "
                                      f"{failed[0].status}")
                unlinked = [c.name for c in failed if c.name not in linked]
                if unlinked:
                    v.problems.append(f"{FRAGMENT}: {rid} does not link its failed check(s) {', '.join(unlinked)}")
            elif status in ("Implemented", "Partially Implemented"):
                if not any(c.status == "passed" for c in tested):
                    v.problems.append(f"{FRAGMENT}: {rid} says {status!r} but links no passing testcase")
                if status == "Implemented" and req is not None and req.coverage != "full":
                    v.problems.append(f"{FRAGMENT}: {rid} says 'Implemented' but draguard covers it partly: {req.gap}")
            elif status == "Not Implemented":
                v.requirements.append(f"{rid} ({level}): status 'Not Implemented': {entry.get('notes')}")
            elif status == "N/A" and not str(entry.get("notes") or "").strip():
                v.problems.append(f"{FRAGMENT}: {rid} is N/A without notes saying why")

    @staticmethod
    def _placed(data: Any) -> list[tuple[str, dict[str, Any]]]:
        """The fragment's entries with where each stands: ``spec`` or ``outsideChecklist``."""
        spec = data.get("spec") if isinstance(data, Mapping) else None
        out = [("spec", dict(e)) for items in (spec.values() if isinstance(spec, Mapping) else ())
               if isinstance(items, list) for e in items if isinstance(e, Mapping)]
        outside = data.get("outsideChecklist") if isinstance(data, Mapping) else None
        out += [("outsideChecklist", dict(e)) for e in outside or () if isinstance(e, Mapping)]
        return out

    @staticmethod
    def _as_the_checklist_says(checklist: str, placed: list[tuple[str, dict[str, Any]]], v: Verification) -> None:
        """Each DRA-related requirement of the checklist is there, in its place, with the checklist's ``id``,
        ``description`` and ``level`` (submitted unchanged: a MUST shown as a SHOULD would hide it)."""
        entries = {str(e.get("id")): (where, e) for where, e in placed}
        for req in REQUIREMENTS:
            level = req.level(checklist)
            want = "spec" if level is not None else "outsideChecklist" if req.off_checklist else None
            if want is None:
                continue
            said = f"the {checklist} checklist says"
            if level is None:
                last = max(req.levels, key=lambda r: tuple(int(x) for x in r[1:].split(".")))
                level, said = req.levels[last], f"its last checklist ({last}) says"
            if req.id not in entries:
                v.problems.append(f"{FRAGMENT}: {req.id} ({level} on the {checklist} checklist) is missing")
                continue
            where, entry = entries[req.id]
            if where != want:
                v.problems.append(f"{FRAGMENT}: {req.id} is under {where}, but the {checklist} checklist "
                                  f"{'lists' if want == 'spec' else 'does not list'} it")
            if str(entry.get("level")) != level:
                v.problems.append(f"{FRAGMENT}: {req.id} says level {entry.get('level')!r}; {said} {level!r}")
            if " ".join(str(entry.get("description") or "").split()) != " ".join(req.description.split()):
                v.problems.append(f"{FRAGMENT}: {req.id}'s description is not the checklist's (the programme "
                                  "takes it unchanged)")

    @staticmethod
    def _resolve(view: BundleView, link: str, rid: str, folder: str, v: Verification) -> str | None:
        """The testcase a link names (None for a file link without one); a problem when it does not resolve
        (a link into another submission folder than ``folder``, the bundle's ``vX.Y/<product>``, included)."""
        m = re.fullmatch(r"file://(?:(v\d+\.\d+/[^/#]+)/)?([^#]+)(?:#(.+))?", link)
        if m is None:
            v.problems.append(f"{FRAGMENT}: {rid}: evidence link {link!r} is not file://<path>[#<testcase>]")
            return None
        prefix, path, case = m.group(1), m.group(2), m.group(3)
        if prefix is not None and prefix != folder:
            v.problems.append(f"{FRAGMENT}: {rid}: evidence link {link!r} names the submission folder {prefix}/, "
                              f"not this bundle's {folder}/")
            return None
        target = (view.root / path).resolve()
        if view.root.resolve() not in target.parents or not target.is_file():
            v.problems.append(f"{FRAGMENT}: {rid}: evidence link {link!r} names no file of the bundle")
            return None
        if case is not None and case not in (view.cases or {}):
            v.problems.append(f"{FRAGMENT}: {rid}: evidence link {link!r} names no testcase of {path}")
            return None
        return case


def mapping_table() -> str:
    """The docs' table: requirement, levels, the checks giving evidence, coverage, what is not checked."""
    rows = ["| requirement | level by checklist | draguard checks (in the bundle) | coverage | not checked by draguard "
            "certify | scenarios (draguard run) |",
            "|---|---|---|---|---|---|"]
    for r in REQUIREMENTS:
        levels = ", ".join(f"{k} {v}" for k, v in r.levels.items())
        if r.off_checklist:
            levels += f"; not on {', '.join(c for c in CHECKLISTS if c not in r.levels)}"
        checks = "<br>".join(f"`{c}`" for c in r.checks)
        scenarios = "<br>".join(f"`{name}`" for name in r.scenarios) or "–"
        rows.append(f"| `{r.id}` ({r.kar}) | {levels} | {checks} | {r.coverage} | {r.gap or '–'} | {scenarios} |")
    return "\n".join(rows) + "\n"
