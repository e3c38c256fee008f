"""Checkpoint commit messages: a subject, then one `Key: value` trailer a line.

The trailers name the checkpoint (`Checkpoint-Id`), its task, kind, trigger, step,
sequence number, and the user's baseline and HEAD. Only these keys are read back, from
the last paragraph only, so a subject or a value cannot forge one.
"""

from __future__ import annotations

from collections.abc import Mapping

TRAILER_KEYS = ("Checkpoint-Id", "Task", "Kind", "Trigger", "Step", "Seq", "Baseline", "Head")


def checkpoint_message(subject: str, trailers: Mapping[str, str]) -> str:
    lines = [subject.replace("\n", " ").strip(), ""]
    # one line each: a newline in a value (`--trigger`) would forge another trailer
    lines += [f"{k}: {' '.join(v.split())}" for k, v in trailers.items()]
    return "\n".join(lines) + "\n"


def parse_trailers(message: str) -> dict[str, str]:
    paragraphs = message.strip().split("\n\n")
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines() if len(paragraphs) > 1 else []:
        key, sep, value = line.partition(": ")
        if sep and key in TRAILER_KEYS:
            out[key] = value.strip()
    return out
