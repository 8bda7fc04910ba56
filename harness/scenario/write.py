"""Write a scenario document back out as a file in the external format the loader reads.

The one writer of the ``draguard.dev/v1alpha1`` format: it dumps a validated
:class:`~draguard.harness.scenario.format.ScenarioDocument` (camelCase keys, durations as ``"30s"``,
fields left at their defaults omitted) as YAML through ruamel.yaml, optionally under a comment header.
What it writes loads again (:func:`~draguard.harness.scenario.loader.parse_scenario`) into an equal
document; ``draguard explore`` writes the interleavings it finds through it.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML

from draguard.harness.scenario.format import ScenarioDocument

__all__ = ["document_data", "dump_document"]


def document_data(document: ScenarioDocument) -> dict[str, Any]:
    """``document`` as plain data in the file's spelling: camelCase keys, durations as strings,
    fields at their defaults left out (``apiVersion`` and ``kind`` always kept)."""
    data: dict[str, Any] = document.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return {"apiVersion": document.api_version, "kind": document.kind, **data}


def dump_document(document: ScenarioDocument, header: str = "") -> str:
    """The YAML text of ``document``, after ``header`` written as ``#`` comment lines."""
    yaml = YAML(typ="rt", pure=True)  # round-trip mode keeps the model's field order
    yaml.width = 4096
    yaml.representer.ignore_aliases = lambda data: True  # equal leaves stay written out, never &anchors
    out = io.StringIO()
    for line in header.splitlines():
        out.write(f"# {line}".rstrip() + "\n")
    yaml.dump(document_data(document), out)
    return out.getvalue()
