"""Evaluate one check against a working tree. Pure: no git, no shell.

Statuses: `pass`; `fail` (the condition does not hold: a protected path
changed, a missing file, a different value, an unparsable config); `error`
(the check cannot be evaluated: a path escaping the working tree, changed
paths unknown, a malformed check); `unchecked` (a constraint with no check);
`untrusted` (a command check nobody approved: never run).

Files are relative to the working tree; absolute paths, `..` and symlinks
resolving outside it are refused. Only regular files are read (a FIFO never
blocks a check); `file_matches` and the `*_value` kinds read at most
`MAX_READ_BYTES`. `file_matches` uses Python `re` with MULTILINE (`^`/`$` match
at line ends). `*_value` paths are dotted keys with integer list indexes
(`layers.0.size`); values compare by type (`42` is not `"42"`, `true` is not
`1`), except that integers and floats compare by value (`42 == 42.0`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, NoReturn

import yaml

from git_agentckpt.contracts.schema import Check
from git_agentckpt.display import escape_control, escape_for_display
from git_agentckpt.globs import match_any

__all__ = ["MAX_READ_BYTES", "CheckContext", "CheckResult", "Status", "run_check", "values_equal"]

Status = Literal["pass", "fail", "error", "unchecked", "untrusted"]
MAX_READ_BYTES = 32 * 1024 * 1024
_CHUNK = 1024 * 1024
_DETAIL_MAX = 400


@dataclass(frozen=True)
class CheckResult:
    status: Status
    detail: str  # one readable line: what failed, expected vs found


@dataclass(frozen=True)
class CheckContext:
    workdir: Path
    # paths changed against the task's baseline (protected_paths, max_changed_files);
    # None = unknown: those kinds report "error"
    changed_paths: frozenset[str] | None = None
    # paths written by the task so far (forbidden_paths); None = use changed_paths
    written_paths: frozenset[str] | None = None
    # runs `command` checks once the caller decided they are trusted; None = "untrusted"
    command_runner: Callable[[Check], CheckResult] | None = None


class _Stop(Exception):
    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.result = CheckResult(status, detail)


def _fail(detail: str) -> NoReturn:
    raise _Stop("fail", detail)


def _error(detail: str) -> NoReturn:
    raise _Stop("error", detail)


def _one_line(text: str) -> str:
    text = escape_control(text)
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."


def _show(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _typed(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    names.update({list: "list", dict: "mapping", type(None): "null"})
    return f"{_show(value)} ({names.get(type(value), type(value).__name__)})"


def run_check(check: Check | None, ctx: CheckContext) -> CheckResult:
    """Evaluate `check`; never raises for bad data on disk or in the check."""
    if check is None:
        return CheckResult("unchecked", "no check: shown in briefs, not verified")
    handler = _HANDLERS.get(check.kind)
    if handler is None and check.kind != "command":
        return CheckResult("error", _one_line(f"unknown check kind {check.kind!r}"))
    try:
        result = _command(check, ctx) if handler is None else handler(check.params, ctx)
    except _Stop as stop:
        result = stop.result
    return CheckResult(result.status, _one_line(result.detail))


# ---- parameters (validated by schema; re-checked so a hand-made Check cannot crash)


def _str(params: Mapping[str, object], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        _error(f"malformed check: {name!r} must be a string")
    return value


def _str_list(params: Mapping[str, object], name: str) -> list[str]:
    value = params.get(name)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        _error(f"malformed check: {name!r} must be a list of strings")
    return [str(v) for v in value]


# ---- files -------------------------------------------------------------------


def _resolve(ctx: CheckContext, rel: str) -> Path:
    if not rel or "\0" in rel:
        _error(f"refusing path {rel!r}")
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        _error(f"refusing absolute path {rel!r}: paths are relative to the working tree")
    if ".." in pure.parts:
        _error(f"refusing path {rel!r}: '..' leaves the working tree")
    try:
        root = ctx.workdir.resolve()
        target = (root / pure).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop (Python 3.11)
        _error(f"cannot resolve {rel!r}: {exc}")
    if target != root and not target.is_relative_to(root):
        _error(f"refusing {rel!r}: a symlink resolves outside the working tree")
    return target


def _open_regular(path: Path, rel: str) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        _fail(f"{rel}: file not found")
    except OSError as exc:
        _error(f"{rel}: cannot open: {exc.strerror or exc}")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        _fail(f"{rel}: not a regular file ({'a directory' if stat.S_ISDIR(mode) else 'special'})")
    return fd


def _chunks(ctx: CheckContext, rel: str) -> Iterator[bytes]:
    fd = _open_regular(_resolve(ctx, rel), rel)
    try:
        while chunk := _read(fd, rel):
            yield chunk
    finally:
        os.close(fd)


def _read(fd: int, rel: str) -> bytes:
    try:
        return os.read(fd, _CHUNK)
    except OSError as exc:
        _error(f"{rel}: cannot read: {exc.strerror or exc}")


def _read_capped(ctx: CheckContext, rel: str) -> bytes:
    data = bytearray()
    for chunk in _chunks(ctx, rel):
        data += chunk
        if len(data) > MAX_READ_BYTES:
            _error(f"{rel}: larger than {MAX_READ_BYTES} bytes, too large to parse")
    return bytes(data)


def _file_exists(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    rel = _str(params, "file")
    path = _resolve(ctx, rel)
    try:  # is_dir() and exists() raise on e.g. ENAMETOOLONG, EACCES (Python 3.11)
        if path.is_dir():
            return CheckResult("pass", f"{rel} exists (a directory)")
        if path.exists():
            return CheckResult("pass", f"{rel} exists")
    except OSError as exc:
        _error(f"{rel}: cannot check: {exc.strerror or exc}")
    _fail(f"{rel}: file not found")


def _file_contains(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    rel, text = _str(params, "file"), _str(params, "text")
    needle = text.encode("utf-8", "surrogateescape")
    tail = b""
    for chunk in _chunks(ctx, rel):
        window = tail + chunk
        if needle in window:
            return CheckResult("pass", f"{rel} contains {_show(text)}")
        tail = window[-(len(needle) - 1) :] if len(needle) > 1 else b""
    _fail(f"{rel} does not contain {_show(text)}")


def _file_matches(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    rel, regex = _str(params, "file"), _str(params, "regex")
    try:
        pattern = re.compile(regex, re.MULTILINE)
    except re.error as exc:
        _error(f"bad regular expression {regex!r}: {exc}")
    text = _read_capped(ctx, rel).decode("utf-8", "replace")
    found = pattern.search(text)
    if found is None:
        _fail(f"{rel}: no match for /{regex}/")
    line = text.count("\n", 0, found.start()) + 1
    return CheckResult("pass", f"{rel}:{line} matches /{regex}/")


def _file_sha256(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    rel, expected = _str(params, "file"), _str(params, "sha256").lower()
    digest = hashlib.sha256()
    for chunk in _chunks(ctx, rel):
        digest.update(chunk)
    found = digest.hexdigest()
    if found != expected:
        _fail(f"{rel}: sha256 is {found}, expected {expected}")
    return CheckResult("pass", f"{rel}: sha256 {found}")


# ---- structured values ---------------------------------------------------------

_INDEX_RE = re.compile(r"[0-9]+", re.ASCII)


def _parse_document(kind: str, rel: str, data: bytes) -> object:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"{rel}: not valid UTF-8 (byte {exc.start})")
    try:
        if kind == "json_value":
            return json.loads(text)
        if kind == "yaml_value":
            return yaml.safe_load(text)
        return tomllib.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{rel}: not valid JSON (line {exc.lineno}: {exc.msg})")
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        _fail(f"{rel}: not valid YAML (line {mark.line + 1 if mark else '?'}: {exc.problem})")
    except yaml.YAMLError as exc:
        _fail(f"{rel}: not valid YAML ({exc})")
    except tomllib.TOMLDecodeError as exc:
        _fail(f"{rel}: not valid TOML ({exc})")
    except (RecursionError, ValueError) as exc:
        _fail(f"{rel}: cannot parse: {type(exc).__name__}")


def _lookup(doc: object, key_path: str, rel: str) -> object:
    current: object = doc
    walked: list[str] = []
    for segment in key_path.split("."):
        where = ".".join(walked) or "the top level"
        if isinstance(current, dict):
            if segment in current:
                current = current[segment]
            elif _INDEX_RE.fullmatch(segment) and int(segment) in current:
                current = current[int(segment)]
            else:
                _fail(f"{rel}: {key_path}: no key {segment!r} in {where}")
        elif isinstance(current, list):
            if not _INDEX_RE.fullmatch(segment):
                _fail(f"{rel}: {key_path}: {where} is a list; {segment!r} is not an index")
            if int(segment) >= len(current):
                _fail(f"{rel}: {key_path}: index {segment} out of range ({len(current)} items)")
            current = current[int(segment)]
        else:
            _fail(f"{rel}: {key_path}: {where} is {_typed(current)}, not a mapping or list")
        walked.append(segment)
    return current


def values_equal(found: object, expected: object) -> bool:
    """Type-aware equality: no str/number or bool/number mixing; 42 == 42.0."""
    if isinstance(found, bool) or isinstance(expected, bool):
        return type(found) is type(expected) and found == expected
    if isinstance(found, int | float) and isinstance(expected, int | float):
        return found == expected
    if isinstance(found, list) and isinstance(expected, list | tuple):
        return len(found) == len(expected) and all(map(values_equal, found, expected))
    if isinstance(found, dict) and isinstance(expected, dict):
        return found.keys() == expected.keys() and all(
            values_equal(found[key], expected[key]) for key in found
        )
    if isinstance(found, datetime.date) and isinstance(expected, datetime.date):
        return type(found) is type(expected) and found == expected
    return type(found) is type(expected) and found == expected


def _value(params: Mapping[str, object], ctx: CheckContext, kind: str) -> CheckResult:
    rel, key_path = _str(params, "file"), _str(params, "path")
    if "equals" not in params:
        _error("malformed check: 'equals' is missing")
    expected = params["equals"]
    doc = _parse_document(kind, rel, _read_capped(ctx, rel))
    found = _lookup(doc, key_path, rel)
    try:
        same = values_equal(found, expected)
    except RecursionError:
        _error(f"{rel}: {key_path}: value nested too deeply to compare")
    if not same:
        _fail(f"{rel}: {key_path} is {_typed(found)}, expected {_typed(expected)}")
    return CheckResult("pass", f"{rel}: {key_path} == {_show(expected)}")


# ---- changed paths and commands ---------------------------------------------------


def _list_some(paths: list[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")


def _changed(ctx: CheckContext) -> frozenset[str]:
    if ctx.changed_paths is None:
        _error("the paths changed since the task's baseline are unknown")
    return ctx.changed_paths


def _paths_check(params: Mapping[str, object], paths: frozenset[str], what: str) -> CheckResult:
    globs = _str_list(params, "paths")
    try:
        hits = sorted(path for path in paths if match_any(globs, path))
    except ValueError as exc:  # a hand-made check with a bad glob
        _error(f"malformed check: {exc}")
    if hits:
        _fail(f"{len(hits)} {what}: {_list_some(hits)} (globs: {', '.join(globs)})")
    return CheckResult("pass", f"no path matching {', '.join(globs)} {what.split()[-1]}")


def _protected(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    return _paths_check(params, _changed(ctx), "protected path(s) changed")


def _forbidden(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    written = ctx.written_paths if ctx.written_paths is not None else ctx.changed_paths
    if written is None:
        _error("the paths written by the task are unknown")
    return _paths_check(params, written, "forbidden path(s) written")


def _max_changed(params: Mapping[str, object], ctx: CheckContext) -> CheckResult:
    limit = params.get("max")
    if isinstance(limit, bool) or not isinstance(limit, int):
        _error("malformed check: 'max' must be an integer")
    count = len(_changed(ctx))
    if count > limit:
        _fail(f"{count} files changed since the baseline, at most {limit} allowed")
    return CheckResult("pass", f"{count} files changed since the baseline (at most {limit})")


def _command(check: Check, ctx: CheckContext) -> CheckResult:
    argv = _str_list(check.params, "argv")
    if ctx.command_runner is None:
        return CheckResult(
            "untrusted",
            f"not run: command not approved by this user in this clone: "
            f"{escape_for_display(argv)} (review it with git ckpt trust)",
        )
    try:
        return ctx.command_runner(check)
    except OSError as exc:
        _error(f"cannot run {escape_for_display(argv)}: {exc}")


_Handler = Callable[[Mapping[str, object], CheckContext], CheckResult]
_HANDLERS: dict[str, _Handler] = {
    "protected_paths": _protected,
    "forbidden_paths": _forbidden,
    "file_exists": _file_exists,
    "file_contains": _file_contains,
    "file_matches": _file_matches,
    "file_sha256": _file_sha256,
    "json_value": lambda params, ctx: _value(params, ctx, "json_value"),
    "yaml_value": lambda params, ctx: _value(params, ctx, "yaml_value"),
    "toml_value": lambda params, ctx: _value(params, ctx, "toml_value"),
    "max_changed_files": _max_changed,
}  # "command" is dispatched in run_check: the runner receives the Check itself
