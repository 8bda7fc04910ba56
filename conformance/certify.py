"""``draguard certify``: run the sanity suite (when the driver's sockets are given) and the cluster suite,
and write the certification bundle (:mod:`draguard.reports.bundle`).

The product description is validated before anything runs (a missing field is exit 2 naming it),
and so is what the run needs (exit 2 naming it, before either suite starts): a socket at each socket
path given, the programmes' Kubernetes release, a ``--device-class`` that selects some published
device (:func:`draguard.harness.cluster.preflight.require_allocatable`), the ``--namespace`` given, and,
with the driver's sockets, the node they serve (``--node``, or the one node its slices name).
The bundle's evidence is what the run saw: the driver's ResourceSlices, each conformance check's
claims, pods and events, the sanity suite's gRPC call trace, and the fake driver's logs when
node access to it was given. Its environment: Kubernetes version, feature gates, draguard version,
the nodes' kubelet and OS versions, the driver (from the product description and its slices).

``submission.json`` records the submission's Kubernetes version, the profiles, the checks each
profile requires (:func:`required_checks`: a required check may not be skipped) and the programmes
(``--programme``, :mod:`draguard.conformance.programmes`) whose files were rendered into the bundle.
:func:`verify` checks a bundle: its manifest and verdict, the verify-conformance bot's checks, and
each of its programmes' own.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draguard.harness.cluster.preflight import require_allocatable
from draguard.harness.core.environment import run_environment
from draguard.harness.core.errors import HarnessError, UsageError
from draguard.harness.core.registry import CHECKS
from draguard.harness.kube import ApiError, Kube
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.bundle import Verification, load_product, open_bundle, verify_folder, write_bundle

from .cluster import PROFILES, ClusterConfig, CommandAccess, FakeDriverAccess, cluster_checks, run_conformance
from .programmes import PROGRAMMES, BundleView, programme, release_of
from .sanity import CommandHooks, FakeDriverHooks, SanityConfig, require_node, require_sockets, run_sanity
from .sanity.capabilities import load_capabilities

__all__ = ["CertifyOptions", "certify", "parse_profiles", "parse_programmes", "required_checks", "verify",
           "OPTIONAL_SANITY_AREAS"]

OPTIONAL_SANITY_AREAS = ("health", "cdi")
"""Sanity areas a driver may lack (a health stream, CDI): their checks are never required."""


def required_checks(profiles: tuple[str, ...] | list[str], sanity: bool) -> list[str]:
    """The checks a bundle of these profiles must show run (passed, failed or not applicable, never skipped):
    each chosen profile's checks that need nothing beyond the API (no node access, restart, second node,
    optional API), and, when the sanity suite ran, its checks that need no fault hook and test no
    capability a driver may lack (partitionable devices...), outside the optional areas (health stream, CDI)."""
    required = [e.name for e in cluster_checks(tuple(profiles)) if not e.meta.get("needs")]
    if sanity:
        required += [e.name for e in CHECKS if e.name.startswith("sanity.") and not e.meta.get("needs")
                     and not e.meta.get("capability")  # a capability a driver may lack (--capabilities)
                     and e.meta.get("area") not in OPTIONAL_SANITY_AREAS]
    return sorted(required)


def parse_programmes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--programme ai-conformance`` → the programmes; exit 2 for an unknown one."""
    chosen = [p.strip() for v in values for p in v.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PROGRAMMES]
    if unknown:
        raise UsageError(f"--programme: unknown programme {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(PROGRAMMES.names())}")
    return tuple(dict.fromkeys(chosen))


