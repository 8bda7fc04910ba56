"""The certification bundle: a run's result laid out like a Kubernetes conformance submission.

:func:`write_bundle` renders a :class:`~draguard.harness.result.RunResult` (the sanity and
conformance checks of one driver) with the vendor's product description and the collected evidence
into a folder, and packs the folder as ``<folder>.tar.gz``::

    PRODUCT.yaml      vendor, product, version, type, description, URLs, contact, driver image or version
    junit_01.xml      the junit report (draguard.reports.junit), named as conformance submissions name it
    e2e.log           one readable block per check: rule, source, status, reason, evidence
    verdict.json      the result model (draguard.reports.verdict)
    environment.json  Kubernetes version, feature gates, draguard version, nodes, driver
    submission.json   the submission's Kubernetes version, profiles, required checks, programmes
    <programme>/      files a certification programme rendered (e.g. ai-conformance/PRODUCT.yaml)
    evidence/         claims, slices, events, gRPC call traces, logs (as collected)
    README.md         how the run was made and how to reproduce it
    sha256sum.txt     the manifest: ``sha256sum -c sha256sum.txt`` checks every other file

:func:`verify_bundle` checks a bundle (folder or ``.tar.gz``) against its manifest and its verdict;
the programmes' own checks (``draguard.conformance.programmes``) read the folder :func:`open_bundle`
gives them. The layout follows github.com/cncf/k8s-conformance (instructions.md: PRODUCT.yaml,
junit_01.xml, e2e.log, README.md); ``e2e.log`` carries the ``e2e test version:`` line that
kubernetes-sigs/verify-conformance matched against the submission's release (until 2023).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from email.utils import parseaddr
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError
from draguard.harness.result import ResultFormatError, RunResult

from .files import write_atomic
from .junit import to_xml
from .verdict import write_verdict

__all__ = ["PRODUCT_FIELDS", "URL_FIELDS", "MANIFEST", "SUBMISSION", "VERSION_LINE", "load_product",
           "validate_product", "product_problems", "write_bundle", "verify_bundle", "open_bundle", "verify_folder",
           "Verification", "e2e_log"]

PRODUCT_FIELDS = ("vendor", "name", "version", "type", "description", "website_url", "documentation_url",
                  "contact_email_address")
"""Fields PRODUCT.yaml must have (non-empty strings), the ones the verify-conformance bot requires
(kubernetes-sigs/verify-conformance, kodata/features/verify-conformance.feature); one of
``driver_image``/``driver_version`` too."""
URL_FIELDS = ("website_url", "documentation_url", "repo_url", "product_logo_url")
"""Fields that must be absolute http(s) URLs when present (the bot parses these four as URLs)."""
DRIVER_FIELDS = ("driver_image", "driver_version")
MANIFEST = "sha256sum.txt"
SUBMISSION = "submission.json"
REQUIRED_FILES = ("PRODUCT.yaml", "junit_01.xml", "e2e.log", "verdict.json", "environment.json", "README.md")
VERSION_LINE = re.compile(r"^.*e2e test version: (v\d+\.\d+)(\.\d+)?(\S*)$", re.M)
"""The ``e2e test version: v1.37.2`` line of ``e2e.log``; group 1 is the release (``v1.37``)."""


def product_problems(data: Any) -> list[str]:
    """What is wrong with a product description, one sentence each naming the field (empty: nothing)."""
    if not isinstance(data, Mapping):
        return [f"not a product description (expected a mapping with {', '.join(PRODUCT_FIELDS)})"]
    problems = []
    for key in PRODUCT_FIELDS:
        value = data.get(key)
        if not isinstance(value, str | int | float) or not str(value).strip():
            problems.append(f"missing field {key!r} (required: {', '.join(PRODUCT_FIELDS)}, and one of "
                            f"{' or '.join(DRIVER_FIELDS)})")
    if not any(str(data.get(k) or "").strip() for k in DRIVER_FIELDS):
        problems.append(f"missing field {DRIVER_FIELDS[0]!r} or {DRIVER_FIELDS[1]!r} (the driver under test)")
    for key in URL_FIELDS:
        value = data.get(key)
        if value is None or not str(value).strip():
            continue
        parts = urlsplit(str(value))
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in str(value)):
            problems.append(f"field {key!r} is not a URL: {value!r} (expected https://host/...)")
    email = data.get("contact_email_address")
    if isinstance(email, str) and email.strip():
        address = parseaddr(email)[1]
        local, _, domain = address.partition("@")
        if not local or "." not in domain or any(c.isspace() for c in email.strip()):
            problems.append(f"field 'contact_email_address' is not an email address: {email!r}")
    return problems


def validate_product(data: Any, where: str) -> dict[str, Any]:
    """The product description, or :class:`UsageError` (exit 2) naming the missing or malformed field."""
    problems = product_problems(data)
    if problems:
        raise UsageError(f"{where}: {problems[0]}")
    assert isinstance(data, Mapping)
    return {str(k): v for k, v in data.items()}


def load_product(path: Path) -> dict[str, Any]:
    """Read and validate ``product.yaml``; :class:`UsageError` (exit 2) naming the file and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the product description: {exc.strerror or exc}") from exc
    try:
        data = YAML(typ="safe").load(text)
    except YAMLError as exc:
        raise UsageError(f"{path}: not YAML: {exc}") from exc
    return validate_product(data, str(path))


