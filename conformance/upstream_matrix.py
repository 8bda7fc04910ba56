"""The upstream kill matrix: which of draguard's suites catch each planted bug of the upstream test driver.

For each variant of :mod:`draguard.harness.driver.upstream_variants` (and the driver as released), as a
vendor would run their own driver:

- ``sanity``: the gRPC contract suite against the driver on one fake node of a local control plane, with
  its CDI folder and a restart hook (what ``--cdi-dir`` and ``--restart-command`` give);
- ``conformance``: the cluster suite against the driver on two fake nodes, with restart hooks for the driver
  and the node agents (``--restart-command``, ``--kubelet-restart-command``), the nodes' CDI folders
  (``--cdi-dir``), and the gRPC interposer in front of the driver, as ``draguard run`` puts it on a local
  control plane: the driver's calls are judged check by check (``conformance.driver-calls.*``);
- ``library``: ``draguard run scenarios/ --cluster local --driver test-driver.cdi.k8s.io --device-class
  test-gpus`` with ``DRAGUARD_TEST_DRIVER_VARIANT`` set, the scenarios that apply to that driver.

A suite **catches** a variant when it reports a failure that the driver as released does not: a check
failed (or in error) that passed on it, or a scenario that met there and did not here, with the detectors
named (the checks; the scenario and its violated invariants, failed steps or expectations). The library's
runs record every invariant's status, so the matrix also says which variants are caught without the
invariants named in ``--new`` (the figures before they existed), from the same runs.

Written as ``upstream-kill-matrix.json``; :mod:`draguard.reports.upstream_kill_matrix` renders the
Markdown. Run as ``python -m draguard.conformance.upstream_matrix --out DIR [--variant V ...]``; a variant's
record in ``DIR`` keeps the suites a later measurement does not run (``--suite conformance`` measures that
column again and leaves the sanity and library ones as they were).

Talks to: the local control plane (:mod:`draguard.harness.cluster.local`), the fake node agents, the
upstream driver's processes, the suites (:mod:`draguard.conformance`), ``draguard run`` as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError

from draguard.harness.cluster import binaries
from draguard.harness.cluster.local import LocalCluster
from draguard.harness.driver.external import (
    TEST_DRIVER_NAME,
    ExternalPluginProcess,
    delete_published_slices,
    external_device_class,
    find_test_driver,
)
from draguard.harness.driver.upstream_variants import VARIANT_ENV, VARIANTS, Variant, build_variant, get_variant
from draguard.harness.nodes import FakeNodesProcess
from draguard.harness.proxy import Interposer

__all__ = ["SUITES", "measure_variant", "caught", "main", "LIBRARY"]

SUITES = ("sanity", "conformance", "library")
LIBRARY = Path(__file__).resolve().parents[1] / "scenarios"
DEVICE_CLASS = "test-gpus"

Say = Callable[[str], None]


def _binary(name: str) -> Path:
    return find_test_driver() if name == Variant.name else build_variant(name, progress=lambda _: None)


class _Restart:
    """Restart hooks for both suites: stop and start the driver's process (``--restart-command``), and the
    fake node agents' process (``--kubelet-restart-command``: it serves both nodes, so both restart)."""

    def __init__(self, procs: dict[str, ExternalPluginProcess], node: str | None = None,
                 agent: FakeNodesProcess | None = None) -> None:
        self.procs, self.node, self.agent = procs, node, agent

    def restart(self, node: str | None = None) -> None:
        proc = self.procs[node or self.node or next(iter(self.procs))]
        proc.stop()
        proc.start()

    def restart_kubelet(self, node: str) -> None:
        if self.agent is None:
            raise NotImplementedError("no node agent process")
        self.agent.restart()

    def clear(self) -> None:
        pass


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _suites(name: str, chosen: tuple[str, ...], say: Say, select: tuple[str, ...] = ()) -> dict[str, Any]:
    """Sanity and conformance against variant ``name`` on a local control plane of their own (``select``:
    only the conformance checks matching these globs)."""
    from draguard.conformance.cluster import ClusterConfig, run_conformance
    from draguard.conformance.sanity import SanityConfig, run_sanity

    out: dict[str, Any] = {}
    binary = _binary(name)
    tag = uuid.uuid4().hex[:6]
    with LocalCluster(f"uvm-{tag}", progress=lambda _: None, remove_on_exit=True) as cluster:
        kube = cluster.kube()
        nodes = [f"uvm-{tag}-{i}" for i in range(2)]
        root = Path(tempfile.mkdtemp(prefix="uvm", dir="/tmp"))
        # The driver serves its sockets under <root>-plugins; the interposer serves them where the nodes look.
        plugins = Path(f"{root}-plugins")
        interposer = Interposer(plugins, root, record=root / "calls.jsonl", run_label=f"uvm-{tag}").start()
        agent = FakeNodesProcess(cluster.kubeconfig, nodes, root=root, run_label=f"uvm-{tag}", log=root / "nodes.log",
                                 extra_args=["--heartbeat-interval", "1", "--backoff-max", "1"])
        procs: dict[str, ExternalPluginProcess] = {}
        try:
            agent.start()
            kube.create(external_device_class(DEVICE_CLASS))
            for n in nodes:
                procs[n] = ExternalPluginProcess(cluster.kubeconfig, n, root=plugins, devices=4, binary=binary,
                                                 node_root=root).start()

            def published() -> bool:
                items, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={TEST_DRIVER_NAME}")
                return set(nodes) <= {s["spec"].get("nodeName") for s in items if s["spec"].get("devices")}

            _wait(published, "the driver's slices")
            if "sanity" in chosen:
                started = time.monotonic()
                p = procs[nodes[0]]
                config = SanityConfig(registration_socket=p.registration_socket, kubeconfig=Path(cluster.kubeconfig),
                                      driver=TEST_DRIVER_NAME, plugin_socket=p.dra_socket, node=nodes[0],
                                      cdi_dir=p.cdi_dir)
                result = run_sanity(config, _Restart(procs, nodes[0]))
                out["sanity"] = {"checks": {c.id: c.status for c in result.checks},
                                 "reasons": {c.id: c.reason for c in result.checks if c.status in ("failed", "error")},
                                 "seconds": round(time.monotonic() - started, 1)}
                say(f"  sanity: {sum(1 for c in result.checks if c.status in ('failed', 'error'))} failed "
                    f"({time.monotonic() - started:.0f}s)")
            if "conformance" in chosen:
                started = time.monotonic()
                cconfig = ClusterConfig(kubeconfig=Path(cluster.kubeconfig), driver=TEST_DRIVER_NAME,
                                        device_class=DEVICE_CLASS, wait_timeout=45.0, select=select,
                                        cdi_dir=str(root / "{node}" / "cdi"))
                cresult = run_conformance(cconfig, _Restart(procs, agent=agent), calls=interposer.recorder)
                out["conformance"] = {"checks": {c.id: c.status for c in cresult.checks},
                                      "reasons": {c.id: c.reason for c in cresult.checks if c.status in ("failed", "error")},
                                      "seconds": round(time.monotonic() - started, 1)}
                say(f"  conformance: {sum(1 for c in cresult.checks if c.status in ('failed', 'error'))} failed "
                    f"({time.monotonic() - started:.0f}s)")
        finally:
            for proc in procs.values():
                proc.stop()
            agent.stop()
            interposer.stop()
            for n in nodes:
                delete_published_slices(kube, n)
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(plugins, ignore_errors=True)
    return out


