"""The checked value a constraint's form line carries, compared exactly (pure).

For a constraint with a check, the brief's form prints what the check verifies ahead of
the words the agent fills in, so the agent keeps it when it replaces the placeholder::

    - seed42: train.seed = 42 — <this constraint, in your own words>
    - api-frozen: unchanged: src/api/** — <this constraint, in your own words>

| check kind                          | the form carries                  |
| ----------------------------------- | --------------------------------- |
| json_value, yaml_value, toml_value  | `train.seed = 42` (JSON literal)  |
| max_changed_files                   | `changed files <= 5`              |
| file_sha256                         | `configs/base.json sha256 = <12 hex>` |
| file_exists                         | `results/table2.csv exists`       |
| file_contains                       | `README.md contains "## Results"` |
| file_matches                        | `results/scores.txt matches /…/`  |
| protected_paths                     | `unchanged: src/api/**, api.py`   |
| forbidden_paths                     | `never written: data/raw/**`      |
| command                             | `passes: pytest -q tests/smoke`   |

`differences` finds where a restatement states that value otherwise: `train.seed = 7`
(anywhere: the key path names it), and in the constraint's own line `changed files <= 8`,
`contains "## Findings"`, `matches /.../`, `unchanged: src/api/**` (a path left out),
`passes: ...` (another command). Values are compared as the check compares them
(`42` and `42.0` are one number; `"42"` is a string, not 42; strings are case-sensitive).
`states_value` says whether a line states the value at all: required of the lines of
equality and bound checks (`*_value`, `max_changed_files`), whose value is what they mean.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from git_agentckpt.contracts.checks import values_equal
from git_agentckpt.recovery.words import key_stems, number, tokens

_VALUE_KINDS = ("json_value", "yaml_value", "toml_value")
# a value as written: quoted, a JSON list or object, or one bare token
_VALUE = r"(\"[^\"]*\"|'[^']*'|`[^`]*`|\[[^\]]*\]|\{[^}]*\}|[^\s,;—–()]+)"
_STRICT_OP = r"\s*(?:==|=|:|≡)\s*"
_WORD_OP = (
    r"\s+(?:is|stays|remains|equals|stays at|remains at|is set to|set to|fixed at|is fixed at|"
    r"at|to|of|kept at|is kept at)\s+"
)
_END = r"(?=\s+[—–-]\s|\s*[;(]|\.?\s*$|\.\s)"


@dataclass(frozen=True)
class Carried:
    """What a constraint's form line carries, and how to read it back."""

    kind: str
    text: str  # as the form prints it
    expected: object  # the value compared: a scalar, a glob set, a string
    required: bool  # the line must state the value


def carried(check: Mapping[str, object] | None) -> Carried | None:
    if not check:
        return None
    kind = str(check.get("kind"))
    if kind in _VALUE_KINDS and "equals" in check:
        equals = check["equals"]
        return Carried(kind, f"{check.get('path')} = {show(equals)}", equals, True)
    if kind == "max_changed_files" and isinstance(check.get("max"), int):
        return Carried(kind, f"changed files <= {check['max']}", check["max"], True)
    if kind == "file_sha256" and isinstance(check.get("sha256"), str):
        sha = str(check["sha256"]).lower()
        return Carried(kind, f"{check.get('file')} sha256 = {sha[:12]}", sha, False)
    if kind == "file_exists":
        return Carried(kind, f"{check.get('file')} exists", check.get("file"), False)
    if kind == "file_contains":
        text = str(check.get("text"))
        return Carried(kind, f"{check.get('file')} contains {json.dumps(text)}", text, False)
    if kind == "file_matches":
        regex = str(check.get("regex"))
        return Carried(kind, f"{check.get('file')} matches /{regex}/", regex, False)
    if kind in ("protected_paths", "forbidden_paths"):
        paths = [str(p) for p in check.get("paths") or []]  # type: ignore[attr-defined]
        lead = "unchanged" if kind == "protected_paths" else "never written"
        return Carried(kind, f"{lead}: {', '.join(paths)}", frozenset(paths), False)
    if kind == "command":
        argv = [str(a) for a in check.get("argv") or []]  # type: ignore[attr-defined]
        return Carried(kind, f"passes: {shlex.join(argv)}", shlex.join(argv), False)
    return None


