"""The figures of one resume, from the events around it (pure but for `Trees`).

Definitions (each figure counts inside the resume's windows, `timeline.py`):

- violations: one failing (`fail` or `error`) constraint in one `constraint.check`
  event; `after` counts them in the after window, `before` in the before window.
  The resume's own constraint run is no check (it is in the report:
  `failing_at_resume`).
- redone steps: each `step.start` in the after window of a step started before it.
  Its kind is the step's status just before that start, replayed from the log:
  `unfinished` (open: expected), `failed` (a retry: expected), `done` (its step-end
  checkpoint was committed: not expected) or `rolled_back` (done before the
  interruption, reset to pending by the resume's rollback: not expected).
- files rewritten to the resume point's content: a write event in the after window
  (`tool.call` whose input has `file_path`/`path` and the whole `content`, or a
  `file.write` with `path` and `content` or `sha256`) whose content is the file's
  blob in the resume checkpoint's tree (`write_event`); and a path whose blob, over
  the checkpoints committed in the after window, went away from the resume point's
  blob and came back to it (`checkpoint_tree`).
- repeated tool calls: a `tool.call` in the after window whose (tool, input) equals
  that of a `tool.call` from the before window's start up to the resume.
- tokens to the first step: the tokens of the `model.call` events from the
  interruption to the first `step.start` after the resume (`data.usage` or `data`:
  `total_tokens`, else input + output + cache read + cache creation tokens); with
  none, the growth of `tokens_used` in `trigger.decision` signals over that span.
- drift alarms: `drift.suspected` events in the after window; each with the next
  `constraint.check` after it in which no constraint fails.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from git_agentckpt.metrics.timeline import STEP_START, ResumeSpan
from git_agentckpt.model import JSON, Event

FAILING = ("fail", "error")
CUT_MARK = "…["  # integrations/summary.py marks a cut string so
TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class Trees(Protocol):
    """Reads of the object store the file figures need (None: not there)."""

    def tree_of(self, commit: str) -> str | None: ...
    def blob_at(self, tree: str, path: str) -> str | None: ...
    def changes(self, old_tree: str, new_tree: str) -> list[tuple[str, str | None]]: ...
    def blob(self, oid: str) -> bytes | None: ...


def seconds(a: str | None, b: str | None) -> float | None:
    if not a or not b:
        return None
    try:
        da = datetime.fromisoformat(a.replace("Z", "+00:00"))
        db = datetime.fromisoformat(b.replace("Z", "+00:00"))
    except ValueError:
        return None
    return round((db - da).total_seconds(), 3)


def failing(ev: Event) -> list[str]:
    items = ev.data.get("constraints")
    return [
        str(c.get("id"))
        for c in (items if isinstance(items, list) else [])
        if isinstance(c, dict) and c.get("status") in FAILING
    ]


def violations(events: Sequence[Event], span: ResumeSpan, report: Mapping[str, JSON]) -> JSON:
    after_items: list[JSON] = []
    index, step = 0, None
    checks_after = 0
    for i in range(span.ready + 1, span.after_end):
        ev = events[i]
        if ev.type == STEP_START:
            index, step = index + 1, ev.links.get("step")
        elif ev.type == "constraint.check":
            checks_after += 1
            for cid in failing(ev):
                after_items.append(
                    {"seq": ev.seq, "constraint": cid, "step_index": index, "step": step}
                )
    before = [events[i] for i in range(span.before_start, span.interruption + 1)]
    before_checks = [ev for ev in before if ev.type == "constraint.check"]
    before_ids = [cid for ev in before_checks for cid in failing(ev)]
    run = report.get("constraints")
    at_resume = run.get("failing") if isinstance(run, dict) else None
    return {
        "after": len(after_items),
        "before": len(before_ids),
        "checks_after": checks_after,
        "checks_before": len(before_checks),
        "after_constraints": sorted(
            {str(x["constraint"]) for x in after_items if isinstance(x, dict)}
        ),
        "before_constraints": sorted(set(before_ids)),
        "after_items": after_items,
        "failing_at_resume": list(at_resume) if isinstance(at_resume, list) else [],
    }


class _Steps:
    """Step statuses replayed from the log: done (step-end checkpoint committed), failed."""

    def __init__(self) -> None:
        self.prepared: dict[str, tuple[str, str | None]] = {}  # commit -> (trigger, step)
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self.started: set[str] = set()

    def see(self, ev: Event) -> None:
        step = ev.links.get("step")
        commit = ev.links.get("checkpoint")
        if ev.type == "checkpoint.prepare" and isinstance(commit, str):
            trig = ev.data.get("trigger")
            self.prepared[commit] = (str(trig), step if isinstance(step, str) else None)
        elif ev.type == "checkpoint.commit" and isinstance(commit, str):
            trig, sid = self.prepared.get(commit, ("", None))
            if trig == "step_end" and sid:
                self.done.add(sid)
                self.failed.discard(sid)
        elif ev.type == STEP_START and isinstance(step, str):
            self.started.add(step)
            if ev.data.get("redo"):
                self.done.discard(step)
            self.failed.discard(step)
        elif ev.type == "step.end" and isinstance(step, str) and ev.data.get("status") == "failed":
            self.failed.add(step)
        elif ev.type == "recovery.reset":
            reset = ev.data.get("steps_reset_to_pending")
            for sid in reset if isinstance(reset, list) else []:
                self.done.discard(str(sid))
                self.failed.discard(str(sid))


def redone_steps(events: Sequence[Event], span: ResumeSpan) -> list[JSON]:
    steps = _Steps()
    done_at_interruption: set[str] = set()
    out: list[JSON] = []
    for i in range(span.after_end):
        ev = events[i]
        if i == span.first:
            done_at_interruption = set(steps.done)
        step = ev.links.get("step")
        if (
            i > span.ready
            and ev.type == STEP_START
            and isinstance(step, str)
            and step in steps.started
        ):
            if step in steps.done:
                kind = "done"
            elif step in steps.failed:
                kind = "failed"
            elif step in span.reset and step in done_at_interruption:
                kind = "rolled_back"
                done_at_interruption.discard(step)  # a second start of it: by its status then
            else:
                kind = "unfinished"
            out.append(
                {
                    "step": step,
                    "kind": kind,
                    "expected": kind in ("unfinished", "failed"),
                    "seq": ev.seq,
                }
            )
        steps.see(ev)
    return out


def _tool_key(ev: Event) -> str:
    tool = ev.data.get("tool")
    return json.dumps([tool if isinstance(tool, str) else "", ev.input], sort_keys=True)


def repeated_tool_calls(events: Sequence[Event], span: ResumeSpan) -> list[JSON]:
    seen: dict[str, int] = {}
    for i in range(span.before_start, span.first):
        if events[i].type == "tool.call":
            seen.setdefault(_tool_key(events[i]), events[i].seq)
    out: list[JSON] = []
    for i in range(span.ready + 1, span.after_end):
        ev = events[i]
        if ev.type == "tool.call" and (same := seen.get(_tool_key(ev))) is not None:
            tool = ev.data.get("tool")
            out.append(
                {
                    "seq": ev.seq,
                    "tool": tool if isinstance(tool, str) else None,
                    "same_as_seq": same,
                }
            )
    return out


def _written(ev: Event, worktree: str | None) -> tuple[str, str | None, str | None] | None:
    """(path, content, sha256) of a write event, or None."""
    if ev.type == "tool.call":
        source = ev.input
    elif ev.type == "file.write":
        source = ev.input if isinstance(ev.input, dict) else ev.data
    else:
        return None
    if not isinstance(source, dict):
        return None
    path = source.get("file_path") or source.get("path")
    content = source.get("content")
    sha = source.get("sha256") if ev.type == "file.write" else None
    if not isinstance(path, str) or not path:
        return None
    if worktree and path.startswith(worktree.rstrip("/") + "/"):
        path = path[len(worktree.rstrip("/")) + 1 :]
    if path.startswith("/"):
        return None
    text = content if isinstance(content, str) and CUT_MARK not in content else None
    digest = sha if isinstance(sha, str) else None
    return (path, text, digest) if text is not None or digest is not None else None


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def rewritten_files(
    events: Sequence[Event], span: ResumeSpan, trees: Trees, worktree: str | None
) -> list[JSON]:
    ready = events[span.ready]
    commit = ready.links.get("checkpoint")
    base = trees.tree_of(commit) if isinstance(commit, str) else None
    if base is None:
        return []
    out: list[JSON] = []
    for i in range(span.ready + 1, span.after_end):
        found = _written(events[i], worktree)
        if found is None:
            continue
        path, text, sha = found
        oid = trees.blob_at(base, path)
        if oid is None:
            continue
        if text is not None:
            same = git_blob_id(text.encode()) == oid
        else:
            data = trees.blob(oid)
            same = data is not None and hashlib.sha256(data).hexdigest() == sha
        if same:
            out.append({"path": path, "how": "write_event", "seq": events[i].seq})
    shown = {str(x["path"]) for x in out if isinstance(x, dict)}
    prev, away = base, set()
    for i in range(span.ready + 1, span.after_end):
        ev = events[i]
        if ev.type != "checkpoint.commit" or not isinstance(ev.links.get("checkpoint"), str):
            continue
        tree = trees.tree_of(str(ev.links["checkpoint"]))
        if tree is None or tree == prev:
            continue
        for path, new in trees.changes(prev, tree):
            start = trees.blob_at(base, path)
            if start is not None and new == start and path in away:
                away.discard(path)
                if path not in shown:
                    shown.add(path)
                    out.append({"path": path, "how": "checkpoint_tree", "seq": ev.seq})
            elif new != start:
                away.add(path)
        prev = tree
    return out


def event_tokens(ev: Event) -> int | None:
    if ev.type != "model.call":
        return None
    for source in (ev.data.get("usage"), ev.data):
        if not isinstance(source, dict):
            continue
        total = source.get("total_tokens")
        if isinstance(total, int) and not isinstance(total, bool):
            return total
        parts = [source.get(k) for k in TOKEN_KEYS]
        nums = [p for p in parts if isinstance(p, int) and not isinstance(p, bool)]
        if nums:
            return sum(nums)
    return None


def _tick_tokens(ev: Event) -> float | None:
    if ev.type != "trigger.decision":
        return None
    signals = ev.data.get("signals")
    used = signals.get("tokens_used") if isinstance(signals, dict) else None
    return used if isinstance(used, int | float) and not isinstance(used, bool) else None


def tokens_between(
    events: Sequence[Event], lo: int, hi: int, before_lo: int
) -> tuple[int | None, str | None]:
    """Tokens of the model calls in events[lo:hi]; else the tick counter's growth."""
    found = [t for i in range(max(lo, 0), hi) if (t := event_tokens(events[i])) is not None]
    if found:
        return sum(found), "model.call"
    base = next(
        (u for i in range(lo - 1, before_lo - 1, -1) if (u := _tick_tokens(events[i])) is not None),
        None,
    )
    later = [u for i in range(max(lo, 0), hi) if (u := _tick_tokens(events[i])) is not None]
    if base is not None and later and max(later) >= base:
        return int(max(later) - base), "tick"
    return None, None
