"""Filters of `git ckpt log` (`--type`, `--step`, `--since`, `--actor`) and the compact
details line its text output prints under an event (inputs, outputs, tokens).

A filter is applied to each event's checked JSON object while the log streams
(store/log_stream.py), so memory stays constant and `-n N` stops reading once it has
N matching events. `--since` takes a relative age (`90s`, `30m`, `2h`, `3d`, `1w`), a
date or date and time (ISO 8601; without a zone it is local time, as in git), or a
checkpoint id: then the log is shown from that checkpoint's `checkpoint.prepare`
event on (its position in the log, not its clock time).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from git_agentckpt.errors import UsageError
from git_agentckpt.model import JSON, iso_now

_AGE = re.compile(r"^\s*(\d{1,9})\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
START_EVENT = "checkpoint.prepare"  # the first event naming a checkpoint


@dataclass(frozen=True)
class LogFilter:
    """Which events `log` shows. Empty fields select everything."""

    types: tuple[str, ...] = ()  # `tool.` or `tool`: every tool.* type; `tool.call`: that one
    step: str | None = None  # links.step
    actor: str | None = None  # any actor value, or `key=value` for one actor field
    since_ts: str | None = None  # events with ts >= this (UTC, the log's own format)
    since_commit: str | None = None  # events from this checkpoint's prepare event on

    @property
    def empty(self) -> bool:
        return not (self.types or self.step or self.actor or self.since_ts or self.since_commit)

    def opens(self, obj: Mapping[str, JSON]) -> bool:
        """Whether `obj` is the event from which a `since_commit` filter shows the log."""
        if obj.get("type") != START_EVENT:
            return False
        links = obj.get("links")
        return isinstance(links, dict) and links.get("checkpoint") == self.since_commit

    def match(self, obj: Mapping[str, JSON]) -> bool:
        """Whether `obj` passes the type, step, actor and time filters (not the position
        filter `since_commit`, which the stream applies)."""
        if self.types and not type_matches(str(obj.get("type")), self.types):
            return False
        if self.step is not None:
            links = obj.get("links")
            if not isinstance(links, dict) or links.get("step") != self.step:
                return False
        if self.actor is not None and not actor_matches(obj.get("actor"), self.actor):
            return False
        if self.since_ts is not None:
            ts = obj.get("ts")
            if not isinstance(ts, str) or ts < self.since_ts:
                return False
        return True


def type_matches(type_: str, wanted: tuple[str, ...]) -> bool:
    for w in wanted:
        if w.endswith("."):
            if type_.startswith(w):
                return True
        elif type_ == w or type_.startswith(w + "."):
            return True
    return False


def actor_matches(actor: JSON, wanted: str) -> bool:
    if not isinstance(actor, dict):
        return False
    key, sep, value = wanted.partition("=")
    if sep and key:
        return str(actor.get(key, "")) == value
    return any(str(v) == wanted for v in actor.values() if v is not None)


def parse_since(text: str, now: float | None = None) -> str | None:
    """The UTC timestamp (the log's format) that `--since TEXT` names, or None when
    TEXT is neither an age nor a date (the caller tries a checkpoint id)."""
    age = _AGE.match(text)
    if age:
        seconds = int(age.group(1)) * _SECONDS[age.group(2)]
        return iso_now((time.time() if now is None else now) - seconds)
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as git's --since
    return iso_now(when.astimezone(UTC).timestamp())


def bad_since(text: str) -> UsageError:
    return UsageError(
        f"--since {text!r} is not an age, a date or a checkpoint id of this task",
        hint="use e.g. --since 2h, --since 3d, --since 2026-11-30T14:00 or a checkpoint id",
    )


# -- the details line of the text output -------------------------------------------------

DETAIL_WIDTH = 72  # each value is cut to this many characters
_CONTROLS = {c: " " for c in [*range(32), *range(0x7F, 0xA0)]}


def compact(value: JSON, width: int = DETAIL_WIDTH) -> str:
    """A one-line rendering of a payload: strings as they are, anything else as compact
    JSON; runs of white space and control characters become one space (nothing from a
    payload reaches the terminal as a control sequence); cut to `width` with `…`."""
    if (
        value.__class__ is str  # the usual value, already compact: as it is
        and len(value) <= width
        and value.isprintable()  # no control character, no white space but " "
        and "  " not in value
        and value[:1] != " "
        and value[-1:] != " "
    ):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text[: width * 8].translate(_CONTROLS).split())  # a long value: its head
    return text if len(text) <= width else text[: width - 1] + "…"


def tokens_of(obj: Mapping[str, JSON]) -> list[tuple[str, int | float]]:
    """The token counts an event reports: keys ending in `tokens` in `data`,
    `data.usage` and `output.usage` (first found wins), `_tokens` cut off."""
    data = obj.get("data")
    output = obj.get("output")
    if not isinstance(data, dict) and not isinstance(output, dict):
        return []  # the usual tool event: nowhere to look
    found: dict[str, int | float] = {}
    places: list[JSON] = []
    if isinstance(data, dict):
        places += [data, data.get("usage")]
    if isinstance(output, dict):
        places.append(output.get("usage"))
    for place in places:
        if not isinstance(place, dict):
            continue
        for key, value in place.items():
            if not key.endswith("tokens") or isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                name = key[: -len("_tokens")] if key.endswith("_tokens") else key
                found.setdefault(name or key, value)
    return list(found.items())


def details_line(obj: Mapping[str, JSON], width: int = DETAIL_WIDTH) -> str:
    """`in: … | out: … | tokens: input=1200 output=300` (empty when there is none)."""
    bits: list[str] = []
    for key, label in (("input", "in"), ("output", "out")):
        value = obj.get(key)
        if value is not None:
            bits.append(f"{label}: {compact(value, width)}")
    tokens = tokens_of(obj)
    if tokens:
        only = len(tokens) == 1 and tokens[0][0] == "tokens"
        shown = str(tokens[0][1]) if only else " ".join(f"{k}={v}" for k, v in tokens)
        bits.append(f"tokens: {shown}")
    return " | ".join(bits)


__all__ = [
    "LogFilter",
    "actor_matches",
    "bad_since",
    "compact",
    "details_line",
    "parse_since",
    "tokens_of",
    "type_matches",
]
