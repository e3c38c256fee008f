"""Reading an agent's session file (Claude Code transcript, Codex rollout) as records.

Both agents write JSON Lines. This module opens the file read-only (never written,
never locked, its mtime untouched), yields each line's JSON object with its line
number, and names what it skipped: a line that is not a JSON object is a `Malformed`
record (the importer warns with its line number). It also holds what both parsers
share: the `Proposed` event a record turns into, with its idempotency keys, and the
summarising of big tool inputs and outputs (redacted first, then capped, so a cut
never leaves half a secret behind).

Nothing here imports the store: the parsers (`claude_transcript.py`,
`codex_rollout.py`) turn records into `Proposed` events, and `importing.py` appends
the new ones to a task's log through `Workspace.append_events`.
"""

from __future__ import annotations

import errno
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from git_agentckpt.errors import BadStateError, SystemRefused
from git_agentckpt.model import JSON, NewEvent, dumps

__all__ = [
    "AGENTS",
    "Line",
    "Parsed",
    "Proposed",
    "Summarizer",
    "read_lines",
]

AGENTS = ("claude-code", "codex")

TEXT_CAP = 4096  # characters kept of one string of a tool input or output (head + tail)
VALUE_CAP = 16 * 1024  # bytes of canonical JSON kept of one input or output in all
LIST_CAP = 50  # items kept of one list
DEPTH_CAP = 20  # levels kept of nested objects
MAX_LINE = 64 << 20  # bytes of one line read at most (a record: a whole tool output)


@dataclass(frozen=True)
class Line:
    """One line of the file: its number (from 1), its JSON object (None: malformed, with
    `problem` saying why) and a digest of its bytes (Codex records have no id)."""

    number: int
    obj: dict[str, JSON] | None
    digest: str
    problem: str = ""