def parse_profiles(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--profile core,gang --profile chaos`` → the profiles; all when none given; exit 2 for an unknown one."""
    chosen = [p.strip() for v in values for p in v.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PROFILES]
    if unknown:
        raise UsageError(f"--profile: unknown profile {', '.join(map(repr, unknown))}; known: {', '.join(PROFILES)}")
    return tuple(dict.fromkeys(chosen)) or PROFILES


@dataclass
class CertifyOptions:
    kubeconfig: Path
    driver: str
    device_class: str
    product: Path
    out: Path
    profiles: tuple[str, ...] = PROFILES
    context: str | None = None
    nodes: str | None = None
    registration_socket: Path | None = None
    plugin_socket: Path | None = None
    node: str | None = None
    cdi_dir: Path | None = None
    restart_command: str | None = None
    fake_driver_root: Path | None = None
    capabilities: Path | None = None
    """What the driver declares it supports (sanity ``--capabilities``); read before the cluster is touched."""
    idempotent_count: int = 10
    wait_timeout: float = 60.0
    namespace: str | None = None
    """An existing namespace both suites create their objects in (they delete only what they made);
    by default each makes a namespace of its own."""
    programmes: tuple[str, ...] = ()
    """Programmes whose files to render into the bundle (``--programme``)."""
    argv: list[str] = field(default_factory=list)
    """The command line, for the bundle's README (how to reproduce)."""


class _WithoutCrash:
    """The fake driver's hooks without ``crash_in_prepare`` and ``restart``: with no way to restart the
    driver, a crash would leave it dead for every check after it (the checks needing them skip)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("crash_in_prepare", "restart"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def node_access(fake_driver_root: Path | None, driver: str, restart_command: str | None) -> Any:
    """The cluster suite's node access from the CLI options (None: API-only checks)."""
    if fake_driver_root is not None:
        return FakeDriverAccess(fake_driver_root, driver, restart_command=restart_command)
    if restart_command:
        return CommandAccess(restart_command)
    return None


def _environment(kube: Kube, driver: str, product: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = run_environment()
    try:
        env["kubernetes"] = kube.server_version().get("gitVersion")
    except (ApiError, HarnessError) as exc:
        env["kubernetes"] = f"unknown: {exc}"
    env["featureGates"] = kube.feature_gates() or "not observable (no access to /metrics)"
    try:
        env["nodes"] = {n["metadata"]["name"]: {k: n.get("status", {}).get("nodeInfo", {}).get(k)
                                                for k in ("kubeletVersion", "osImage", "containerRuntimeVersion")}
                        for n in kube.items("Node")}
    except (ApiError, HarnessError) as exc:
        env["nodes"] = f"cannot list nodes: {exc}"
    env["driver"] = {"name": driver, "image": product.get("driver_image"), "version": product.get("driver_version")}
    return env


def certify(opts: CertifyOptions, on_result: Callable[[CheckResult], None] | None = None) -> tuple[RunResult, Path]:
    """Run the suites and write the bundle; returns the merged result and the archive's path."""
    product = load_product(opts.product)
    declared = load_capabilities(opts.capabilities) if opts.capabilities is not None else None
    if opts.out.exists() and not opts.out.is_dir():
        raise UsageError(f"--out {opts.out}: exists and is not a folder")
    require_sockets(opts.registration_socket, opts.plugin_socket)
    kube = Kube.from_kubeconfig(opts.kubeconfig, opts.context)
    env = _environment(kube, opts.driver, product)
    release = release_of(env.get("kubernetes"))
    for name in opts.programmes:
        programme(name).preflight(release)
    # Pre-flight, before either suite starts: with nothing allocatable every cluster check would only
    # record that cause (and the sanity suite, run first, would take its minutes for a bundle of nothing).
    require_allocatable(kube, opts.device_class, where=str(opts.kubeconfig))
    if opts.namespace is not None and kube.get("Namespace", opts.namespace) is None:
        raise UsageError(f"--namespace {opts.namespace}: no such namespace in the cluster")
    node = opts.node
    if opts.registration_socket is not None:  # the node whose sockets were given, if not named
        node = require_node(opts.kubeconfig, opts.context, opts.driver, opts.node)
    result = RunResult(run_id="certify")
    evidence: dict[str, str | bytes] = {}
    if opts.registration_socket is not None:
        with tempfile.TemporaryDirectory(prefix="dgcert") as tmp:
            trace = Path(tmp) / "grpc-calls.jsonl"
            hooks: Any = None
            restart = CommandHooks(opts.restart_command, node=node) if opts.restart_command else None
            if opts.fake_driver_root is not None and node is not None:
                hooks = FakeDriverHooks(opts.fake_driver_root, node, opts.driver, process=restart)
                if restart is None:
                    hooks = _WithoutCrash(hooks)
            elif restart is not None:
                hooks = restart
            sanity = run_sanity(SanityConfig(
                registration_socket=opts.registration_socket.absolute(), kubeconfig=opts.kubeconfig, driver=opts.driver,
                plugin_socket=opts.plugin_socket, node=node, cdi_dir=opts.cdi_dir, context=opts.context,
                trace=trace, capabilities=declared, idempotent_count=opts.idempotent_count, namespace=opts.namespace),
                hooks, on_result=on_result)
            result.checks += sanity.checks
            env["sanity"] = sanity.environment
            if trace.exists():
                evidence["grpc-calls.jsonl"] = trace.read_bytes()
    else:
        env["sanity"] = "not run: no --registration-socket given (the gRPC contract checks need the driver's sockets)"
    collected: dict[str, Any] = {}
    access = node_access(opts.fake_driver_root, opts.driver, opts.restart_command)
    conformance = run_conformance(ClusterConfig(
        kubeconfig=opts.kubeconfig, driver=opts.driver, device_class=opts.device_class, context=opts.context,
        nodes=opts.nodes, profiles=opts.profiles, wait_timeout=opts.wait_timeout, namespace=opts.namespace), access,
        on_result, collected)
    result.checks += conformance.checks
    result.run_id = conformance.run_id.replace("conformance-", "certify-")
    env["conformance"] = conformance.environment
    result.environment = {"draguardVersion": env.get("draguardVersion"), "kubernetes": env.get("kubernetes"),
                          "driver": opts.driver, "deviceClass": opts.device_class, "profiles": list(opts.profiles)}
    evidence["slices.json"] = json.dumps(collected.pop("slices", []), indent=1)
    for check_id, objs in collected.items():
        for kind, items in objs.items():
            evidence[f"checks/{check_id}/{kind.lower()}s.json"] = json.dumps(items, indent=1)
    if opts.fake_driver_root is not None:
        for log in sorted(opts.fake_driver_root.glob("**/*.log")):
            evidence[f"logs/{log.relative_to(opts.fake_driver_root).as_posix()}"] = log.read_bytes()[-1_000_000:]
    reproduce = "draguard " + " ".join(shlex.quote(a) for a in opts.argv) if opts.argv else ""
    submission = {"kubernetesVersion": env.get("kubernetes"), "release": release, "profiles": list(opts.profiles),
                  "sanity": opts.registration_socket is not None,
                  "requiredChecks": required_checks(opts.profiles, opts.registration_socket is not None),
                  "programmes": list(opts.programmes)}
    files: dict[str, str] = {}
    for name in opts.programmes:
        files.update(programme(name).render(result, product, submission))
    archive = write_bundle(result, opts.out, product, environment=env, evidence=evidence, reproduce=reproduce,
                           submission=submission, rendered=files)
    return result, archive


def verify(bundle: Path) -> Verification:
    """Check a bundle (folder or ``.tar.gz``): its manifest and verdict, the verify-conformance bot's
    checks, and those of every programme it was made for. :class:`UsageError` (exit 2) when it is not one."""
    with open_bundle(bundle) as root:
        v = verify_folder(root, bundle)
        view = BundleView(root)
        names = ["verify-conformance"] + [str(n) for n in view.submission.get("programmes") or ()]
        for name in dict.fromkeys(names):
            if name not in PROGRAMMES:
                v.problems.append(f"submission.json: unknown programme {name!r}")
                continue
            programme(name).verify(view, v)
    return v.settle()
