"""Task-state changes between two checkpoints (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from git_agentckpt.model import JSON

_FIELDS = ("goal", "status", "current_step")


def state_changes(a: Mapping[str, JSON], b: Mapping[str, JSON]) -> list[dict[str, JSON]]:
    out: list[dict[str, JSON]] = []
    for key in _FIELDS:
        if a.get(key) != b.get(key):
            out.append({"field": key, "from": a.get(key), "to": b.get(key)})
    steps_a = {s["id"]: s for s in a.get("steps") or [] if isinstance(s, dict)}
    for step in b.get("steps") or []:
        if not isinstance(step, dict):
            continue
        old = steps_a.get(step["id"])
        if old is None:
            out.append({"field": f"steps.{step['id']}", "from": None, "to": step.get("status")})
        elif old.get("status") != step.get("status"):
            out.append(
                {
                    "field": f"steps.{step['id']}",
                    "from": old.get("status"),
                    "to": step.get("status"),
                }
            )
    ca = set(a.get("constraints") or [])
    for c in b.get("constraints") or []:
        if c not in ca:
            out.append({"field": "constraints", "from": None, "to": c})
    for key in ("usage", "env"):
        va, vb = a.get(key) or {}, b.get(key) or {}
        if isinstance(va, dict) and isinstance(vb, dict):
            for k in sorted(set(va) | set(vb)):
                if va.get(k) != vb.get(k):
                    out.append({"field": f"{key}.{k}", "from": va.get(k), "to": vb.get(k)})
    return out