def show(value: object) -> str:
    """A value as the form prints it: JSON (`42`, `0.001`, `"adam"`, `true`)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(value)


def parse_value(raw: str) -> tuple[object, bool]:
    """A value as a restatement writes it, and whether it was written as one (quoted,
    a number, true/false/null, a list): `42` -> 42, `"42"` -> "42", `adam` -> ("adam", False)."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'`":
        return raw[1:-1], True
    try:
        return json.loads(raw), True
    except ValueError:
        pass
    try:
        return float(raw), True
    except ValueError:
        return raw, False


def _same(said: object, expected: object) -> bool:
    if isinstance(expected, str) and isinstance(said, str):
        return said == expected
    try:
        return values_equal(said, expected)
    except RecursionError:
        return False


def differences(c: Carried, text: str, own_line: bool) -> list[str]:
    """Each place `text` states the checked value otherwise, as written there
    (`train.seed = 7`). `own_line`: `text` is the constraint's own form line, where the
    form's wording (`changed files <= N`, `unchanged: ...`) is read too."""
    out: list[str] = []
    if c.kind in _VALUE_KINDS:
        path = re.escape(c.text.split(" = ", 1)[0])
        head = rf"(?<![\w.-]){path}(?![\w.-])"
        for op, strict in ((_STRICT_OP, True), (_WORD_OP, False)):
            for m in re.finditer(head + op + _VALUE, text, re.I):
                raw = m.group(1).rstrip(".:!?")
                said, literal = parse_value(raw)
                if not strict and not literal:
                    continue  # "train.seed is fixed": a word, not a value
                if not _same(said, c.expected):
                    out.append(m.group(0).strip())
        return out
    if not own_line:
        return out
    if c.kind == "max_changed_files":
        pattern = r"changed\s+files?\s*(?:<=|≤|=<|<|==|=|:|at most)\s*(\d+(?:\.\d+)?)"
        for m in re.finditer(pattern, text, re.I):
            if float(m.group(1)) != float(c.expected):  # type: ignore[arg-type]
                out.append(m.group(0).strip())
    elif c.kind == "file_contains":
        for m in re.finditer(r"\bcontains?\s+(\"[^\"]*\"|'[^']*'|`[^`]*`)", text, re.I):
            if m.group(1)[1:-1] != c.expected:
                out.append(m.group(0).strip())
    elif c.kind == "file_matches":
        for m in re.finditer(r"\bmatch(?:es)?\s+/(.*?)/(?=\s|$|[,;.])", text, re.I):
            if m.group(1) != c.expected:
                out.append(m.group(0).strip())
    elif c.kind in ("protected_paths", "forbidden_paths"):
        lead = "unchanged" if c.kind == "protected_paths" else "never written"
        for m in re.finditer(rf"\b{lead}\s*:\s*(.+?){_END}", text, re.I):
            globs = frozenset(g.strip().strip("`") for g in re.split(r",\s*|\s+and\s+", m.group(1)))
            if globs != c.expected:
                out.append(m.group(0).strip())
    elif c.kind == "command":
        for m in re.finditer(r"\bpasses\s*:\s*(.+?)(?=\s+[—–]\s|\s*$)", text, re.I):
            if " ".join(m.group(1).split()).strip("`") != c.expected:
                out.append(m.group(0).strip())
    return out


def states_value(c: Carried, line: str) -> bool:
    """Whether `line` states the checked value somewhere (a number equal to it, the
    string, the hash's first 7+ digits), whatever the words around it."""
    expected = c.expected
    if isinstance(expected, bool) or not isinstance(expected, int | float | str):
        return show(expected).lower() in line.lower() or str(expected).lower() in line.lower()
    if isinstance(expected, str):
        if c.kind == "file_sha256":
            return any(len(t.raw) >= 7 and expected.startswith(t.raw) for t in tokens(line))
        return expected.lower() in {t.raw for t in tokens(line)} or show(expected) in line
    written = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", line)
    written += [t.raw for t in tokens(line) if t.raw.isalpha()]  # "five", "twice"
    return any(number(raw) == float(expected) for raw in written)


def check_terms(check: Mapping[str, object] | None) -> frozenset[str]:
    """The stems of what a check looks at: its file, key path, globs, command."""
    if not check:
        return frozenset()
    said: list[str] = [str(check.get(k)) for k in ("file", "path") if check.get(k)]
    for k in ("paths", "argv"):
        value = check.get(k)
        if isinstance(value, list | tuple):
            said += [str(v).replace("*", " ") for v in value[:4]]
    return frozenset(key_stems(" ".join(said)))