def read_lines(path: str, shown: str) -> Iterator[Line]:
    """The lines of `path`, read-only, one at a time (a transcript can be large).

    Blank lines are skipped; a line that is not UTF-8 JSON of an object is yielded with
    `obj=None`. An unreadable file is a BadStateError naming it (`shown`); a line longer
    than MAX_LINE a SystemRefused (exit 7)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; read-only, nothing written
    except OSError as exc:
        raise BadStateError(
            f"cannot read transcript {shown!r}: {exc.strerror}",
            hint="give the path of the session's .jsonl file",
        ) from exc
    with fh:
        for number, raw in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), b""), start=1):
            if len(raw) > MAX_LINE:
                raise _too_long(shown, number)
            data = raw.rstrip(b"\r\n")
            if not data.strip():
                continue
            digest = hashlib.sha256(data).hexdigest()[:20]
            try:
                obj = json.loads(data.decode("utf-8"))
            except UnicodeDecodeError:
                yield Line(number, None, digest, "not UTF-8")
                continue
            except (ValueError, RecursionError):
                yield Line(number, None, digest, "not valid JSON")
                continue
            if not isinstance(obj, dict):
                yield Line(number, None, digest, "not a JSON object")
                continue
            yield Line(number, obj, digest)


def _too_long(shown: str, number: int) -> SystemRefused:
    """A line past MAX_LINE: reading on would fill the memory (`/dev/zero` never ends)."""
    return SystemRefused(
        f"cannot read transcript {shown!r}: line {number} is longer than "
        f"{MAX_LINE >> 20} MiB, more than is read into memory",
        hint="give the path of the session's .jsonl file (one JSON record a line)",
        errno=errno.ENOMEM,
    )


@dataclass
class Proposed:
    """An event a parser proposes, with the keys that make importing it idempotent.

    `input` and `output` are the agent's values as recorded (`to_event` summarises them);
    `data` holds only short values, already redacted where they are cut.
    `keys`: the records this event stands for (`call:ID` and `result:ID` for a tool call
    with its result, `prompt:RECORD`, ...), stored in the event's `actor.import`; an
    event whose every key is already in the task's log is not appended again. `kind`
    is what the summary counts (prompt, tool_call, tool_result, model_call, compaction,
    quota)."""

    kind: str
    type: str
    keys: list[str]
    session: str | None
    call: str | None = None
    input: JSON = None
    output: JSON = None
    data: dict[str, JSON] = field(default_factory=dict)

    def to_event(self, agent: str, summarize: Summarizer) -> NewEvent:
        """The event to append: `input` and `output` (the agent's own values until now:
        only the events appended pay for redacting and cutting them) summarised."""
        actor: dict[str, JSON] = {"agent": agent, "import": list(self.keys)}
        if self.session:
            actor["session"] = self.session
        if self.call:
            actor["call"] = self.call
        return NewEvent(
            self.type,
            actor=actor,
            input=summarize.value(self.input),
            output=summarize.value(self.output),
            data=dict(self.data),
        )


@dataclass
class Parsed:
    """What a parser found in a file: the events in record order, the lines it skipped
    (line number, why), how many records it recognised, and the sessions seen."""

    events: list[Proposed] = field(default_factory=list)
    malformed: list[tuple[int, str]] = field(default_factory=list)
    recognised: int = 0
    other_agent: int = 0  # lines that look like the other agent's records
    lines: int = 0
    sessions: list[str] = field(default_factory=list)

    def session(self, sid: str | None) -> None:
        if sid and sid not in self.sessions:
            self.sessions.append(sid)

    def take(self, line: Line, agent: str) -> dict[str, JSON] | None:
        """`line`'s record when `agent` wrote it (counted); None for a malformed line
        (noted) or another writer's record (counted when it is the other agent's)."""
        self.lines += 1
        obj = line.obj
        if obj is None:
            self.malformed.append((line.number, line.problem))
            return None
        writer = looks_like(obj)
        if writer != agent:
            self.other_agent += writer is not None
            return None
        self.recognised += 1
        return obj


def _cap_text(text: str, limit: int = TEXT_CAP) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    return f"{head}\n… [{len(text) - len(head) - len(tail)} characters left out] …\n{tail}"


def _cap(value: JSON, depth: int = 0) -> JSON:
    if isinstance(value, str):
        return _cap_text(value)
    if depth >= DEPTH_CAP and isinstance(value, dict | list):
        return _cap_text(dumps(value))
    if isinstance(value, list):
        kept = [_cap(v, depth + 1) for v in value[:LIST_CAP]]
        if len(value) > LIST_CAP:
            kept.append(f"… [{len(value) - LIST_CAP} more items left out]")
        return kept
    if isinstance(value, dict):
        return {str(k): _cap(v, depth + 1) for k, v in value.items()}
    return value


class Summarizer:
    """Tool inputs and outputs as the event log keeps them: redacted by `redact` (the
    store's redactor: a secret is replaced whole before any cut), then each string cut
    to TEXT_CAP characters (its head and tail kept), lists to LIST_CAP items, and the
    whole value to VALUE_CAP bytes of JSON. `size` is the original's length in bytes."""

    def __init__(self, redact: Callable[[JSON], JSON]) -> None:
        self.redact = redact

    def value(self, value: JSON) -> JSON:
        if value is None:
            return None
        kept = _cap(self.redact(value))
        text = dumps(kept)
        if len(text.encode("utf-8", "surrogatepass")) > VALUE_CAP:
            return {"summary": _cap_text(text, VALUE_CAP // 2), "left_out": True}
        return kept

    def text(self, text: str) -> str:
        redacted = self.redact(text)
        return _cap_text(redacted if isinstance(redacted, str) else str(redacted))


def size_of(value: JSON) -> int:
    """Bytes of a value as the agent recorded it (text as UTF-8, anything else as JSON)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(dumps(value).encode("utf-8", "surrogatepass"))


def text_of(content: JSON) -> str:
    """The text of a message or tool result content: a string, or a list of blocks
    (`{"type": "text", "text": ...}`; other blocks, e.g. images, as `[image]`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return "" if content is None else dumps(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(block.get("type"), str):
                parts.append(f"[{block['type']}]")
    return "\n".join(parts)


def as_int(value: JSON) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


CODEX_TYPES = (
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
    "token_usage_record",
    "world_state",
)


def looks_like(obj: dict[str, JSON]) -> str | None:
    """Which agent wrote a record: `codex` (`{timestamp, type, payload}`), `claude-code`
    (`type` with `uuid` and `sessionId`, or one of its id-less record types), else None."""
    type_ = obj.get("type")
    if not isinstance(type_, str):
        return None
    if "payload" in obj and type_ in CODEX_TYPES:
        return "codex"
    if "payload" in obj:
        return None
    if ("uuid" in obj and "sessionId" in obj) or type_ in CLAUDE_ID_LESS:
        return "claude-code"
    return None


# Claude Code record types that carry no uuid (titles, snapshots of edited files, queue)
CLAUDE_ID_LESS = ("summary", "file-history-snapshot", "queue-operation", "custom-title")