def _yaml(data: Mapping[str, Any]) -> str:
    buf = io.StringIO()
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump(dict(data), buf)
    return buf.getvalue()


def e2e_log(result: RunResult) -> str:
    """The readable log: one block per check, then the totals."""
    lines = [f"draguard certification run {result.run_id}"]
    version = result.environment.get("kubernetes")
    if isinstance(version, str) and version.startswith("v"):
        lines.append(f"INFO: e2e test version: {version}")
    lines.append("")
    for c in result.checks:
        lines.append(f"[{c.status.upper()}] {c.id} ({c.duration:.1f}s)")
        lines.append(f"  rule:   {c.rule}")
        lines.append(f"  source: {c.source}")
        if c.reason:
            lines.append(f"  reason: {c.reason}")
        for e in c.evidence:
            lines.append(f"  evidence: {e.message}")
            if e.objects:
                lines.append(f"    objects: {', '.join(e.objects)}")
            if e.devices:
                lines.append(f"    devices: {', '.join(e.devices)}")
        lines.append("")
    counts = {s: sum(1 for c in result.checks if c.status == s) for s in ("passed", "failed", "skipped", "not-applicable", "error")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    lines.append("PASS" if result.ok else "FAIL")
    return "\n".join(lines) + "\n"


def _readme(product: Mapping[str, Any], result: RunResult, reproduce: str, extra: list[tuple[str, str]] | None = None) -> str:
    env = result.environment
    return (
        f"# DRA driver certification: {product['vendor']} {product['name']} {product['version']}\n\n"
        f"Made by draguard {env.get('draguardVersion', 'unknown')} against Kubernetes "
        f"{env.get('kubernetes', 'unknown')}; verdict: **{'PASS' if result.ok else 'FAIL'}**.\n\n"
        "## Reproduce\n\n"
        "With the driver installed in a cluster and a kubeconfig for it:\n\n"
        f"```sh\n{reproduce}\n```\n\n"
        "## Check this bundle\n\n"
        f"```sh\nsha256sum -c {MANIFEST}\ndraguard certify --verify .\n```\n\n"
        "## Files\n\n"
        "- `PRODUCT.yaml`: the product\n- `junit_01.xml`: one testcase per check\n"
        "- `e2e.log`: each check's rule, source, outcome and evidence\n- `verdict.json`: the result\n"
        "- `environment.json`: Kubernetes version, feature gates, draguard version, nodes, driver\n"
        "- `evidence/`: claims, slices, events, gRPC call traces and logs collected during the run\n"
        + "".join(f"- `{name}`: {what}\n" for name, what in extra or ())
        + f"- `{MANIFEST}`: SHA-256 of every other file\n"
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def write_bundle(
    result: RunResult,
    out: Path,
    product: Mapping[str, Any],
    *,
    environment: Mapping[str, Any],
    evidence: Mapping[str, str | bytes] | None = None,
    reproduce: str = "",
    submission: Mapping[str, Any] | None = None,
    rendered: Mapping[str, str] | None = None,
) -> Path:
    """Write the bundle folder ``out`` and ``out``.tar.gz; returns the archive's path.

    ``evidence`` maps paths under ``evidence/`` to their contents; ``submission`` (Kubernetes
    version, profiles, required checks, programmes) is written as ``submission.json``; ``rendered``
    maps paths under the bundle to what a programme rendered. The product is validated first,
    so a bad product description writes nothing.
    """
    product = validate_product(product, "PRODUCT.yaml")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "PRODUCT.yaml", _yaml(product))
    write_atomic(out / "junit_01.xml", to_xml(result))
    write_atomic(out / "e2e.log", e2e_log(result))
    write_verdict(result, out)
    write_atomic(out / "environment.json", json.dumps(dict(environment), indent=2, default=str) + "\n")
    extra = ([(SUBMISSION, "the submission's Kubernetes version, profiles, required checks and programmes")]
             if submission is not None else []) + [(rel, "rendered for a certification programme")
                                                   for rel in sorted(rendered or {})]
    write_atomic(out / "README.md", _readme(product, result, reproduce, extra))
    if submission is not None:
        write_atomic(out / SUBMISSION, json.dumps(dict(submission), indent=2) + "\n")
    for rel, text in dict(rendered or {}).items():
        target = out / rel
        if target.resolve().parent != out.resolve() and out.resolve() not in target.resolve().parents:
            raise ValueError(f"bundle file {rel!r} is outside the bundle")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, text)
    for rel, content in dict(evidence or {}).items():
        target = out / "evidence" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            write_atomic(target, content)
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    write_atomic(out / MANIFEST, "".join(f"{_digest(p)}  {p.relative_to(out).as_posix()}\n" for p in files))
    archive = out.with_name(out.name + ".tar.gz")
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    tmp.replace(archive)
    return archive


