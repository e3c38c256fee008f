"""A Codex rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl`) as events.

Each line is `{timestamp, type, payload}` (codex-rs `RolloutLine`); records have no id,
so a record's id is the digest of its line's bytes (`line-<sha256 prefix>`, with `#N`
for the Nth identical line). Records read:

- `session_meta` (`payload.id`: the session) and `turn_context` (`payload.model`);
- `event_msg` `user_message`: a `user.prompt` (when a rollout holds none, its
  `response_item` user messages are, except the `<environment_context>` and
  instruction blocks Codex writes itself);
- `response_item` `function_call` / `custom_tool_call` / `local_shell_call`: a
  `tool.call`, matched by `call_id` with its `function_call_output` /
  `custom_tool_call_output` (a JSON `arguments` string is parsed; an output object's
  `success: false`, or an exit status other than 0 in the output's header, makes the
  status "failed"; the exit status is `data.exit_code`);
- `event_msg` `token_count`: a `model.call` when `info.total_token_usage` grew (one
  per model reply; a repeat with the same totals only refreshes rate limits), with
  `last_token_usage` as usage and its `total_tokens` as `context_tokens`; its
  `rate_limits` as a `model.rate_limits` event when they changed (primary and secondary
  windows: `used_percent`, `window_minutes`, `resets_at`), and a `quota.warning` the
  first time a window reaches QUOTA_WARNING_PERCENT before it resets;
- `compacted` and `event_msg` `context_compacted` (one compaction when both are
  written for it): a `context.compacted` event, `tokens_before` the context of the
  reply before it and `tokens_after` that of the next one;
- `event_msg` `error`: a `quota.exceeded` event for a usage limit or rate limit
  (`codex_error_info`), a `model.error` for any other; `rate_limits` with a
  `rate_limit_reached_type`: a `quota.exceeded` too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Iterable

from git_agentckpt.integrations.transcripts import (
    Line,
    Parsed,
    Proposed,
    Summarizer,
    as_int,
    size_of,
    text_of,
)
from git_agentckpt.model import JSON

AGENT = "codex"
QUOTA_WARNING_PERCENT = 90.0  # a rate-limit window this full is a quota warning
_QUOTA_ERRORS = ("usage_limit_exceeded", "rate_limited")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_OWN_USER_TEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


class _Reader:
    def __init__(self, summarize: Summarizer) -> None:
        self.p = Parsed()
        self.s = summarize
        self.session: str | None = None
        self.model: str | None = None
        self.seen: dict[str, int] = {}  # line digest -> how many times so far
        self.calls: dict[str, Proposed] = {}  # call_id -> its tool.call, until its output
        self.totals: JSON = None  # the last token_count's total_token_usage
        self.context: int | None = None  # the context of the last model reply
        self.compaction: Proposed | None = None  # the last one, until the next reply
        self.limits: JSON = None  # the last rate limits reported
        self.warned: set[tuple[str, JSON]] = set()  # (window, resets_at) warned about
        self.user_messages: list[Proposed] = []  # response_item user messages (fallback)
        self.last: JSON = None  # the last token_count's last_token_usage
        self.response_id: str | None = None  # of the last token_usage_record
        self.reached: JSON = None  # the last rate_limit_reached_type
        self.prompts = 0

    def line(self, line: Line) -> None:
        obj = self.p.take(line, AGENT)
        if obj is None:
            return
        n = self.seen.get(line.digest, 0)
        self.seen[line.digest] = n + 1
        record = f"line-{line.digest}" + (f"#{n + 1}" if n else "")
        payload = obj.get("payload")
        if not isinstance(payload, dict):
            return
        data: dict[str, JSON] = {"at": obj.get("timestamp"), "record": record, "line": line.number}
        type_, kind = obj.get("type"), payload.get("type")
        if type_ == "session_meta":
            sid = payload.get("id")
            self.session = sid if isinstance(sid, str) else self.session
            self.p.session(self.session)
        elif type_ == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif type_ == "compacted":
            self.compacted(record, data, payload)
        elif type_ == "response_item":
            self.response_item(kind, record, data, payload)
        elif type_ == "event_msg":
            self.event_msg(kind, record, data, payload, obj.get("timestamp"))
        elif type_ == "token_usage_record" and isinstance(payload.get("response_id"), str):
            self.response_id = payload["response_id"]

    def add(self, ev: Proposed) -> Proposed:
        self.p.events.append(ev)
        return ev

    # -- response items -------------------------------------------------------------

    def response_item(
        self, kind: JSON, record: str, data: dict[str, JSON], payload: dict[str, JSON]
    ) -> None:
        if kind in _CALLS:
            self.call(kind, data, payload)
        elif kind in _OUTPUTS:
            self.output(data, payload)
        elif kind == "message" and payload.get("role") == "user" and _typed(payload):
            text = text_of(payload.get("content"))
            if text.strip() and not text.lstrip().startswith(_OWN_USER_TEXT):
                self.user_messages.append(self.prompt(record, data, text, add=False))

    def call(self, kind: JSON, data: dict[str, JSON], payload: dict[str, JSON]) -> None:
        cid = payload.get("call_id") or payload.get("id")
        if not isinstance(cid, str) or not cid:
            return
        name = payload.get("name")
        tool = name if isinstance(name, str) else "?"
        if kind == "local_shell_call":
            tool = "local_shell"
        raw = payload.get("arguments", payload.get("input", payload.get("action")))
        if isinstance(raw, str) and kind == "function_call":
            with contextlib.suppress(ValueError, RecursionError):  # else kept as text
                raw = json.loads(raw)
        data.update(tool=tool, status="no_result", message=f"{tool}: no result")
        keys = [f"call:{cid}"]
        ev = Proposed("tool_call", "tool.call", keys, self.session, cid, raw, None, data)
        self.calls[cid] = self.add(ev)

    def output(self, data: dict[str, JSON], payload: dict[str, JSON]) -> None:
        cid = payload.get("call_id")
        if not isinstance(cid, str) or not cid:
            return
        out = payload.get("output")
        status = "ok"
        if isinstance(out, dict):  # {content, success}
            status = "failed" if out.get("success") is False else "ok"
            out = out.get("content")
        text = text_of(out)
        output: dict[str, JSON] = {"text": text, "bytes": size_of(text)}
        code = exit_code_of(text)
        if code is not None:
            data["exit_code"] = code
            status = "failed" if code != 0 else status
        call = self.calls.pop(cid, None)
        if call is None:
            data.update(status=status, message=f"result: {status}")
            keys = [f"result:{cid}"]
            sid = self.session
            self.add(Proposed("tool_result", "tool.result", keys, sid, cid, None, output, data))
            return
        tool = call.data.get("tool")
        call.output = output
        call.keys.append(f"result:{cid}")
        call.data.update(
            status=status,
            message=f"{tool}: {status}",
            result_at=data["at"],
            result_record=data["record"],
            result_line=data["line"],
        )
        if code is not None:
            call.data["exit_code"] = code

    def prompt(self, record: str, data: dict[str, JSON], text: str, add: bool = True) -> Proposed:
        data["message"] = self.s.text(text.strip().splitlines()[0])[:60]
        ev = Proposed(
            "prompt",
            "user.prompt",
            [f"prompt:{record}"],
            self.session,
            input={"prompt": text, "bytes": size_of(text)},
            data=data,
        )
        if add:
            self.prompts += 1
            self.add(ev)
        return ev

    # -- event messages -------------------------------------------------------------

    def event_msg(
        self, kind: JSON, record: str, data: dict[str, JSON], payload: dict[str, JSON], at: JSON
    ) -> None:
        if kind == "user_message":
            text = payload.get("message")
            if isinstance(text, str) and text.strip():
                self.prompt(record, data, text)
        elif kind == "token_count":
            self.token_count(record, data, payload, at)
        elif kind == "context_compacted":
            self.compacted(record, data, payload)
        elif kind == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "ContextCompaction":
                self.compacted(record, data, {})
        elif kind == "error":
            self.error(record, data, payload)

    def token_count(
        self, record: str, data: dict[str, JSON], payload: dict[str, JSON], at: JSON
    ) -> None:
        info = payload.get("info")
        if isinstance(info, dict):
            last = info.get("last_token_usage")
            last = last if isinstance(last, dict) else {}
            if info.get("total_token_usage") != self.totals:
                self.totals = info.get("total_token_usage")
                self.model_call(record, dict(data), last, info)
            elif self.compaction is not None and last != self.last:
                # the same totals, a new last usage: Codex's count of the compacted history
                estimate = as_int(last.get("total_tokens"))
                if estimate is not None and self.compaction.data.get("tokens_after") is None:
                    self.compaction.data["tokens_after"] = estimate
                    self.compaction.data["message"] = compaction_message(self.compaction.data)
                self.context = estimate
            self.last = last
        limits = payload.get("rate_limits")
        if isinstance(limits, dict):
            self.rate_limits(record, data, limits, at)

    def model_call(
        self, record: str, data: dict[str, JSON], last: dict[str, JSON], info: dict[str, JSON]
    ) -> None:
        usage = usage_of(last)
        context = as_int(usage.get("context_tokens"))
        data.update(
            model=self.model,
            usage=usage,
            context_window=as_int(info.get("model_context_window")),
            message=f"{self.model}: {context} tokens in context",
        )
        if self.response_id:
            data["response_id"] = self.response_id
            self.response_id = None
        self.add(Proposed("model_call", "model.call", [f"model:{record}"], self.session, data=data))
        if self.compaction is not None and context is not None:
            c = self.compaction.data
            c["next_reply_tokens"] = context
            if c.get("tokens_after") is None:
                c["tokens_after"] = context
            c["message"] = compaction_message(c)
        self.compaction = None
        self.context = context

    def rate_limits(
        self, record: str, data: dict[str, JSON], limits: dict[str, JSON], at: JSON
    ) -> None:
        reached = limits.get("rate_limit_reached_type")
        if isinstance(reached, str) and reached and reached != self.reached:
            message = f"rate limit reached: {reached}"
            self.add(
                Proposed(
                    "quota",
                    "quota.exceeded",
                    [f"reached:{record}"],
                    self.session,
                    data={**data, "kind": reached, "error": message, "message": message},
                )
            )
        self.reached = reached
        windows: dict[str, dict[str, JSON]] = {}
        for name in ("primary", "secondary"):
            window = window_of(limits.get(name), at)
            if window is not None:
                windows[name] = window
        if not windows or windows == self.limits:
            return
        self.limits = windows
        shown = ", ".join(f"{w} {v['used_percent']}%" for w, v in windows.items())
        extra: dict[str, JSON] = {"plan_type": limits["plan_type"]} if "plan_type" in limits else {}
        self.add(
            Proposed(
                "quota",
                "model.rate_limits",
                [f"limits:{record}"],
                self.session,
                data={**data, **windows, **extra, "message": f"rate limits: {shown}"},
            )
        )
        for name, w in windows.items():
            used = w.get("used_percent")
            if not isinstance(used, int | float) or used < QUOTA_WARNING_PERCENT:
                continue
            if (name, w.get("resets_at")) in self.warned:
                continue
            self.warned.add((name, w.get("resets_at")))
            resets = w.get("resets_at_utc") or "an unknown time"
            self.add(
                Proposed(
                    "quota",
                    "quota.warning",
                    [f"warning:{name}:{record}"],
                    self.session,
                    data={
                        **data,
                        "window": name,
                        **w,
                        "message": f"{name} rate-limit window {used}% used, resets {resets}",
                    },
                )
            )

    def compacted(self, record: str, data: dict[str, JSON], payload: dict[str, JSON]) -> None:
        if self.compaction is not None:  # no model reply since: another record of it
            self.compaction.keys.append(f"compact:{record}")
            return
        summary = payload.get("message")
        data.update(  # a rollout does not say whether /compact or the limit started it
            trigger=None,
            tokens_before=self.context,
            tokens_after=None,
            message=f"compaction: {self.context} -> ? tokens",
        )
        if isinstance(summary, str):
            data["summary_bytes"] = size_of(summary)
        keys = [f"compact:{record}"]
        ev = Proposed("compaction", "context.compacted", keys, self.session, data=data)
        self.compaction = self.add(ev)

    def error(self, record: str, data: dict[str, JSON], payload: dict[str, JSON]) -> None:
        info = payload.get("codex_error_info")
        kind = next(iter(info), None) if isinstance(info, dict) else info
        message = payload.get("message")
        error = self.s.text(str(message))
        data.update(error=error, kind=kind if isinstance(kind, str) else None, message=error[:60])
        keys = [f"error:{record}"]
        if kind in _QUOTA_ERRORS:
            self.add(Proposed("quota", "quota.exceeded", keys, self.session, data=data))
        else:
            self.add(Proposed("error", "model.error", keys, self.session, data=data))


_EXIT_RE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE)


def exit_code_of(text: str) -> int | None:
    """The exit status Codex writes in the header of a command's output (`Process exited
    with code N` before `Output:`; `Exit code: N` of apply_patch), or in the older JSON
    output's `metadata.exit_code`; never read from the command's own output."""
    header = text.split("\nOutput:", 1)[0] if "\nOutput:" in text else ""
    found = _EXIT_RE.search(header)
    if found:
        return int(found.group(1))
    if text.startswith("{"):
        with contextlib.suppress(ValueError, RecursionError):
            obj = json.loads(text)
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if isinstance(meta, dict):
                return as_int(meta.get("exit_code"))
    return None


def _typed(payload: dict[str, JSON]) -> bool:
    """A user message the user typed: Codex 0.169 marks its items `user.text` (its own
    context blocks otherwise); older rollouts have no marks."""
    meta = payload.get("internal_chat_message_metadata_passthrough")
    kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
    return not isinstance(kinds, list) or "user.text" in kinds


def compaction_message(c: dict[str, JSON]) -> str:
    return f"compaction: {c.get('tokens_before')} -> {c.get('tokens_after')} tokens"


def window_of(value: JSON, at: JSON) -> dict[str, JSON] | None:
    """A rate-limit window: `used_percent`, `window_minutes`, `resets_at` (unix seconds;
    from `resets_in_seconds` and the record's time in older rollouts) and its UTC time."""
    if not isinstance(value, dict) or not isinstance(value.get("used_percent"), int | float):
        return None
    resets = as_int(value.get("resets_at"))
    if resets is None and isinstance(at, str) and as_int(value.get("resets_in_seconds")):
        try:
            base = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
            resets = int(base.timestamp()) + (as_int(value.get("resets_in_seconds")) or 0)
        except ValueError:
            resets = None
    out: dict[str, JSON] = {
        "used_percent": value["used_percent"],
        "window_minutes": as_int(value.get("window_minutes")),
        "resets_at": resets,
    }
    if resets is not None:
        when = dt.datetime.fromtimestamp(resets, tz=dt.UTC)
        out["resets_at_utc"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


def usage_of(last: dict[str, JSON]) -> dict[str, JSON]:
    """A reply's token counts (`cache_write_input_tokens` where Codex writes it); its
    `total_tokens` is `context_tokens`, the size of the context after that reply."""
    names = (
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
        "total_tokens",
    )
    counts: dict[str, JSON] = {n: as_int(last.get(n)) for n in names}
    if "cache_write_input_tokens" in last:
        counts["cache_write_input_tokens"] = as_int(last["cache_write_input_tokens"])
    total = counts["total_tokens"]
    if total is None and counts["input_tokens"] is not None:
        total = (counts["input_tokens"] or 0) + (counts["output_tokens"] or 0)
    counts["context_tokens"] = total
    return counts


def parse(lines: Iterable[Line], summarize: Summarizer) -> Parsed:
    reader = _Reader(summarize)
    for line in lines:
        reader.line(line)
    if not reader.prompts:  # no user_message events: the user messages of the history
        reader.p.events.extend(reader.user_messages)
        reader.p.events.sort(key=lambda ev: int(ev.data.get("line") or 0))
    return reader.p
