"""A Claude Code transcript (`~/.claude/projects/<dir>/<session>.jsonl`) as events.

Records read (each line has `type`, `uuid`, `sessionId`, `timestamp`; ../shared
agents.md and the transcripts recorded in tests/fixtures/agents/):

- `user` with a string content, or text blocks: a `user.prompt` (not the lines Claude
  Code itself writes as the user: `isMeta`, `isCompactSummary`, a sidechain's task
  prompt, `<local-command-stdout>`; a slash command such as `/compact` is a prompt
  with `data.command`);
- `assistant` with `tool_use` blocks: a `tool.call` each, matched by id with the
  `tool_result` block of a later `user` line (its text is the output, `is_error` makes
  `data.status` "failed", and a `toolDenialKind` such as "interrupted", which Claude Code
  writes on restart for a call cut off by a kill, is the status); a call whose result
  never came is `status: no_result`, and a
  result that comes in a later import of the grown file is a `tool.result` event;
- `assistant` `message.usage`: one `model.call` per model reply (`message.id`; Claude
  Code writes one line per content block, all with the same id: the last usage wins),
  with input, output and cache tokens and `context_tokens` (input + cache read + cache
  creation, the size the hooks use); `<synthetic>` replies (no model call) are not;
- `system` with `subtype: compact_boundary`: a `context.compacted` event with
  `trigger`, `tokens_before` (`compactMetadata.preTokens`) and `tokens_after` (the
  context of the next model reply; null when the file ends before one).

Everything else (summaries, file snapshots, other system lines) is read and ignored.
"""

from __future__ import annotations

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

AGENT = "claude-code"

_NOT_PROMPTS = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>")
_COMMAND_RE = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_ARGS_RE = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
_QUOTA_ERRORS = ("rate_limit", "billing_error")
_QUOTA_WORDS = ("usage limit", "rate limit", "rate_limit", "quota")


