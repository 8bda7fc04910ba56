"""``draguard history DIR...``: a small self-contained trend page over many runs (nightly jobs).

Per scenario: the pass rate over the runs given, and a run × scenario strip of met / not met /
error, oldest run first (ordered by the time each run started).
"""

from __future__ import annotations

import datetime as dt
import html
from collections import defaultdict
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from draguard.harness.result import RunResult

from .files import write_atomic

__all__ = ["history_html", "write_history"]


def _label(result: RunResult, where: str) -> str:
    started = result.environment.get("started")
    if isinstance(started, (int, float)):
        return dt.datetime.fromtimestamp(started, dt.timezone.utc).strftime("%Y-%m-%d %H:%M") + f" ({result.run_id})"
    return f"{where} ({result.run_id})"


def history_html(runs: list[tuple[str, RunResult]]) -> str:
    runs = sorted(runs, key=lambda wr: float(wr[1].environment.get("started") or 0.0))
    labels = [_label(r, w) for w, r in runs]
    scenarios = sorted({s.name for _, r in runs for s in r.scenarios})
    outcome: dict[str, list[float | None]] = defaultdict(list)
    for _, r in runs:
        by_name = {s.name: s for s in r.scenarios}
        for name in scenarios:
            s = by_name.get(name)
            outcome[name].append(None if s is None or s.not_applicable is not None else 1.0 if s.ok else 0.0)
    rates = {n: sum(v for v in vals if v is not None) / max(1, sum(v is not None for v in vals)) for n, vals in outcome.items()}
    fig = go.Figure(go.Heatmap(
        z=[outcome[n] for n in scenarios], x=labels, y=scenarios, zmin=0, zmax=1,
        colorscale=[[0, "#c00000"], [1, "#08780f"]], showscale=False, xgap=2, ygap=2,
        hovertemplate="%{y}<br>%{x}<br>%{z}<extra></extra>",
    ))
    fig.update_layout(height=max(220, 80 + 28 * len(scenarios)), margin={"l": 10, "r": 10, "t": 20, "b": 80},
                      yaxis={"automargin": True}, xaxis={"type": "category"})
    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{rates[n] * 100:.0f}%</td>"
        f"<td>{sum(v is not None for v in outcome[n])}</td></tr>" for n in scenarios)
    plot = fig.to_html(full_html=False, include_plotlyjs=False, div_id="history", config={"displaylogo": False})
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>draguard history</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:.25em .6em}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>draguard history: {len(runs)} run(s)</h1>"
        "<table id='pass-rates'><tr><th>scenario</th><th>pass rate</th><th>runs</th></tr>"
        f"{rows}</table><h2>Met (green) or not (red) per run</h2>{plot}</body></html>\n"
    )


def write_history(runs: list[tuple[str, RunResult]], out: Path) -> Path:
    return write_atomic(out, history_html(runs))
