"""Contract files and assertions: parse, validate, and say exactly where it is wrong.

`.agent/contracts/constraints.yaml` (or `.yml` / `.json`, same structure)::

    constraints:
      - id: seed42                  # unique, [A-Za-z0-9_.-]+
        text: Experiments must use seed 42
        severity: block             # block (default) | warn
        check: {kind: json_value, file: config.json, path: train.seed, equals: 42}

An empty file, `constraints:` with no items, or `constraints: []` is an empty
contract. A constraint without `check` is shown in briefs and counted as
"unchecked". Per-checkpoint assertions use the same check objects, each with
an `id` (see `parse_assertions`, `load_assertions_text`, `assertion_from_spec`).

Every problem is a `ContractError` whose message is one line:
`<file>:<line>: constraints[3].check.kind: unknown check kind 'foo' (known: ...)`.
Unknown fields are errors too (a typo must not silently disable a check).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, NoReturn

from git_agentckpt.contracts._docs import DocError, Lines, is_plain_data, load_document
from git_agentckpt.contracts._docs import show as _show
from git_agentckpt.contracts._docs import type_name as _type_name
from git_agentckpt.errors import UsageError
from git_agentckpt.globs import compile_glob
from git_agentckpt.settings import CONTRACT_FILENAMES

__all__ = [
    "CHECK_KINDS",
    "CONTRACT_FILENAMES",
    "DEFAULT_COMMAND_TIMEOUT",
    "Assertion",
    "Check",
    "Constraint",
    "Contract",
    "ContractError",
    "assertion_from_spec",
    "check_to_json",
    "load_assertions_text",
    "load_contract_dir",
    "load_contract_text",
    "parse_assertions",
    "parse_check",
]

Severity = Literal["block", "warn"]
DEFAULT_COMMAND_TIMEOUT = 60.0
_ID_RE = re.compile(r"[A-Za-z0-9_.-]+")
_HEX64_RE = re.compile(r"[0-9a-fA-F]{64}")


class ContractError(UsageError):
    """A contract, assertion file or `--assert` spec that cannot be used."""


@dataclass(frozen=True)
class Check:
    kind: str
    params: Mapping[str, object] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Constraint:
    id: str
    text: str
    severity: Severity = "block"
    check: Check | None = None
    line: int | None = None


@dataclass(frozen=True)
class Contract:
    path: str
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class Assertion:
    id: str
    check: Check
    text: str = ""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "check": check_to_json(self.check)}
        if self.text:
            out["text"] = self.text
        return out


def check_to_json(check: Check) -> dict[str, object]:
    """The check as the JSON/YAML mapping it was parsed from (tuples become lists)."""
    out: dict[str, object] = {"kind": check.kind}
    for key, value in check.params.items():
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


# ---- where an error is: file, line, key path ------------------------------


@dataclass(frozen=True)
class _Loc:
    source: str
    path: str
    line: int | None
    lines: Lines = field(compare=False, repr=False)

    def format(self, message: str) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        message = message.replace("\n", " ").replace("\r", " ")
        return f"{where}: {self.path}: {message}" if self.path else f"{where}: {message}"

    def error(self, message: str) -> NoReturn:
        raise ContractError(self.format(message))

    def child(self, name: str, line: int | None = None) -> _Loc:
        path = f"{self.path}.{name}" if self.path else name
        return _Loc(self.source, path, line or self.line, self.lines)

    def key(self, container: object, key: object) -> _Loc:
        line = self.lines.get(id(container), {}).get(key)
        return self.child(key if isinstance(key, str) else _show(key), line)

    def index(self, container: object, index: int) -> _Loc:
        line = self.lines.get(id(container), {}).get(index)
        return _Loc(self.source, f"{self.path}[{index}]", line or self.line, self.lines)


# ---- field validators: (value, loc) -> normalized value --------------------


def _string(value: object, loc: _Loc) -> str:
    if not isinstance(value, str):
        loc.error(f"must be a string, not {_type_name(value)}")
    if not value:
        loc.error("must not be empty")
    return value


def _rel_path(value: object, loc: _Loc) -> str:
    text = _string(value, loc)
    if "\0" in text:
        loc.error("must not contain a NUL character")
    if text.startswith("/"):
        loc.error(f"must be a path relative to the working tree, not {text!r}")
    if ".." in text.split("/"):
        loc.error(f"must not contain '..': {text!r}")
    return text


def _globs(value: object, loc: _Loc) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        loc.error(f"must be a non-empty list of glob patterns, not {_type_name(value)}")
    out: list[str] = []
    for index, item in enumerate(value):
        item_loc = loc.index(value, index)
        pattern = _string(item, item_loc)
        try:
            compile_glob(pattern[1:] if pattern.startswith("!") else pattern)
        except ValueError as exc:
            item_loc.error(str(exc))
        out.append(pattern)
    return tuple(out)


def _regex(value: object, loc: _Loc) -> str:
    text = _string(value, loc)
    try:
        re.compile(text)
    except re.error as exc:
        loc.error(f"bad regular expression {text!r}: {exc}")
    return text


def _sha256(value: object, loc: _Loc) -> str:
    text = _string(value, loc)
    if not _HEX64_RE.fullmatch(text):
        loc.error(f"must be 64 hexadecimal digits, not {_show(text)}")
    return text.lower()


def _key_path(value: object, loc: _Loc) -> str:
    text = _string(value, loc)
    if "" in text.split("."):
        loc.error(f"empty component in key path {text!r} (write a.b.0.c)")
    return text


def _equals(value: object, loc: _Loc) -> object:
    if not is_plain_data(value):
        loc.error(f"unsupported value of type {_type_name(value)}")
    return value


def _count(value: object, loc: _Loc) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        loc.error(f"must be a non-negative integer, not {_show(value)}")
    return value


def _parse_argv(value: object, loc: _Loc) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        loc.error("must be a non-empty list of strings (argv, not a shell string)")
    out: list[str] = []
    for index, item in enumerate(value):
        item_loc = loc.index(value, index)
        if not isinstance(item, str):
            item_loc.error(f"must be a string, not {_type_name(item)}")
        if "\0" in item:
            item_loc.error("must not contain a NUL character")
        out.append(item)
    if not out[0]:
        loc.index(value, 0).error("the program name must not be empty")
    return tuple(out)


def _parse_timeout(value: object, loc: _Loc) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0 < float(value) < float("inf"):  # type: ignore[arg-type]
        loc.error(f"must be a positive number of seconds, not {_show(value)}")
    return float(value)  # type: ignore[arg-type]


_Validator = Callable[[object, _Loc], object]
_VALUE_FIELDS: dict[str, _Validator] = {"file": _rel_path, "path": _key_path, "equals": _equals}
# kind -> (required fields, optional fields with defaults)
_KINDS: dict[str, tuple[dict[str, _Validator], dict[str, tuple[_Validator, object]]]] = {
    "protected_paths": ({"paths": _globs}, {}),
    "forbidden_paths": ({"paths": _globs}, {}),
    "file_exists": ({"file": _rel_path}, {}),
    "file_contains": ({"file": _rel_path, "text": _string}, {}),
    "file_matches": ({"file": _rel_path, "regex": _regex}, {}),
    "file_sha256": ({"file": _rel_path, "sha256": _sha256}, {}),
    "json_value": (_VALUE_FIELDS, {}),
    "yaml_value": (_VALUE_FIELDS, {}),
    "toml_value": (_VALUE_FIELDS, {}),
    "max_changed_files": ({"max": _count}, {}),
    "command": ({"argv": _parse_argv}, {"timeout": (_parse_timeout, DEFAULT_COMMAND_TIMEOUT)}),
}
CHECK_KINDS: tuple[str, ...] = tuple(sorted(_KINDS))


def _mapping(obj: object, loc: _Loc, what: str) -> dict[object, object]:
    if not isinstance(obj, dict):
        loc.error(f"must be a mapping ({what}), not {_type_name(obj)}")
    return obj


def _reject_unknown(obj: dict[object, object], allowed: tuple[str, ...], loc: _Loc) -> None:
    for key in obj:
        if key not in allowed:
            loc.key(obj, key).error(f"unknown field {_show(key)} (allowed: {', '.join(allowed)})")


def _parse_check(obj: object, loc: _Loc) -> Check:
    data = _mapping(obj, loc, "with a 'kind'")
    if "kind" not in data:
        loc.error(f"missing required field 'kind' (known: {', '.join(CHECK_KINDS)})")
    kind_loc = loc.key(data, "kind")
    kind = data["kind"]
    if not isinstance(kind, str) or kind not in _KINDS:
        kind_loc.error(f"unknown check kind {_show(kind)} (known: {', '.join(CHECK_KINDS)})")
    required, optional = _KINDS[kind]
    _reject_unknown(data, ("kind", *required, *optional), loc)
    params: dict[str, object] = {}
    for name, validate in required.items():
        if name not in data:
            loc.error(f"missing required field {name!r} for kind {kind!r}")
        params[name] = validate(data[name], loc.key(data, name))
    for name, (validate, default) in optional.items():
        params[name] = validate(data[name], loc.key(data, name)) if name in data else default
    return Check(kind, MappingProxyType(params))


def parse_check(obj: object, where: str = "check", *, source: str = "<check>") -> Check:
    """Validate one check mapping (`{kind: ..., <fields>}`); errors name `where`."""
    return _parse_check(obj, _Loc(source, where, None, {}))


def _parse_id(data: dict[object, object], loc: _Loc, seen: dict[str, int | None]) -> str:
    if "id" not in data:
        loc.error("missing required field 'id'")
    id_loc = loc.key(data, "id")
    ident = data["id"]
    if not isinstance(ident, str) or not _ID_RE.fullmatch(ident):
        id_loc.error(f"id must match [A-Za-z0-9_.-]+, not {_show(ident)}")
    if ident in seen:
        first = seen[ident]
        id_loc.error(f"duplicate id {ident!r}" + (f" (first at line {first})" if first else ""))
    seen[ident] = id_loc.line
    return ident


def _items(root: object, key: str, loc: _Loc, allowed: tuple[str, ...]) -> list[object]:
    """The list under `key` of a top-level mapping (None and missing-in-empty -> [])."""
    if root is None:
        return []
    data = _mapping(root, loc, f"with a {key!r} list")
    _reject_unknown(data, allowed, loc)
    for name in ("version", "v"):
        if name in data and data[name] != 1:
            loc.key(data, name).error(f"unsupported version {_show(data[name])} (this reads 1)")
    if key not in data:
        loc.error(f"missing {key!r} (write '{key}: []' for none)")
    items = data[key]
    if items is None:
        return []
    if not isinstance(items, list):
        loc.key(data, key).error(f"must be a list, not {_type_name(items)}")
    return items


def _contract_from(root: object, loc: _Loc) -> tuple[Constraint, ...]:
    items = _items(root, "constraints", loc, ("constraints", "version"))
    list_loc = loc.key(root, "constraints")
    seen: dict[str, int | None] = {}
    out: list[Constraint] = []
    for index, item in enumerate(items):
        item_loc = list_loc.index(items, index)
        data = _mapping(item, item_loc, "with id, text, severity, check")
        _reject_unknown(data, ("id", "text", "severity", "check"), item_loc)
        ident = _parse_id(data, item_loc, seen)
        if "text" not in data:
            item_loc.error("missing required field 'text'")
        text = _string(data["text"], item_loc.key(data, "text"))
        severity = data.get("severity", "block")
        if severity not in ("block", "warn"):
            item_loc.key(data, "severity").error(
                f"severity must be 'block' or 'warn', not {_show(severity)}"
            )
        raw_check = data.get("check")
        check = None if raw_check is None else _parse_check(raw_check, item_loc.key(data, "check"))
        sev: Severity = "warn" if severity == "warn" else "block"
        out.append(Constraint(ident, text, sev, check, item_loc.line))
    return tuple(out)


def _assertions_from(root: object, loc: _Loc) -> tuple[Assertion, ...]:
    if isinstance(root, list):
        items, list_loc = root, loc
    else:
        items = _items(root, "assertions", loc, ("assertions", "version", "v"))
        list_loc = loc.key(root, "assertions")
    seen: dict[str, int | None] = {}
    out: list[Assertion] = []
    for index, item in enumerate(items):
        item_loc = list_loc.index(items, index)
        data = _mapping(item, item_loc, "with id and check")
        _reject_unknown(data, ("id", "text", "check"), item_loc)
        ident = _parse_id(data, item_loc, seen)
        if "check" not in data:
            item_loc.error("missing required field 'check'")
        check = _parse_check(data["check"], item_loc.key(data, "check"))
        text = data.get("text", "")
        if not isinstance(text, str):
            item_loc.key(data, "text").error(f"must be a string, not {_type_name(text)}")
        out.append(Assertion(ident, check, text))
    return tuple(out)


def _load(text: str, filename: str) -> tuple[object, Lines]:
    try:
        return load_document(text, filename)
    except DocError as exc:
        raise ContractError(_Loc(filename, "", exc.line, {}).format(exc.message)) from None


def load_contract_text(text: str, filename: str) -> Contract:
    """Parse a contract; `filename` picks the syntax (`.json`, else YAML) and names errors."""
    root, lines = _load(text, filename)
    return Contract(filename, _contract_from(root, _Loc(filename, "", 1, lines)))


def load_contract_dir(contracts_dir: Path, shown_as: str | None = None) -> Contract | None:
    """Load `constraints.{yaml,yml,json}` from a directory; None when there is none.
    Errors name the file as `<shown_as>/<name>` when given (e.g. `.agent/contracts`,
    relative to the working tree), else by its path; `Contract.path` is the path."""
    found = [contracts_dir / name for name in CONTRACT_FILENAMES]
    found = [path for path in found if path.exists() or path.is_symlink()]
    if not found:
        return None

    def shown(path: Path) -> str:
        return f"{shown_as}/{path.name}" if shown_as is not None else str(path)

    if len(found) > 1:
        names = " and ".join(shown(path) for path in found)
        raise ContractError(f"{names}: more than one contract file; keep only one")
    path = found[0]
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        where = shown(path)
        raise ContractError(
            f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        where = shown(path)
        raise ContractError(f"{where}: cannot read the contract: {exc.strerror or exc}") from None
    return Contract(str(path), load_contract_text(text, shown(path)).constraints)


def parse_assertions(obj: object, *, source: str = "<assertions>") -> tuple[Assertion, ...]:
    """Validate assertions already decoded: a list of `{id, check[, text]}` or
    a mapping `{assertions: [...]}` (as stored in the assertions note)."""
    return _assertions_from(obj, _Loc(source, "", None, {}))


def load_assertions_text(text: str, filename: str) -> tuple[Assertion, ...]:
    """Parse an assertions file (YAML or `.json`), with file:line errors."""
    root, lines = _load(text, filename)
    return _assertions_from(root, _Loc(filename, "", 1, lines))


def assertion_from_spec(spec: str) -> Assertion:
    """Parse the CLI form `--assert [ID@]KIND:ARGS`.

    ==================================  =========================================
    `file_exists:PATH`                  the file exists
    `file_sha256:PATH=HEX`              split at the last `=`
    `file_contains:PATH=TEXT`           split at the first `=`; TEXT is literal
    `file_matches:PATH=REGEX`           split at the first `=`
    `json_value:FILE#KEY.PATH=VALUE`    also `yaml_value`, `toml_value`; VALUE is
                                        read as JSON when it parses (`42`, `true`,
                                        `"42"`, `[1,2]`), else as a plain string
    `max_changed_files:N`
    `protected_paths:GLOB[,GLOB...]`    also `forbidden_paths`
    `command:WORDS`                     split like a POSIX shell (no shell runs);
                                        timeout 60 s; must still be trusted to run
    ==================================  =========================================

    Without `ID@` the id is `<kind>-<8 hex digits of sha256(spec)>`, so the same
    spec always gets the same id. PATH may not contain `=` (nor FILE `#`).
    """
    loc = _Loc(f"--assert {_show(spec)}", "", None, {})
    head, sep, args = spec.partition(":")
    if not sep:
        loc.error("expected KIND:ARGS, e.g. file_exists:path/to/file")
    ident, at, kind = head.rpartition("@")
    raw: dict[object, object] = {"kind": kind}
    if kind in ("file_exists",):
        raw["file"] = args
    elif kind == "file_sha256":
        raw["file"], _, raw["sha256"] = _split(args, "=", loc, "PATH=SHA256", last=True)
    elif kind in ("file_contains", "file_matches"):
        value_key = "text" if kind == "file_contains" else "regex"
        raw["file"], _, raw[value_key] = _split(args, "=", loc, f"PATH={value_key.upper()}")
    elif kind in ("json_value", "yaml_value", "toml_value"):
        raw["file"], _, rest = _split(args, "#", loc, "FILE#KEY.PATH=VALUE")
        raw["path"], _, value = _split(rest, "=", loc, "FILE#KEY.PATH=VALUE")
        raw["equals"] = _spec_value(value)
    elif kind == "max_changed_files":
        raw["max"] = int(args) if re.fullmatch(r"[0-9]+", args.strip(), re.ASCII) else args
    elif kind in ("protected_paths", "forbidden_paths"):
        raw["paths"] = args.split(",")
    elif kind == "command":
        try:
            raw["argv"] = shlex.split(args)
        except ValueError as exc:
            loc.error(f"cannot split the command: {exc}")
    check = _parse_check(raw, loc.child("check"))
    if not at:
        ident = f"{kind}-{hashlib.sha256(spec.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    if not _ID_RE.fullmatch(ident):
        loc.error(f"id must match [A-Za-z0-9_.-]+, not {_show(ident)}")
    return Assertion(ident, check)


def _split(text: str, sep: str, loc: _Loc, form: str, *, last: bool = False) -> tuple[str, ...]:
    parts = text.rpartition(sep) if last else text.partition(sep)
    if not parts[1]:
        loc.error(f"expected {form}")
    return parts


def _spec_value(text: str) -> object:
    try:
        value: object = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return value
