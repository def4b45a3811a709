"""`duration_chart`: the durations and outcomes of a job's last runs as an inline SVG.

Drawn here, on the server, as plain SVG markup: the page needs no JavaScript library (nothing
to load, pin or audit, and the chart shows with scripts off), and a bar chart of at most 100
runs is a few kilobytes of markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from html import escape
from urllib.parse import quote

from ...state.records import RunRecord, RunState
from .times import shown_time

__all__ = ["COLOURS", "WIDTH", "duration_chart"]

WIDTH, HEIGHT = 800, 160
_TOP, _BOTTOM, _LEFT = 14, 18, 52  # room for the scale's labels
COLOURS = {
    RunState.SUCCEEDED: "#12b76a",
    RunState.FAILED: "#d92d20",
    RunState.ABANDONED: "#f79009",
    RunState.RUNNING: "#2e90fa",
}
_OTHER = "#98a2b3"  # not started, skipped, missed: runs with no duration


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 60:
        return f"{value / 60:.1f} m"
    return f"{value:.3g} s"


def duration_chart(records: Sequence[RunRecord], zone: tzinfo, *, link: str = "../runs/") -> str:
    """An SVG bar per run of `records` (newest first, as `history` gives them), drawn oldest
    on the left: its height the run's duration against the longest, its colour its outcome;
    a run with no duration is a short grey mark. Each bar links to its run's page (`link`
    and the run id) and has a tooltip (its start in `zone`, state and duration). Every text in
    it is escaped."""
    runs = list(reversed(records))
    longest = max((r.duration or 0.0 for r in runs), default=0.0)
    scale = longest if longest > 0 else 1.0
    plot_w, plot_h = WIDTH - _LEFT - 4, HEIGHT - _TOP - _BOTTOM
    step = plot_w / max(len(runs), 1)
    bar_w = max(step * 0.8, 1.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" class="chart" '
        f'aria-label="durations of the last {len(runs)} runs">',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{WIDTH - 4}" y2="{_TOP + plot_h}" '
        'stroke="#d0d5dd"/>',
        f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end" font-size="11" '
        f'fill="#667085">{escape(_seconds(longest))}</text>',
        f'<text x="{_LEFT - 6}" y="{_TOP + plot_h}" text-anchor="end" font-size="11" '
        'fill="#667085">0</text>',
    ]
    for index, run in enumerate(runs):
        duration = run.duration
        x = _LEFT + index * step + (step - bar_w) / 2
        if duration is None:
            height, colour = 3.0, _OTHER
        else:
            height = max(plot_h * duration / scale, 1.0)
            colour = COLOURS.get(run.state, _OTHER)
        y = _TOP + plot_h - height
        took = "no duration" if duration is None else _seconds(duration)
        tip = escape(f"{shown_time(run.started, zone)}: {run.state}, {took}")
        parts.append(
            f'<a href="{escape(link + quote(run.run_id, safe=""))}"><rect x="{x:.1f}" y="{y:.1f}" '
            f'width="{bar_w:.1f}" height="{height:.1f}" fill="{colour}" '
            f'data-state="{escape(str(run.state))}"><title>{tip}</title></rect></a>'
        )
    if not runs:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="13" '
            'fill="#667085">no runs yet</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