def library_summary(verdict: Path) -> dict[str, Any]:
    """Each scenario of a ``draguard run`` verdict: its outcome, the invariants it saw violated, and what
    else kept it from being met (unmet invariants, failed steps, unmet expectations, an error)."""
    scenarios: dict[str, Any] = {}
    for s in json.loads(verdict.read_text()).get("scenarios") or ():
        invariants = s.get("invariants") or {}
        scenarios[s["name"]] = {
            "outcome": s.get("outcome"),
            "violated": sorted(k for k, v in invariants.items() if v.get("status") == "violated"),
            "unmet": sorted(k for k, v in invariants.items() if v.get("met") is False),
            "failedSteps": sorted(f"step {st.get('name')}" for st in s.get("steps") or ()
                                  if st.get("status") != "ok" and not st.get("optional")),
            "unmetExpectations": sorted(f"{e.get('kind')} {e.get('rule')}" for e in s.get("expectationResults") or ()
                                        if not e.get("met")),
            "error": s.get("error"),
        }
    return scenarios


def _library(name: str, report: Path, say: Say) -> dict[str, Any]:
    """The library retargeted to variant ``name``: each scenario's outcome and invariants' statuses."""
    started = time.monotonic()
    env = {**os.environ, VARIANT_ENV: name, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "draguard.cli", "run", str(LIBRARY), "--cluster", "local", "--driver",
                           TEST_DRIVER_NAME, "--device-class", DEVICE_CLASS, "--report", "json", "--report-dir",
                           str(report)], env=env, capture_output=True, text=True, check=False, timeout=7200)
    (report / "run.log").write_text(done.stdout + done.stderr)
    scenarios = library_summary(report / "verdict.json")
    ran = sum(1 for s in scenarios.values() if s["outcome"] != "not-applicable")
    say(f"  library: exit {done.returncode}, {ran} scenario(s) applied, "
        f"{sum(1 for s in scenarios.values() if s['outcome'] not in ('met', 'not-applicable'))} not met "
        f"({time.monotonic() - started:.0f}s)")
    return {"exit": done.returncode, "scenarios": scenarios, "seconds": round(time.monotonic() - started, 1)}


