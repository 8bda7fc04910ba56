"""The server-side dry run (``draguard lint --server``): what the API server itself would reject.

Each Kubernetes object of the linted set is created with ``dryRun=All``: the API server decodes,
defaults, validates (including CEL selectors, with its own cost limits) and runs admission, then
stores nothing. A rejection becomes a finding of rule ``server-rejected`` at the field the server
names, when it names one.

Talks to: the API server through :class:`draguard.harness.kube.Kube` (discovery, namespaces, POST).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from draguard.harness.kube import ApiError, Kube

from .inventory import Inventory
from .registry import Severity, Violation, rule
from .document import Document, Location, NotChecked

__all__ = ["ServerCheck"]

# Groups Kubernetes itself serves (or its SIG projects define): an object of such a group that the
# server does not serve is a rejection; any other group is someone's CRD or not an API object.
_KUBERNETES_GROUPS = re.compile(r"^(|apps|batch|policy|autoscaling|[a-z0-9.-]*\.k8s\.io|[a-z0-9.-]*\.x-k8s\.io)$")


def _plain(value: Any) -> Any:
    """ruamel's round-trip nodes as plain JSON values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


class ServerCheck:
    """Dry-runs documents against one API server."""

    def __init__(self, kube: Kube, namespace: str = "default") -> None:
        self.kube = kube
        self.namespace = namespace
        self.not_checked: list[NotChecked] = []
        self._resources: dict[str, dict[str, tuple[str, bool]] | None] = {}
        self._namespaces: dict[str, bool] = {}

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path | None, context: str | None, namespace: str) -> ServerCheck:
        return cls(Kube.from_kubeconfig(kubeconfig, context), namespace)

    def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """``(plural, namespaced)`` of a kind, or None when the server does not serve it."""
        if api_version not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                listing = self.kube.request("GET", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                self._resources[api_version] = None
            else:
                self._resources[api_version] = {
                    r["kind"]: (r["name"], bool(r.get("namespaced")))
                    for r in listing.get("resources", [])
                    if "/" not in r.get("name", "/")
                }
        served = self._resources[api_version]
        return None if served is None else served.get(kind)

    def _namespace_exists(self, namespace: str) -> bool:
        if namespace not in self._namespaces:
            self._namespaces[namespace] = self.kube.get("Namespace", namespace) is not None
        return self._namespaces[namespace]

    def check(self, doc: Document) -> Iterator[Violation]:
        """Dry-run one document; yields a violation when the server rejects it."""
        metadata = doc.obj.get("metadata")
        if not doc.api_version or not doc.kind or not isinstance(metadata, Mapping):
            return
        described = f"{doc.kind} {doc.name or metadata.get('generateName', '(unnamed)')}"
        found = self.resource(doc.api_version, doc.kind)
        if found is None:
            if _KUBERNETES_GROUPS.match(doc.group):
                yield Violation(
                    doc.value_at(doc.obj, "apiVersion"),
                    f"the API server does not serve {doc.api_version} {doc.kind} (not enabled, or removed)",
                )
            else:
                self.not_checked.append(NotChecked(str(doc.at()), f"server: {doc.api_version} {doc.kind} is not served"))
            return
        plural, namespaced = found
        body = _plain(doc.obj)
        path = f"/api/{doc.api_version}" if "/" not in doc.api_version else f"/apis/{doc.api_version}"
        if namespaced:
            namespace = doc.namespace or self.namespace
            if not self._namespace_exists(namespace):
                self.not_checked.append(NotChecked(str(doc.at()), f"server: namespace {namespace} does not exist"))
                return
            body.setdefault("metadata", {})["namespace"] = namespace
            path += f"/namespaces/{namespace}"
        try:
            self.kube.request("POST", f"{path}/{plural}", body, query={"dryRun": "All"})
        except ApiError as exc:
            if exc.status == 409 and exc.reason == "AlreadyExists":
                return  # valid; it merely exists already
            if exc.status >= 500:
                raise
            message = str(exc.body.get("message") or exc)
            yield Violation(self._locate(doc, exc.body), f"the API server rejects {described}: {message}")

    @staticmethod
    def _locate(doc: Document, status: Mapping[str, Any]) -> Location:
        """The node of the first field the server's causes name (``spec.devices.requests[0].name``)."""
        causes = status.get("details", {}).get("causes", []) if isinstance(status.get("details"), Mapping) else []
        for cause in causes:
            field = cause.get("field") if isinstance(cause, Mapping) else None
            if not isinstance(field, str) or not field:
                continue
            node: Any = doc.obj
            parent: Any = None
            key: Any = None
            for part in re.findall(r"[^.\[\]]+|\[\d+\]", field):
                index = int(part[1:-1]) if part.startswith("[") else None
                if index is not None and isinstance(node, list) and index < len(node):
                    parent, key, node = node, index, node[index]
                elif index is None and isinstance(node, Mapping) and part in node:
                    parent, key, node = node, part, node[part]
                else:
                    break
            if parent is not None:
                return doc.at(parent, key)
        return doc.at(doc.obj, "kind") if "kind" in doc.obj else doc.at()


@rule(
    id="server-rejected",
    severity=Severity.ERROR,
    statement="The API server accepts every object of the linted set (server-side dry run, --server).",
    fix="Correct the field the server names; the message is the API server's own.",
    needs_server=True,
)
def check_server(inv: Inventory) -> Iterator[Violation]:
    server = inv.server
    if not isinstance(server, ServerCheck):
        return
    for doc in inv.documents:
        yield from server.check(doc)
