"""A headless Chromium (Debian's ``chromium`` package) driven over the Chrome DevTools Protocol.

Small on purpose: start the browser with ``--remote-debugging-port=0``, read the port it chose from
``DevToolsActivePort``, attach to its page over a WebSocket (websocket-client), and offer what the
report tests need: open a URL and wait for the load event, evaluate JavaScript, collect console
errors and uncaught exceptions, take a screenshot. Protocol: https://chromedevtools.github.io/devtools-protocol/
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

__all__ = ["Browser", "find_chromium"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 1800) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="draguard-chromium-"))
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--hide-scrollbars", f"--window-size={width},{height}", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.errors: list[str] = []
        self._id = 0
        try:
            port = self._port(timeout=60)
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self, timeout: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} before it listened")
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not write DevToolsActivePort")

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails") or {}
            self.errors.append(f"exception: {(d.get('exception') or {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        ident = self._id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            self._event(msg)

    def wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            self._event(msg)
            if msg.get("method") == method:
                self.ws.settimeout(60)
                return dict(msg.get("params") or {})
        raise TimeoutError(f"no {method} in {timeout}s")

    def open(self, url: str, timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout)

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise); raises on a JS exception."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression!r} threw: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return (r.get("result") or {}).get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