class _Reader:
    def __init__(self, summarize: Summarizer) -> None:
        self.p = Parsed()
        self.s = summarize
        self.calls: dict[str, Proposed] = {}  # tool_use id -> its tool.call, until its result
        self.models: dict[str, Proposed] = {}  # message id -> its model.call
        self.awaiting: list[Proposed] = []  # compactions waiting for the next model reply

    def line(self, line: Line) -> None:
        obj = self.p.take(line, AGENT)
        if obj is None:
            return
        sid = obj.get("sessionId")
        self.p.session(sid if isinstance(sid, str) else None)
        type_ = obj.get("type")
        if type_ == "user":
            self.user(line, obj)
        elif type_ == "assistant":
            self.assistant(line, obj)
        elif type_ == "system" and obj.get("subtype") == "compact_boundary":
            self.compaction(line, obj)

    # -- records --------------------------------------------------------------------

    def _base(self, line: Line, obj: dict[str, JSON]) -> tuple[str | None, str, dict[str, JSON]]:
        sid = obj.get("sessionId")
        record = obj.get("uuid")
        record = record if isinstance(record, str) and record else f"line-{line.digest}"
        data: dict[str, JSON] = {"at": obj.get("timestamp"), "record": record, "line": line.number}
        if obj.get("isSidechain") is True:
            data["sidechain"] = True
        return (sid if isinstance(sid, str) else None), record, data

    def user(self, line: Line, obj: dict[str, JSON]) -> None:
        msg = obj.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                self.result(line, obj, block)
            if results:
                return
        if obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("isSidechain"):
            return
        text = text_of(content)
        if not text.strip() or text.lstrip().startswith(_NOT_PROMPTS):
            return
        sid, record, data = self._base(line, obj)
        command = _COMMAND_RE.search(text)
        if command:
            data["command"] = self.s.text(command.group(1))[:200]
            args = _ARGS_RE.search(text)
            if args and args.group(1).strip():
                data["args"] = self.s.text(args.group(1).strip())
        first = text.strip().splitlines()[0]
        data["message"] = self.s.text(str(data.get("command") or first))[:60]
        keys = [f"prompt:{record}"]
        prompt_id = obj.get("promptId")
        if isinstance(prompt_id, str) and prompt_id:  # what a UserPromptSubmit hook names
            data["prompt_id"] = prompt_id
            keys.append(f"promptid:{prompt_id}")
        self.p.events.append(
            Proposed(
                "prompt",
                "user.prompt",
                keys,
                sid,
                input={"prompt": text, "bytes": size_of(text)},
                data=data,
            )
        )

    def result(self, line: Line, obj: dict[str, JSON], block: dict[str, JSON]) -> None:
        tid = block.get("tool_use_id")
        if not isinstance(tid, str) or not tid:
            return
        sid, record, data = self._base(line, obj)
        text = text_of(block.get("content"))
        output: dict[str, JSON] = {"text": text, "bytes": size_of(text)}
        status = "failed" if block.get("is_error") is True else "ok"
        denial = obj.get("toolDenialKind")  # "interrupted": the session died in the call
        if isinstance(denial, str) and denial:
            status = denial
        call = self.calls.pop(tid, None)
        if call is None:  # its tool_use is not in this file: the result alone
            data.update(status=status, message=f"result: {status}")
            keys = [f"result:{tid}"]
            ev = Proposed("tool_result", "tool.result", keys, sid, tid, None, output, data)
            self.p.events.append(ev)
            return
        call.output = output
        call.keys.append(f"result:{tid}")
        tool = call.data.get("tool")
        call.data.update(
            status=status,
            message=f"{tool}: {status}",
            result_at=data["at"],
            result_record=record,
            result_line=line.number,
        )

    def assistant(self, line: Line, obj: dict[str, JSON]) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return
        sid, record, data = self._base(line, obj)
        self.model_call(line, msg, obj, sid, record, dict(data))
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            tid = block.get("id")
            if not isinstance(tid, str) or not tid:
                continue
            name = block.get("name")
            tool = name if isinstance(name, str) else "?"
            call = Proposed(
                "tool_call",
                "tool.call",
                [f"call:{tid}"],
                sid,
                tid,
                input=block.get("input"),
                data={**data, "tool": tool, "status": "no_result", "message": f"{tool}: no result"},
            )
            self.calls[tid] = call
            self.p.events.append(call)

    def model_call(
        self,
        line: Line,
        msg: dict[str, JSON],
        obj: dict[str, JSON],
        sid: str | None,
        record: str,
        data: dict[str, JSON],
    ) -> None:
        usage, model = msg.get("usage"), msg.get("model")
        if obj.get("isApiErrorMessage") is True:
            self.api_error(msg, obj, sid, record, data)
            return
        if not isinstance(usage, dict) or model == "<synthetic>":
            return
        mid = msg.get("id") or obj.get("requestId") or record
        counts = usage_of(usage, sidechain=bool(data.get("sidechain")))
        known = self.models.get(str(mid))
        if known is not None:  # another content block of the same reply
            before = known.data.get("usage")
            if isinstance(before, dict) and (counts["output_tokens"] or 0) >= (
                before.get("output_tokens") or 0
            ):
                known.data["usage"] = counts
            if isinstance(msg.get("stop_reason"), str):
                known.data["stop_reason"] = msg["stop_reason"]
            return
        data.update(model=model if isinstance(model, str) else None, usage=counts)
        data["message_id"] = str(mid)
        if isinstance(msg.get("stop_reason"), str):
            data["stop_reason"] = msg["stop_reason"]
        context = counts.get("context_tokens")
        data["message"] = f"{data['model']}: {context} tokens in context"
        ev = Proposed("model_call", "model.call", [f"model:{mid}"], sid, data=data)
        self.models[str(mid)] = ev
        self.p.events.append(ev)
        if context is not None and not data.get("sidechain"):
            for compaction in self.awaiting:
                compaction.data["next_reply_tokens"] = context
                if compaction.data.get("tokens_after") is None:
                    compaction.data["tokens_after"] = context
                compaction.data["message"] = compaction_message(compaction.data)
            self.awaiting.clear()

    def api_error(
        self,
        msg: dict[str, JSON],
        obj: dict[str, JSON],
        sid: str | None,
        record: str,
        data: dict[str, JSON],
    ) -> None:
        """A reply Claude Code wrote for a failed request: a usage or rate limit is a
        `quota.exceeded`, any other error a `model.error` (both say why a session stopped)."""
        text = text_of(msg.get("content")).strip()
        kind = obj.get("error")
        kind = kind if isinstance(kind, str) else None
        quota = kind in _QUOTA_ERRORS or any(w in text.lower() for w in _QUOTA_WORDS)
        error = self.s.text(text or str(kind))
        data.update(error=error, kind=kind, message=error[:60])
        kind_, type_ = ("quota", "quota.exceeded") if quota else ("error", "model.error")
        self.p.events.append(Proposed(kind_, type_, [f"error:{record}"], sid, data=data))

    def compaction(self, line: Line, obj: dict[str, JSON]) -> None:
        sid, record, data = self._base(line, obj)
        meta = obj.get("compactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        trigger = meta.get("trigger")
        data.update(
            trigger=trigger if isinstance(trigger, str) else None,
            tokens_before=as_int(meta.get("preTokens")),
            tokens_after=as_int(meta.get("postTokens")),  # Claude Code 2.1 writes it
        )
        data["message"] = compaction_message(data)
        ev = Proposed("compaction", "context.compacted", [f"compact:{record}"], sid, data=data)
        self.awaiting.append(ev)
        self.p.events.append(ev)


def compaction_message(c: dict[str, JSON]) -> str:
    after = c.get("tokens_after")
    return f"{c.get('trigger')} compaction: {c.get('tokens_before')} -> {after} tokens"


def usage_of(usage: dict[str, JSON], sidechain: bool = False) -> dict[str, JSON]:
    """A reply's token counts; `context_tokens` = input + cache read + cache creation
    (not for a sidechain: a sub-agent's context is not the session's)."""
    names = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    counts: dict[str, JSON] = {n: as_int(usage.get(n)) for n in names}
    if not sidechain:
        counts["context_tokens"] = sum(
            as_int(usage.get(n)) or 0 for n in (names[0], names[2], names[3])
        )
    return counts


def parse(lines: Iterable[Line], summarize: Summarizer) -> Parsed:
    reader = _Reader(summarize)
    for line in lines:
        reader.line(line)
    return reader.p
