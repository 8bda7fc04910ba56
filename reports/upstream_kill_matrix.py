"""The upstream kill matrix's Markdown: ``docs/upstream-kill-matrix.md`` from ``docs/upstream-kill-matrix.json``.

The JSON is what :mod:`draguard.conformance.upstream_matrix` measured: for each planted bug of the upstream
DRA test driver, the detectors by which ``draguard sanity``, ``draguard conformance`` and the retargeted
library told it from the driver as released, and for the library also without the invariants that were
new in that measurement. The Markdown says when, where and how, and is a pure function of the JSON, so a
test regenerates it and compares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["render_markdown", "JSON", "MARKDOWN", "write_doc"]

JSON = "upstream-kill-matrix.json"
MARKDOWN = "upstream-kill-matrix.md"

_SUITES = (("sanity", "`draguard sanity`"), ("conformance", "`draguard conformance`"), ("library", "retargeted library"))


def _cell(row: dict[str, Any], suite: str, key: str = "caught") -> str:
    if suite not in row:
        return "—"
    found = row[suite].get(key) or []
    return "; ".join(f"`{d}`" for d in found) if found else "**survived**"


def _count(rows: list[dict[str, Any]], suite: str, key: str = "caught") -> str:
    measured = [r for r in rows if suite in r]
    return f"{sum(1 for r in measured if r[suite].get(key))} of {len(measured)}" if measured else "not measured"


def render_markdown(data: dict[str, Any], json_name: str = JSON) -> str:
    rows: list[dict[str, Any]] = data.get("variants") or []
    new = data.get("newInvariants") or []
    base = data.get("unmodified") or {}
    lines = [
        "# Upstream kill matrix",
        "",
        f"<!-- generated from {json_name} by `python -m draguard.reports.upstream_kill_matrix {json_name} <this file>`; "
        "do not edit by hand -->",
        "",
        "Each variant is the upstream DRA test driver (`k8s.io/kubernetes/test/e2e/dra/test-driver`) with one bug "
        "planted in `app/kubeletplugin.go`, built with `go build -overlay` from the module the control plane is "
        "built from (`harness/driver/upstream_variants.py`). draguard runs each as a vendor runs their own driver: "
        "`draguard sanity` (with its CDI folder and a restart hook), `draguard conformance` (with restart hooks "
        "for the driver and the node agents, the nodes' CDI folders, and the gRPC interposer in front of the driver "
        "as `draguard run --cluster local` puts it) "
        "and the library retargeted to it (`draguard run scenarios/ --cluster local --driver "
        "test-driver.cdi.k8s.io --device-class test-gpus`). A suite **catches** a variant when it reports a "
        "failure the released driver does not: a check that passed there, a scenario met there.",
        "",
        f"Measured {data.get('measuredAt') or 'at an unknown time'} on {data.get('machine') or 'an unknown machine'}:",
        "",
        "```sh",
        data.get("command") or "python -m draguard.conformance.upstream_matrix",
        "```",
        "",
        "## Caught",
        "",
        "| suite | caught |" + (" caught without the new invariants |" if new else ""),
        "|---|---|" + ("---|" if new else ""),
    ]
    for suite, title in _SUITES:
        extra = f" {_count(rows, suite, 'caughtWithoutNew')} |" if new and suite == "library" else (" — |" if new else "")
        lines.append(f"| {title} | {_count(rows, suite)} |{extra}")
    if new:
        lines += ["", "New invariants in this measurement (the library's figures without them come from the same "
                  "runs, their violations left out): " + ", ".join(f"`{n}`" for n in new) + "."]
    titles = [t for _, t in _SUITES] + (["library without the new invariants"] if new else [])
    lines += ["", "## Variants", "", "| variant | bug | " + " | ".join(titles) + " |",
              "|---|---|" + "---|" * len(titles)]
    for row in rows:
        cells = [_cell(row, s) for s, _ in _SUITES] + ([_cell(row, "library", "caughtWithoutNew")] if new else [])
        lines.append(f"| `{row['variant']}` | {row.get('bug', '')} | " + " | ".join(cells) + " |")
    notes = data.get("notes") or []
    if notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    fails = base.get("failsAlready") or {}
    applied = base.get("libraryApplied") or []
    lines += ["", "## The released driver", ""]
    lines.append(f"- library scenarios that applied: {len(applied)} ({', '.join(applied) or 'none'})")
    for suite, title in _SUITES:
        if suite in fails:
            lines.append(f"- {title} fails on it already (not counted for any variant): "
                         + (", ".join(f"`{c}`" for c in fails[suite]) or "nothing"))
    lines.append("")
    return "\n".join(lines)


def write_doc(data: dict[str, Any], doc: Path) -> list[Path]:
    """``doc`` (the Markdown) and its JSON beside it."""
    json_path = doc.with_suffix(".json")
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    doc.write_text(render_markdown(data, json_path.name))
    return [doc, json_path]


if __name__ == "__main__":
    import sys

    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    target.write_text(render_markdown(json.loads(source.read_text()), source.name))
