"""``verify-conformance``: the checks kubernetes-sigs/verify-conformance (the bot that reviews
cncf/k8s-conformance submissions) makes, applied to a draguard bundle; run on every ``certify --verify``.

The bot's scenarios (kodata/features/verify-conformance.feature) and what they become here:

- the required files (README.md, PRODUCT.yaml, e2e.log, junit_01.xml) are present, not empty and of
  their type (YAML parses, XML parses);
- PRODUCT.yaml has the required non-empty fields and its URL fields parse as URLs, its contact as an
  email address (the bot also fetches the URLs for a text/html content type; offline, this checks
  that each is an absolute http(s) URL);
- ``e2e.log`` carries the ``e2e test version:`` line and its release is the submission's (the bot
  checked this until 2023, internal/suite: "the e2e.log output contains the Kubernetes release
  version"); here the submission's release is ``submission.json``'s;
- ``junit_01.xml`` and ``e2e.log`` list the same tests (the bot's "tests in junit_01.xml and
  e2e.log match", same era) and, here, with the same outcome;
- every required test is present and passed; the bot counts a skipped testcase as missing. Which
  checks are required is set per profile (:func:`draguard.conformance.certify.required_checks`) and
  recorded in ``submission.json``.

Submission-only scenarios (PR title, one commit, the ``vX.Y/<product>/`` folder, the only-these-files
rule) concern the pull request, not the bundle, and are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draguard.harness.result import RunResult
from draguard.reports.bundle import SUBMISSION, VERSION_LINE, Verification, product_problems

from . import PROGRAMMES, BundleView, release_of

__all__ = ["VerifyConformance", "BOT_FILES"]

BOT_FILES = {"README.md": "markdown", "PRODUCT.yaml": "yaml", "e2e.log": "text", "junit_01.xml": "xml"}
"""The files a submission must have, not empty, each of its type (the bot's Examples table)."""


@PROGRAMMES.register("verify-conformance", summary="the verify-conformance bot's checks of a conformance submission",
                     source="https://github.com/kubernetes-sigs/verify-conformance")
class VerifyConformance:
    """The bot's checks; it renders nothing (the bundle is already laid out as a submission)."""

    def preflight(self, release: str | None) -> None:
        return None

    def render(self, result: RunResult, product: Mapping[str, Any], submission: Mapping[str, Any]) -> dict[str, str]:
        return {}

    def verify(self, view: BundleView, v: Verification) -> None:
        self._files(view, v)
        product = view.yaml("PRODUCT.yaml")
        if product is not None:
            v.problems += [f"PRODUCT.yaml: {p}" for p in product_problems(product)]
        self._version(view, v)
        self._same_checks(view, v)
        self._required(view, v)

    @staticmethod
    def _files(view: BundleView, v: Verification) -> None:
        for name, kind in BOT_FILES.items():
            path = view.root / name
            if not path.is_file():
                v.problems.append(f"{name}: missing (a conformance submission must have it)")
            elif not path.read_bytes().strip():
                v.problems.append(f"{name}: empty (a conformance submission's {name} must not be)")
            elif kind == "yaml" and view.yaml(name) is None:
                v.problems.append(f"{name}: not YAML")
            elif kind == "xml" and view.cases is None:
                v.problems.append(f"{name}: not JUnit XML")

    @staticmethod
    def _version(view: BundleView, v: Verification) -> None:
        wanted = release_of(view.submission.get("kubernetesVersion"))
        if wanted is None:
            v.problems.append(f"{SUBMISSION}: missing or names no Kubernetes version (the submission's version)")
        text = view.text("e2e.log")
        if not text:
            return
        lines = VERSION_LINE.findall(text)
        if not lines:
            v.problems.append("e2e.log: no 'e2e test version: vX.Y.Z' line")
        elif wanted is not None and lines[0][0] != wanted:
            v.problems.append(f"e2e.log: 'e2e test version: {''.join(lines[0])}' is not the submission's version "
                              f"{wanted}")

    @staticmethod
    def _same_checks(view: BundleView, v: Verification) -> None:
        cases, logged = view.cases, view.logged
        if cases is None or logged is None:
            return
        for name in sorted(set(cases) - set(logged)):
            v.problems.append(f"junit_01.xml names {name} but e2e.log does not")
        for name in sorted(set(logged) - set(cases)):
            v.problems.append(f"e2e.log names {name} but junit_01.xml does not")
        for name in sorted(set(cases) & set(logged)):
            junit = cases[name].status
            log = "skipped" if logged[name] == "not-applicable" else logged[name]
            if junit != log:
                v.problems.append(f"{name} is {junit} in junit_01.xml but {logged[name]} in e2e.log")

    @staticmethod
    def _required(view: BundleView, v: Verification) -> None:
        required = view.submission.get("requiredChecks")
        if not isinstance(required, list):
            v.problems.append(f"{SUBMISSION}: lists no requiredChecks (which checks must run is set per profile)")
            return
        cases = view.cases
        if cases is None:
            return
        for name in map(str, required):
            case = cases.get(name)
            if case is None:
                v.problems.append(f"required check {name} is not in junit_01.xml")
            elif case.status == "skipped" and not case.message.startswith("not applicable:"):
                v.problems.append(f"required check {name} was skipped: {case.message}")
