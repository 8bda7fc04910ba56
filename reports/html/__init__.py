"""``html``: one self-contained ``report.html`` per run (plotly.js inlined; nothing is fetched when viewed).

For each scenario: the verdict up front (met or not; each invariant held or violated with its
evidence; each step due, ran, fired; a ``load`` step's table of times per operation kind and phase,
with its target and achieved rate), the device timeline (one row per device grouped by node,
bars per claim coloured by workload, allocated → prepared → unprepared, double allocations and the
devices an invariant names highlighted, chaos steps as vertical markers), a member × time strip per
gang, and the raw timeline events with filters by object, workload and kind. See ``model.py`` for
how the picture is derived from the timeline.
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from draguard.harness.result import RunResult, ScenarioResult

from ..files import write_atomic
from ..registry import REPORTS
from .model import Picture, picture

__all__ = ["render", "to_html", "FILE"]

FILE = "report.html"

# Colour-blind safe (Okabe-Ito), then plotly's defaults for many workloads.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880"]
STATE_STYLE = {"allocated": (0.45, ""), "prepared": (1.0, ""), "unprepared": (0.7, "/")}
PHASE_COLOURS = {"Pending": "#BBBBBB", "Scheduled": "#E69F00", "Running": "#009E73", "Terminating": "#CC79A7",
                 "Succeeded": "#56B4E9", "Failed": "#D55E00"}


def _colours(workloads: list[str]) -> dict[str, str]:
    return {w: PALETTE[i % len(PALETTE)] for i, w in enumerate(workloads)}


def device_figure(pic: Picture, div_id: str) -> go.Figure:
    labels = [r.label for r in pic.rows]
    index = {r.id: i for i, r in enumerate(pic.rows)}
    label_of = {r.id: r.label for r in pic.rows}
    colours = _colours(pic.workloads())
    fig = go.Figure()
    for workload in pic.workloads():
        for state, (opacity, pattern) in STATE_STYLE.items():
            bars = [b for b in pic.bars if b.workload == workload and b.state == state and b.device in index]
            if not bars:
                continue
            fig.add_trace(go.Bar(
                orientation="h", y=[label_of[b.device] for b in bars], x=[b.end - b.start for b in bars],
                base=[b.start for b in bars], name=f"{workload} · {state}", legendgroup=workload,
                marker={"color": colours[workload], "opacity": opacity, "pattern": {"shape": pattern},
                        "line": {"color": ["#D00000" if b.held_at_end else colours[workload] for b in bars],
                                 "width": [3 if b.held_at_end else 0.5 for b in bars]}},
                hovertext=[f"claim {b.claim} ({workload})<br>{state} {b.start:.1f}s → {b.end:.1f}s"
                           + (f"<br>pods: {', '.join(b.pods)}" if b.pods else "")
                           + ("<br><b>still held when the timeline ended</b>" if b.held_at_end else "") for b in bars],
                hoverinfo="text", width=0.7, meta={"kind": "claim", "workload": workload, "state": state},
            ))
    if pic.overlaps:
        fig.add_trace(go.Bar(
            orientation="h", y=[label_of[o.device] for o in pic.overlaps if o.device in index],
            x=[o.end - o.start for o in pic.overlaps if o.device in index],
            base=[o.start for o in pic.overlaps if o.device in index], name="double allocation",
            marker={"color": "rgba(208,0,0,0.85)", "pattern": {"shape": "x"}}, width=0.3,
            hovertext=[f"double allocation: {' and '.join(o.claims)} {o.start:.1f}s → {o.end:.1f}s" for o in pic.overlaps],
            hoverinfo="text", meta={"kind": "double-allocation"},
        ))
    shapes: list[dict[str, Any]] = []
    seen_violation: set[tuple[str, str]] = set()
    for v in pic.violations:
        if (v.device, v.invariant) in seen_violation:
            continue
        seen_violation.add((v.device, v.invariant))
        i = index[v.device]
        shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": v.start, "x1": v.end, "y0": i - 0.5, "y1": i + 0.5,
                       "fillcolor": "rgba(255,0,0,0.13)", "line": {"color": "rgba(208,0,0,0.6)", "width": 1, "dash": "dot"},
                       "layer": "below", "name": f"violation {v.invariant}"})
    if pic.violations:  # a legend entry for the highlighted spans (shapes have none)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="invariant violated on this device",
                                 marker={"symbol": "square", "size": 12, "color": "rgba(255,0,0,0.25)"},
                                 meta={"kind": "violation-legend"}))
    annotations: list[dict[str, Any]] = []
    for m in pic.markers:
        if m.kind != "fault":
            continue
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": m.t, "x1": m.t, "y0": 0, "y1": 1,
                       "line": {"color": "#444", "width": 1.5, "dash": "dash"}})
        annotations.append({"x": m.t, "y": 1.0, "xref": "x", "yref": "paper", "text": html.escape(m.label),
                            "showarrow": False, "textangle": -30, "xanchor": "left", "yanchor": "bottom",
                            "font": {"size": 10}})
    # Nodes as bands: a thin separator between groups of rows.
    previous = None
    for i, r in enumerate(pic.rows):
        if previous is not None and r.node != previous:
            shapes.append({"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": i - 0.5, "y1": i - 0.5,
                           "line": {"color": "#999", "width": 1}})
        previous = r.node
    fig.update_layout(
        barmode="overlay", height=max(220, 90 + 26 * len(pic.rows)), margin={"l": 10, "r": 10, "t": 60, "b": 40},
        xaxis={"ticksuffix": " s", "range": [pic.begin, pic.begin + max(pic.end - pic.begin, 1.0) * 1.02], "zeroline": False},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": labels, "autorange": "reversed",
               "tickfont": {"size": 11}, "automargin": True, "range": [len(labels) - 0.5, -0.5] if labels else None},
        shapes=shapes, annotations=annotations, legend={"orientation": "h", "y": -0.18 if len(labels) < 6 else -0.08},
        plot_bgcolor="#FAFAFA",
    )
    if labels:  # every device gets a row even when nothing held it
        fig.add_trace(go.Scatter(x=[None] * len(labels), y=labels, mode="markers", showlegend=False, hoverinfo="skip",
                                 meta={"kind": "rows"}))
    return fig


def gang_figure(pic: Picture) -> go.Figure:
    pods = sorted({(p.workload, p.pod) for p in pic.pods}, key=lambda wp: (wp[0], wp[1]))
    labels = [f"{w} / {p}" for w, p in pods]
    fig = go.Figure()
    for phase, colour in PHASE_COLOURS.items():
        segs = [s for s in pic.pods if s.phase == phase]
        if not segs:
            continue
        fig.add_trace(go.Bar(
            orientation="h", y=[f"{s.workload} / {s.pod}" for s in segs], x=[s.end - s.start for s in segs],
            base=[s.start for s in segs], name=phase, marker={"color": colour}, width=0.7,
            hovertext=[f"{s.pod}: {phase} {s.start:.1f}s → {s.end:.1f}s" + (f" on {s.node}" if s.node else "") for s in segs],
            hoverinfo="text", meta={"kind": "pod-phase", "phase": phase},
        ))
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": m.t, "x1": m.t, "y0": 0, "y1": 1,
               "line": {"color": "#444", "width": 1.5, "dash": "dash"}} for m in pic.markers if m.kind == "fault"]
    previous = None
    for i, (w, _) in enumerate(pods):
        if previous is not None and w != previous:
            shapes.append({"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": i - 0.5, "y1": i - 0.5,
                           "line": {"color": "#999", "width": 1}})
        previous = w
    fig.update_layout(
        barmode="overlay", height=max(200, 80 + 22 * len(labels)), margin={"l": 10, "r": 10, "t": 20, "b": 40},
        xaxis={"ticksuffix": " s", "range": [pic.begin, pic.begin + max(pic.end - pic.begin, 1.0) * 1.02]},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": labels, "autorange": "reversed",
               "automargin": True},
        shapes=shapes, legend={"orientation": "h"}, plot_bgcolor="#FAFAFA",
    )
    return fig


def _figure_html(fig: go.Figure, div_id: str) -> str:
    return str(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                           config={"displaylogo": False, "responsive": True}))


def _script_json(value: Any) -> str:
    return json.dumps(value).replace("</", "<\\/")


def _scenario_view(s: ScenarioResult, i: int) -> dict[str, Any]:
    events = list(s.timeline.events()) if s.timeline is not None else []
    pic = picture(events, s)
    members: dict[str, set[str]] = {}
    for seg in pic.pods:
        members.setdefault(seg.workload, set()).add(seg.pod)
    holding: dict[str, dict[str, Any]] = {}
    for b in pic.bars:
        h = holding.setdefault(b.workload, {"devices": set(), "pods": set()})
        h["devices"].add(b.device)
        h["pods"].update(b.pods)
    for w, h in holding.items():
        h["members"] = len(members.get(w, ()))
        h["partial"] = 0 < len(h["pods"]) < h["members"]
    return {
        "index": i, "s": s, "pic": pic,
        "device_rows": len(pic.rows),
        "device_plot": _figure_html(device_figure(pic, f"device-timeline-{i}"), f"device-timeline-{i}") if pic.rows else "",
        "gang_plot": _figure_html(gang_figure(pic), f"gangs-{i}") if pic.pods else "",
        "holding": dict(sorted(holding.items())),
        "events_json": _script_json(events),
        "kinds": sorted({str(e.get("kind")) for e in events}),
        "sources": sorted({str(e.get("source")) for e in events}),
        "workloads": pic.workloads(),
    }


def to_html(result: RunResult) -> str:
    env = jinja2.Environment(loader=jinja2.FunctionLoader(
        lambda name: files("draguard.reports.html").joinpath(name).read_text(encoding="utf-8")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.get_template("report.html.j2")
    return template.render(
        result=result, scenarios=[_scenario_view(s, i) for i, s in enumerate(result.scenarios)],
        plotlyjs=get_plotlyjs(), environment_json=json.dumps(result.environment, indent=1, default=str),
    )


@REPORTS.register("html", summary="report.html: verdict, device timeline, gangs and events in one self-contained page")
def render(result: RunResult, out: Path) -> list[Path]:
    return [write_atomic(out / FILE, to_html(result))]