def measure_variant(name: str, out: Path, suites: Iterable[str] = SUITES, say: Say = print,
                    select: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run the chosen suites against variant ``name``; written to ``out/<name>.json`` as well, over the
    suites of a record already there that were not run now."""
    get_variant(name)
    chosen = tuple(suites)
    say(f"{name}: {get_variant(name).describe()}")
    kept = out / f"{name}.json"
    record: dict[str, Any] = {k: v for k, v in (json.loads(kept.read_text()) if kept.is_file() else {}).items()
                              if k in SUITES and k not in chosen}
    record.update({"variant": name, "bug": get_variant(name).describe()})
    if {"sanity", "conformance"} & set(chosen):
        record.update(_suites(name, chosen, say, select))
    if "library" in chosen:
        record["library"] = _library(name, out / name / "library", say)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def _failed_checks(record: dict[str, Any], suite: str) -> set[str]:
    return {k for k, v in ((record.get(suite) or {}).get("checks") or {}).items() if v in ("failed", "error")}


def caught(record: dict[str, Any], baseline: dict[str, Any], suite: str, without: Iterable[str] = ()) -> list[str]:
    """The detectors by which ``suite`` told ``record``'s variant from the released driver (``baseline``);
    empty when it did not. ``without``: invariants whose violations are not counted (the library)."""
    if suite != "library":
        return sorted(_failed_checks(record, suite) - _failed_checks(baseline, suite))
    left_out = set(without)
    base = (baseline.get("library") or {}).get("scenarios") or {}
    found = []
    for name, s in sorted(((record.get("library") or {}).get("scenarios") or {}).items()):
        b = base.get(name) or {}
        if s["outcome"] in ("met", "not-applicable") or b.get("outcome") in ("not-applicable", None):
            continue
        # What the released driver fails too (a scenario it does not meet) tells nothing about the variant.
        unmet = [v for v in s.get("unmet") or () if v not in left_out and v not in (b.get("unmet") or ())]
        seen = {*(b.get("failedSteps") or ()), *(b.get("unmetExpectations") or ())}
        other = [x for x in (*(s.get("failedSteps") or ()), *(s.get("unmetExpectations") or ())) if x not in seen]
        other += [f"error: {s['error']}"[:120]] if s.get("error") and not b.get("error") else []
        if unmet or other:
            found.append(f"{name} ({', '.join([*unmet, *other])})")
    return found


def matrix(records: dict[str, dict[str, Any]], new: Iterable[str], command: str,
           notes: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON of the matrix from per-variant records (``unmodified`` among them)."""
    baseline = records[Variant.name]
    new = tuple(new)
    rows = []
    for name in [n for n in VARIANTS if n in records]:
        rec = records[name]
        row: dict[str, Any] = {"variant": name, "bug": rec.get("bug", ""), "digest": get_variant(name).digest()}
        for suite in SUITES:
            if suite not in rec:
                continue
            row[suite] = {"caught": caught(rec, baseline, suite)}
            if suite == "library":
                row[suite]["caughtWithoutNew"] = caught(rec, baseline, suite, without=new)
        rows.append(row)
    falsepos = {}
    if "library" in baseline:
        falsepos["library"] = sorted(f"{n} ({', '.join(s.get('unmet') or ()) or s['outcome']})"
                                     for n, s in baseline["library"]["scenarios"].items()
                                     if s["outcome"] not in ("met", "not-applicable"))
    for suite in ("sanity", "conformance"):
        if suite in baseline:
            falsepos[suite] = sorted(_failed_checks(baseline, suite))
    seconds = {n: {s: (r.get(s) or {}).get("seconds") for s in SUITES if s in r} for n, r in records.items()}
    return {
        "version": 1,
        "measuredAt": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node() or 'unknown'} ({os.cpu_count()} cores, {platform.machine()}), "
                   f"Kubernetes {binaries.K8S_VERSION}",
        "command": command,
        "newInvariants": list(new),
        "unmodified": {"failsAlready": falsepos,
                       "libraryApplied": sorted(n for n, s in ((baseline.get("library") or {}).get("scenarios") or {}).items()
                                                if s["outcome"] != "not-applicable")},
        "variants": rows,
        "notes": list(notes),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m draguard.conformance.upstream_matrix")
    ap.add_argument("--out", type=Path, required=True, help="folder of the per-variant records")
    ap.add_argument("--variant", action="append", default=[], help="measure only these (repeatable)")
    ap.add_argument("--suite", action="append", choices=SUITES, default=[], help="only these suites (repeatable)")
    ap.add_argument("--check", action="append", default=[],
                    help="only the conformance checks whose id matches this glob (repeatable)")
    ap.add_argument("--combine", action="store_true", help="measure nothing: combine the records in --out")
    ap.add_argument("--new", action="append", default=[], help="invariants new in this measurement (repeatable)")
    ap.add_argument("--json", type=Path, help="write the matrix JSON here (with --combine)")
    ap.add_argument("--note", action="append", default=[], help="a sentence the matrix carries (repeatable)")
    ap.add_argument("--command", default="python -m draguard.conformance.upstream_matrix --out DIR",
                    help="how the records were measured, as the matrix says")
    args = ap.parse_args(argv)
    if not args.combine:
        for name in args.variant or [Variant.name, *VARIANTS]:
            try:
                measure_variant(name, args.out, args.suite or SUITES, select=tuple(args.check))
            except Exception as exc:  # one variant that cannot be measured does not stop the others
                print(f"{name}: not measured: {exc}", flush=True)
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{name}.error").write_text(f"{type(exc).__name__}: {exc}\n")
        return 0
    records = {p.stem: json.loads(p.read_text()) for p in sorted(args.out.glob("*.json"))}
    for name, rec in records.items():  # the verdicts as they are read now
        verdict = args.out / name / "library" / "verdict.json"
        if "library" in rec and verdict.is_file():
            rec["library"]["scenarios"] = library_summary(verdict)
    data = matrix(records, args.new, args.command, args.note)
    text = json.dumps(data, indent=1) + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
