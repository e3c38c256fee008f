"""One self-contained HTML page of a task's timeline (audit/timeline.py gives the data).

No network: the CSS, the script and the SVG are inline, no font or image is fetched,
and a Content-Security-Policy allows nothing else (the script by its hash only).
Everything from the trail (event payloads, step titles, the goal) is untrusted input:
it reaches the page only through `esc`, as text or a quoted attribute, never inside
the script. Colours are never the only signal: every item has a shape and a text
label, and the list under the axis says everything in words.
"""

from __future__ import annotations

import base64
import hashlib
import html
from datetime import UTC, datetime

from git_agentckpt.audit.timeline import LANES, Mark, Timeline

LEFT, PLOT, RIGHT = 132, 1000, 28
WIDTH = LEFT + PLOT + RIGHT
ROW = 24
CHAR = 6.6  # width of a label character at 11px
ROWS = {"checkpoints": 3, "steps": 4, "checks": 3, "alarms": 3, "resumes": 3, "events": 3}
LANE_TITLES = {
    "checkpoints": "Checkpoints",
    "steps": "Steps",
    "checks": "Constraint checks",
    "alarms": "Drift alarms",
    "resumes": "Resumes",
    "events": "Agent events",
}
KIND_TITLES = {
    "checkpoint": "Checkpoint",
    "step": "Step",
    "check": "Constraint check",
    "drift": "Drift alarm",
    "resume": "Resume",
    "confirm": "Confirmation",
    "event": "Event",
    "bucket": "Events (counted)",
}
PROBLEMS = {"failed", "fail", "alarm", "needs_person", "assertions_failed", "rejected"}
PROBLEMS |= {"not_ready", "unfinished", "stopped"}


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def clock(ts: float, with_date: bool = False, tenths: bool = False) -> str:
    fmt = "%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S"
    when = datetime.fromtimestamp(ts, UTC)
    text = when.strftime(fmt)
    return f"{text}.{when.microsecond // 100_000}" if tenths else text