@dataclass
class Verification:
    """What :func:`verify_bundle` and the programmes found; ``exit_code`` 0 verified and passed, 1 a
    problem, a failed check or an unmet requirement, 2 not a bundle."""

    bundle: Path
    exit_code: int = EXIT_OK
    problems: list[str] = field(default_factory=list)
    """The bundle itself is wrong: a file changed, missing or empty, a field, a line, a link."""
    failed_checks: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    """A programme's requirement the run's checks do not meet, with the check and the reason."""
    passed: int = 0
    skipped: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    def settle(self) -> Verification:
        """Set ``exit_code`` from what was found."""
        self.exit_code = EXIT_FAILED if self.problems or self.failed_checks or self.requirements else EXIT_OK
        return self


def _verify_dir(root: Path, v: Verification) -> None:
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise UsageError(f"{v.bundle}: not a certification bundle (no {MANIFEST})")
    listed: dict[str, str] = {}
    for n, line in enumerate(manifest.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise UsageError(f"{manifest}: line {n} is not '<sha256>  <file>'")
        listed[name] = digest
    v.problems += [f"{name}: not in the bundle (its {MANIFEST} does not list it)" for name in REQUIRED_FILES
                   if name not in listed]
    for name, digest in sorted(listed.items()):
        path = root / name
        if not path.is_file():
            v.problems.append(f"{name}: listed in {MANIFEST} but missing")
        elif _digest(path) != digest:
            v.problems.append(f"{name}: changed since the bundle was written (sha256 does not match {MANIFEST})")
    extra = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if p.is_file() and p.name != MANIFEST and p.relative_to(root).as_posix() not in listed)
    v.problems += [f"{name}: not listed in {MANIFEST}" for name in extra]
    try:
        result = RunResult.from_dict(json.loads((root / "verdict.json").read_text(encoding="utf-8")),
                                     where=str(root / "verdict.json"))
    except (OSError, ValueError, ResultFormatError) as exc:
        v.problems.append(f"verdict.json: cannot be read: {exc}")
        return
    v.failed_checks = [f"{c.id} ({c.status}: {c.reason})" for c in result.checks if c.status in ("failed", "error")]
    v.passed = sum(1 for c in result.checks if c.status == "passed")
    v.skipped = sum(1 for c in result.checks if c.status == "skipped")
    if not v.passed:
        v.problems.append("verdict.json: no check passed")


@contextlib.contextmanager
def open_bundle(bundle: Path) -> Iterator[Path]:
    """The bundle's folder: ``bundle`` itself, or a ``.tar.gz`` unpacked into a temporary folder
    (removed afterwards). :class:`UsageError` (exit 2) when it is neither."""
    if bundle.is_dir():
        yield bundle
    elif bundle.is_file() and tarfile.is_tarfile(bundle):
        with tempfile.TemporaryDirectory(prefix="dgverify") as tmp:
            try:
                with tarfile.open(bundle) as tar:
                    tar.extractall(tmp, filter="data")
            except (tarfile.TarError, OSError) as exc:
                raise UsageError(f"{bundle}: not a certification bundle (cannot unpack: {exc})") from exc
            tops = [p for p in Path(tmp).iterdir()]
            yield tops[0] if len(tops) == 1 and tops[0].is_dir() else Path(tmp)
    else:
        raise UsageError(f"{bundle}: not a certification bundle (neither a folder nor a .tar.gz)")


def verify_folder(root: Path, bundle: Path | None = None) -> Verification:
    """Check the unpacked bundle ``root`` against its manifest and its verdict (``bundle`` names it)."""
    v = Verification(bundle or root)
    _verify_dir(root, v)
    return v.settle()


def verify_bundle(bundle: Path) -> Verification:
    """Check ``bundle`` (a folder or a ``.tar.gz``) against its manifest, and whether every check passed.

    Raises :class:`UsageError` (exit 2) when ``bundle`` is not a bundle at all.
    """
    with open_bundle(bundle) as root:
        return verify_folder(root, bundle)

