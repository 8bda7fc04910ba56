"""The lint rules, one module per rule or per closely related pair; importing this registers them all."""

from __future__ import annotations

from . import (  # noqa: F401  (imported for their @rule registrations)
    api_versions,
    claims,
    extended_resources,
    gang,
    references,
    selectors,
    sharing,
    topology,
)

__all__: list[str] = []