def duration(seconds: float) -> str:
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class _Axis:
    def __init__(self, t0: float, t1: float) -> None:
        pad = max((t1 - t0) * 0.03, 0.05)
        self.t0, self.t1 = t0 - pad, t1 + pad

    def x(self, t: float) -> float:
        return LEFT + (t - self.t0) / (self.t1 - self.t0) * PLOT

    def ticks(self) -> tuple[list[float], float]:
        """Tick times (at most about 10) and their step in seconds."""
        span = self.t1 - self.t0
        steps = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
        step = float(next((s for s in (*steps, 7200, 10800, 21600) if span / s <= 10), 43200))
        first = int(self.t0 // step) + 1
        return [n * step for n in range(first, int(self.t1 // step) + 1)], step


def _tip(m: Mark) -> str:
    lines = [f"{KIND_TITLES[m.kind]} at {m.ts}", m.detail]
    if m.commit:
        lines += [f"commit {m.commit}", f"$ {m.show}"]
    return "\n".join(x for x in lines if x)


def _rows(
    lane: str, marks: list[tuple[int, Mark]], axis: _Axis
) -> list[tuple[int, Mark, int, bool]]:
    """(item number, mark, row, label shown): points and spans packed into rows, a
    label drawn only where it fits."""
    ends = [-1e9] * ROWS[lane]
    out: list[tuple[int, Mark, int, bool]] = []
    for n, m in marks:
        x0 = axis.x(m.start) - 7
        x1 = axis.x(m.end) if m.end is not None else axis.x(m.start) + 7
        x1 = max(x1, x0 + 14)
        text_w = len(m.label) * CHAR + 8
        inside = m.end is not None and x1 - x0 >= text_w
        labelled = x1 if inside else x1 + text_w
        row = next((r for r, e in enumerate(ends) if e <= x0 and labelled <= WIDTH), None)
        label = row is not None
        if row is None:
            row = next((r for r, e in enumerate(ends) if e <= x0), None)
        if row is None:
            row = min(range(len(ends)), key=lambda r: ends[r])
        ends[row] = max(ends[row], labelled if label else x1 + 2)
        out.append((n, m, row, label))
    return out


def _shape(m: Mark, x: float, y: float) -> str:
    c = f'class="mk {esc(m.kind)} st-{esc(m.status)}"'
    if m.kind == "checkpoint":
        return f'<path {c} d="M{x:.1f} {y - 7} l7 7 l-7 7 l-7 -7 z"/>'
    if m.kind == "check":
        if m.status == "fail":
            return (
                f'<rect {c} x="{x - 7:.1f}" y="{y - 7}" width="14" height="14" rx="2"/>'
                f'<path class="glyph" d="M{x - 4:.1f} {y - 4} l8 8 m0 -8 l-8 8"/>'
            )
        return (
            f'<circle {c} cx="{x:.1f}" cy="{y}" r="7"/>'
            f'<path class="glyph" d="M{x - 4:.1f} {y} l3 3 l5 -6"/>'
        )
    if m.kind == "drift":
        return (
            f'<path {c} d="M{x:.1f} {y - 8} l8 15 h-16 z"/>'
            f'<path class="glyph" d="M{x:.1f} {y - 3} v5 m0 2.5 v1"/>'
        )
    if m.kind == "confirm":
        mark = "M{a} {b} l3 3 l5 -6" if m.status == "confirmed" else "M{a} {c} l8 8 m0 -8 l-8 8"
        glyph = mark.format(a=f"{x - 4:.1f}", b=y, c=y - 4)
        return f'<circle {c} cx="{x:.1f}" cy="{y}" r="7"/><path class="glyph" d="{glyph}"/>'
    return f'<rect {c} x="{x - 1.5:.1f}" y="{y - 8}" width="3" height="16"/>'  # an event


def _item(n: int, m: Mark, axis: _Axis, y: float, label: bool) -> str:
    x = axis.x(m.start)
    body = ""
    if m.end is not None and m.kind in ("step", "resume"):
        w = max(axis.x(m.end) - x, 4.0)
        body = (
            f'<rect class="span {esc(m.kind)} st-{esc(m.status)}" x="{x:.1f}" y="{y - 9}" '
            f'width="{w:.1f}" height="18" rx="3"/>'
        )
        fits = w >= len(m.label) * CHAR + 8
        if label:
            tx, cls = (x + 4, "in") if fits else (x + w + 4, "out")
            body += f'<text class="lbl {cls}" x="{tx:.1f}" y="{y + 4}">{esc(m.label)}</text>'
    else:
        body = _shape(m, x, y)
        if label:
            body += f'<text class="lbl" x="{x + 10:.1f}" y="{y + 4}">{esc(m.label)}</text>'
    return (
        f'<a href="#item-{n}" class="item lane-{esc(m.lane)}" data-commit="{esc(m.commit)}" '
        f'data-tip="{esc(_tip(m))}" aria-label="{esc(KIND_TITLES[m.kind] + " " + m.label)}">'
        f"<title>{esc(_tip(m))}</title>{body}</a>"
    )


def _histogram(items: list[tuple[int, Mark]], axis: _Axis, top: float, height: float) -> str:
    """Counted events: a bar per bucket, its height by its count (with the count)."""
    most = max((m.count for _, m in items), default=1)
    out = []
    for n, m in items:
        x0, x1 = axis.x(m.start), axis.x(m.end if m.end is not None else m.start)
        h = max(3.0, (height - 16) * m.count / most)
        w = max(x1 - x0 - 1, 2.0)
        text = ""
        if w >= len(m.label) * CHAR * 0.8:
            text = (
                f'<text class="cnt" x="{x0 + w / 2:.1f}" y="{top + height - h - 3:.1f}">'
                f"{esc(m.label)}</text>"
            )
        out.append(
            f'<a href="#item-{n}" class="item lane-events" data-commit="{esc(m.commit)}" '
            f'data-tip="{esc(_tip(m))}" aria-label="{esc(m.detail)}"><title>{esc(_tip(m))}</title>'
            f'<rect class="bar" x="{x0:.1f}" y="{top + height - h:.1f}" width="{w:.1f}" '
            f'height="{h:.1f}"/>{text}</a>'
        )
    return "".join(out)


def svg(tl: Timeline) -> str:
    axis = _Axis(tl.start, tl.end)
    numbered = list(enumerate(tl.marks))
    parts: list[str] = []
    y = 34.0
    for lane in LANES:
        mine = [(n, m) for n, m in numbered if m.lane == lane]
        buckets = [(n, m) for n, m in mine if m.kind == "bucket"]
        singles = [(n, m) for n, m in mine if m.kind != "bucket"]
        placed = _rows(lane, singles, axis)
        used = max([r + 1 for _, _, r, _ in placed], default=0 if buckets else 1)
        height = used * ROW + 12 + (70 if buckets else 0)
        parts.append(
            f'<g class="lane lane-{lane}"><rect class="band" x="0" y="{y:.1f}" width="{WIDTH}" '
            f'height="{height}"/><text class="lane-title" x="8" y="{y + 18:.1f}">'
            f"{LANE_TITLES[lane]}</text>"
        )
        if not mine:
            parts.append(f'<text class="none" x="{LEFT + 6}" y="{y + 18:.1f}">none</text>')
        if buckets:
            parts.append(_histogram(buckets, axis, y + 4, 70))
            most = max(m.count for _, m in buckets)
            per = f"{tl.bucket_seconds // 60} min"
            parts.append(
                f'<text class="none" x="8" y="{y + 34:.1f}">bars: events</text>'
                f'<text class="none" x="8" y="{y + 48:.1f}">per {per}, max {most}</text>'
            )
        base = y + (70 if buckets else 0) + 6 + ROW / 2
        for n, m, row, label in placed:
            parts.append(_item(n, m, axis, base + row * ROW, label))
        parts.append("</g>")
        y += height + 4
    ticks = []
    with_date = tl.end - tl.start > 86400
    times, step = axis.ticks()
    for t in times:
        x = axis.x(t)
        ticks.append(
            f'<line class="tick" x1="{x:.1f}" y1="28" x2="{x:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick-lbl" x="{x:.1f}" y="20">{clock(t, with_date, step < 1)}</text>'
        )
    title = f"Timeline of task {tl.task}: {sum(1 for _ in tl.marks)} items on one time axis (UTC)"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="svg-title" '
        f'viewBox="0 0 {WIDTH} {y + 4:.0f}" width="{WIDTH}" height="{y + 4:.0f}">'
        f'<title id="svg-title">{esc(title)}</title>'
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#dc2626"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#fecaca" stroke-width="3"/></pattern></defs>'
        + "".join(ticks)
        + "".join(parts)
        + "</svg>"
    )


def _row(n: int, m: Mark, commit_url: str | None) -> str:
    href = commit_url.replace("{commit}", m.commit) if commit_url and m.commit else f"#item-{n}"
    commit = ""
    if m.commit:
        commit = (
            f'<a class="commit" href="{esc(href)}" data-commit="{esc(m.commit)}" '
            f'data-show="{esc(m.show)}" title="{esc(m.commit)}&#10;$ {esc(m.show)}">'
            f"<code>{esc(m.commit[:12])}</code></a>"
        )
    detail = "<br>".join(esc(line) for line in m.detail.split("\n"))
    problem = " problem" if m.status in PROBLEMS else ""
    status = f'<span class="badge st-{esc(m.status)}">{esc(m.status)}</span>' if m.status else ""
    return (
        f'<tr id="item-{n}" class="lane-{esc(m.lane)} kind-{esc(m.kind)}{problem}">'
        f'<td class="when" title="{esc(m.ts)}">{esc(m.ts[11:23] or m.ts)}</td>'
        f"<td>{KIND_TITLES[m.kind]}</td><td>{detail}</td><td>{status}</td><td>{commit}</td></tr>"
    )


def _summary(tl: Timeline) -> str:
    c = tl.counts
    rows = [
        ("Task", esc(tl.task)),
        ("Goal", esc(tl.goal) or "-"),
        ("Status", f'<span class="badge st-{esc(tl.status)}">{esc(tl.status or "-")}</span>'),
        (
            "Time span",
            f"{esc(tl.first_ts or '-')} to {esc(tl.last_ts or '-')} "
            f"({duration(tl.end - tl.start)})",
        ),
        (
            "Events",
            f"{c['events']} in all: {plural(c['tool calls'], 'tool call')}, "
            f"{plural(c['model calls'], 'model call')}",
        ),
        ("Checkpoints", str(c["checkpoints"])),
        (
            "Steps",
            f"{c['step runs']} runs: {c['steps done']} done, {c['steps failed']} failed",
        ),
        ("Constraint checks", f"{c['checks']}: {c['checks failed']} failed"),
        ("Drift alarms", str(c["drift alarms"])),
        (
            "Resumes",
            f"{c['resumes']}; {c['confirmations']} confirmed, {c['rejections']} rejected",
        ),
    ]
    cells = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<dl class="summary">{cells}</dl>'


def _legend() -> str:
    items = [
        ('<path class="mk checkpoint" d="M9 2 l7 7 l-7 7 l-7 -7 z"/>', "checkpoint (full)"),
        ('<path class="mk checkpoint st-light" d="M9 2 l7 7 l-7 7 l-7 -7 z"/>', "light checkpoint"),
        ('<rect class="span step st-done" x="1" y="3" width="16" height="12"/>', "step, done"),
        ('<rect class="span step st-failed" x="1" y="3" width="16" height="12"/>', "step, failed"),
        ('<rect class="span step st-open" x="1" y="3" width="16" height="12"/>', "step, open"),
        (
            '<circle class="mk check st-pass" cx="9" cy="9" r="7"/>'
            '<path class="glyph" d="M5 9 l3 3 l5 -6"/>',
            "check passed",
        ),
        (
            '<rect class="mk check st-fail" x="2" y="2" width="14" height="14"/>'
            '<path class="glyph" d="M5 5 l8 8 m0 -8 l-8 8"/>',
            "check failed",
        ),
        ('<path class="mk drift" d="M9 1 l8 15 h-16 z"/>', "drift alarm"),
        ('<rect class="span resume" x="1" y="3" width="16" height="12"/>', "resume"),
        (
            '<circle class="mk confirm st-confirmed" cx="9" cy="9" r="7"/>'
            '<path class="glyph" d="M5 9 l3 3 l5 -6"/>',
            "confirmed",
        ),
        ('<rect class="mk event" x="7" y="1" width="3" height="16"/>', "agent event"),
        ('<rect class="bar" x="2" y="6" width="14" height="11"/>', "events counted per bucket"),
    ]
    cells = "".join(
        f'<li><svg width="18" height="18" aria-hidden="true">{s}</svg>{t}</li>' for s, t in items
    )
    return f'<ul class="legend" aria-label="Legend">{cells}</ul>'


def _filters() -> str:
    boxes = "".join(
        f'<label><input type="checkbox" checked data-lane="{lane}"> {LANE_TITLES[lane]}</label>'
        for lane in LANES
    )
    return (
        f'<div class="filters" role="group" aria-label="Show">{boxes}'
        '<label><input type="checkbox" id="only-problems"> only problems</label></div>'
    )


SCRIPT = """(function () {
  var d = document, tip = d.getElementById('tip');
  d.querySelectorAll('[data-lane]').forEach(function (box) {
    box.addEventListener('change', function () {
      d.body.classList.toggle('hide-' + box.getAttribute('data-lane'), !box.checked);
    });
  });
  var only = d.getElementById('only-problems');
  only.addEventListener('change', function () {
    d.body.classList.toggle('only-problems', only.checked);
  });
  d.querySelectorAll('[data-tip]').forEach(function (el) {
    el.addEventListener('mousemove', function (e) {
      tip.textContent = el.getAttribute('data-tip');
      tip.style.left = Math.min(e.pageX + 14, d.body.scrollWidth - 380) + 'px';
      tip.style.top = (e.pageY + 14) + 'px';
      tip.hidden = false;
    });
    el.addEventListener('mouseleave', function () { tip.hidden = true; });
  });
  d.querySelectorAll('a.commit').forEach(function (a) {
    a.addEventListener('click', function () {
      var text = a.getAttribute('data-show');
      if (navigator.clipboard && text) {
        navigator.clipboard.writeText(text).catch(function () {});
      }
    });
  });
  d.documentElement.setAttribute('data-ready', 'yes');
})();
"""

CSS = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--band:#f9fafb}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:24px auto;max-width:1200px;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 12px}h1 code{font-size:20px}h2{font-size:17px;margin:24px 0 8px}
.summary{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0 0 12px;
padding:12px 16px;background:var(--band);border:1px solid var(--line);border-radius:8px}
.summary dt{font-weight:600;color:var(--muted)}.summary dd{margin:0}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:6px 18px;padding:0;margin:8px 0}
.legend li{display:flex;align-items:center;gap:6px;font-size:13px}
.filters{display:flex;flex-wrap:wrap;gap:4px 16px;margin:8px 0;font-size:13px}
.axis{overflow-x:auto;border:1px solid var(--line);border-radius:8px;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:var(--ink)}
.band{fill:var(--band)}.lane-title{font-weight:600;font-size:12px}.none{fill:var(--muted)}
.tick{stroke:var(--line)}.tick-lbl{text-anchor:middle;fill:var(--muted)}
.mk{stroke:#fff;stroke-width:1.5}.glyph{stroke:#fff;stroke-width:2;fill:none}
.checkpoint{fill:#2563eb}.checkpoint.st-light{fill:#93c5fd}
.span{stroke-width:1}.step{fill:#16a34a}.step.st-failed{fill:url(#hatch);stroke:#991b1b}
.step.st-open{fill:#f59e0b}.step.st-unfinished,.step.st-ended{fill:#9ca3af}
.lbl.in{fill:#fff;font-weight:600}.step.st-open~.lbl.in{fill:#1f2937}
.check.st-pass{fill:#16a34a}.check.st-fail{fill:#dc2626}
.drift{fill:#ea580c}.resume{fill:#7c3aed;opacity:.85}.resume.st-needs_person,
.resume.st-assertions_failed{fill:#a855f7;stroke:#581c87;stroke-dasharray:3 2}
.confirm.st-confirmed{fill:#16a34a}.confirm.st-rejected{fill:#dc2626}
.event{fill:#6b7280;stroke:none}.bar{fill:#9ca3af}.cnt{text-anchor:middle;font-size:10px}
a.item:hover .mk,a.item:hover .span,a.item:hover .bar,
a.item:focus .mk{stroke:#111827;stroke-width:2}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid var(--line)}
th{background:var(--band);position:sticky;top:0}td.when{white-space:nowrap;color:var(--muted)}
tr:target{background:#fef3c7}tr.problem td:first-child{box-shadow:inset 3px 0 #dc2626}
.badge{display:inline-block;padding:0 6px;border-radius:9px;background:#e5e7eb;font-size:12px}
.badge.st-failed,.badge.st-fail,.badge.st-rejected,.badge.st-needs_person,.badge.st-alarm,
.badge.st-assertions_failed,.badge.st-not_ready{background:#fee2e2;color:#991b1b}
.badge.st-done,.badge.st-pass,.badge.st-confirmed,.badge.st-ready,.badge.st-active,
.badge.st-full{background:#dcfce7;color:#166534}
.badge.st-open,.badge.st-recovering{background:#fef3c7;color:#92400e}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
a.commit{color:#1d4ed8;text-decoration:none}a.commit:hover{text-decoration:underline}
#tip{position:absolute;max-width:380px;background:#111827;color:#fff;padding:6px 8px;
border-radius:6px;font-size:12px;white-space:pre-line;pointer-events:none;z-index:9}
.note{color:var(--muted);font-size:12px}
"""
CSS += "".join(f".hide-{lane} .lane-{lane}{{display:none}}" for lane in LANES)
CSS += ".only-problems tbody tr:not(.problem){display:none}"


def render(tl: Timeline, commit_url: str | None = None) -> str:
    """The page. `commit_url`: a template with `{commit}` (a forge's commit page);
    without it each item links to its row, which names its commit."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )
    rows = "".join(_row(n, m, commit_url) for n, m in enumerate(tl.marks))
    bucket = ""
    if tl.bucket_seconds:
        bucket = (
            f'<p class="note">Agent events are counted per {tl.bucket_seconds // 60} min where '
            "they are dense; each bucket links to its first event commit and names the "
            "`git ckpt log` command that lists them.</p>"
        )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Timeline of task {esc(tl.task)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>Timeline of task <code>{esc(tl.task)}</code></h1>{_summary(tl)}</header>"
        "<main><h2>On one time axis (UTC)</h2>"
        f"{_legend()}{_filters()}{bucket}"
        f'<div class="axis">{svg(tl)}</div>'
        '<h2>Everything in order</h2><p class="note">Each item names the commit that '
        "records it (full id in its title); <code>git ckpt show ID</code> shows a "
        "checkpoint, <code>git show COMMIT</code> an event.</p>"
        '<table><thead><tr><th scope="col">Time (UTC)</th><th scope="col">What</th>'
        '<th scope="col">Details</th><th scope="col">Outcome</th><th scope="col">Commit</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></main>"
        '<div id="tip" role="tooltip" hidden></div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


__all__ = ["render", "svg"]
