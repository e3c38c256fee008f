"""The hook entries of `git ckpt` in an agent's settings JSON: merged in, and taken out.

Claude Code and Codex read the same shape:
`{"hooks": {"EVENT": [{"matcher": "…", "hooks": [{"type": "command", "command": "…",
"timeout": N}]}]}}`. One group of ours per event is appended after the user's own groups.
A group is ours when every hook in it is exactly our command for that event, so a user's
group is never touched, even one that also calls `git ckpt`.

What removal needs to give the bytes back (`json_edit`) is kept in a record entry (plain
JSON, no content of the file): whether the file, `hooks` and each event's array were
created, and the whitespace inside a container that was empty when a child was put in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from git_agentckpt.integrations import json_edit
from git_agentckpt.integrations.json_edit import JsonTextError, Node

NEW_FILE = "{}\n"  # a file that did not exist is edited as if it held this


@dataclass(frozen=True)
class HookSpec:
    event: str
    matcher: str | None  # None: every occurrence of the event (all tools, all sources)
    timeout: int  # seconds, as both agents read `timeout`


def command(agent: str, event: str) -> str:
    """The command line each hook runs (the entry point `git ckpt hook AGENT EVENT`)."""
    return f"git ckpt hook {agent} {event}"


def group(agent: str, spec: HookSpec) -> dict[str, Any]:
    hook = {"type": "command", "command": command(agent, spec.event), "timeout": spec.timeout}
    out: dict[str, Any] = {} if spec.matcher is None else {"matcher": spec.matcher}
    out["hooks"] = [hook]
    return out


def is_ours(value: Any, agent: str, event: str) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("hooks"), list):
        return False
    hooks = value["hooks"]
    want = command(agent, event)
    return bool(hooks) and all(isinstance(h, dict) and h.get("command") == want for h in hooks)


@dataclass
class Edit:
    text: str
    entry: dict[str, Any]  # the record entry after the edit
    count: int  # hook groups added or removed


def _shape_error(text: str, node: Node, what: str) -> JsonTextError:
    return JsonTextError(what, json_edit.line_of(text, node.start))


def _value(text: str, node: Node) -> Any:
    import json

    return json.loads(text[node.start : node.end])


def merge(text: str, agent: str, specs: tuple[HookSpec, ...], entry: dict[str, Any]) -> Edit:
    """`text` with a group of ours for every event that lacks one (JsonTextError: invalid
    JSON, or `hooks` / an event's value of the wrong type)."""
    entry = {
        "created": entry.get("created", False),
        "containers": list(entry.get("containers", [])),
        "inner": dict(entry.get("inner", {})),
    }
    root = json_edit.parse(text)
    if root.kind != "object":
        raise _shape_error(text, root, "the file holds no JSON object")
    style = json_edit.detect_style(text, root)
    count = 0
    for spec in specs:
        root = json_edit.parse(text)
        member = root.member("hooks")
        if member is None:
            value = {s.event: [group(agent, s)] for s in specs}
            text = _append(text, root, (), style, "hooks", value, entry)
            entry["containers"] += ["hooks", *(f"hooks/{s.event}" for s in specs)]
            return Edit(text, entry, len(specs))
        hooks = member.value
        if hooks.kind != "object":
            raise _shape_error(text, hooks, '"hooks" is not a JSON object')
        event = hooks.member(spec.event)
        if event is None:
            text = _append(text, hooks, ("hooks",), style, spec.event, [group(agent, spec)], entry)
            if f"hooks/{spec.event}" not in entry["containers"]:
                entry["containers"].append(f"hooks/{spec.event}")
        elif event.value.kind != "array":
            raise _shape_error(text, event.value, f'"hooks"."{spec.event}" is not a JSON array')
        elif any(is_ours(_value(text, n), agent, spec.event) for n in event.value.items):
            continue
        else:
            path = ("hooks", spec.event)
            text = _append(text, event.value, path, style, None, group(agent, spec), entry)
        count += 1
    return Edit(text, entry, count)


def _append(
    text: str,
    container: Node,
    path: tuple[str, ...],
    style: json_edit.Style,
    key: str | None,
    value: Any,
    entry: dict[str, Any],
) -> str:
    done = json_edit.append_child(text, container, style, key, value)
    if done.inner is not None:
        entry["inner"]["/".join(path)] = done.inner
    return done.text


def strip(text: str, agent: str, specs: tuple[HookSpec, ...], entry: dict[str, Any] | None) -> Edit:
    """`text` without our groups, and without the containers the record says we created
    once they are empty (no record: a container left empty is taken as ours)."""
    known = entry is not None
    entry = entry or {}
    created = set(entry.get("containers", []))
    inner: dict[str, str] = entry.get("inner", {})
    count = 0
    for spec in reversed(specs):
        path = ("hooks", spec.event)
        removed_here = False
        while True:
            root = json_edit.parse(text)
            array = json_edit.find(root, path)
            if array is None or array.kind != "array":
                break
            ours = [
                i for i, n in enumerate(array.items) if is_ours(_value(text, n), agent, spec.event)
            ]
            if not ours:
                ours_made = f"hooks/{spec.event}" in created if known else removed_here
                if not array.items and ours_made:
                    text = _drop_member(text, root, ("hooks",), spec.event, inner)
                break
            text = json_edit.remove_child(text, array, ours[-1], inner.get("/".join(path)))
            count += 1
            removed_here = True
    root = json_edit.parse(text)
    hooks = json_edit.find(root, ("hooks",))
    if (
        hooks is not None
        and hooks.kind == "object"
        and not hooks.members
        and count
        and ("hooks" in created or not known)
    ):
        text = _drop_member(text, root, (), "hooks", inner)
    return Edit(text, entry, count)


def _drop_member(
    text: str, root: Node, path: tuple[str, ...], key: str, inner: dict[str, str]
) -> str:
    parent = json_edit.find(root, path)
    assert parent is not None
    index = max(i for i, m in enumerate(parent.members) if m.key == key)
    return json_edit.remove_child(text, parent, index, inner.get("/".join(path)))


def is_empty_object(text: str) -> bool:
    """Whether `text` is an empty JSON object, whatever its whitespace (a created file
    left so after `strip` is deleted)."""
    try:
        root = json_edit.parse(text)
    except JsonTextError:
        return False
    return root.kind == "object" and not root.members
