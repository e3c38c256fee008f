"""Settings in `.agent/ckpt.toml` (read with tomllib, written by `init` with tomli-w)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from git_agentckpt.errors import UsageError
from git_agentckpt.git.large import DEFAULT_MAX_FILE_SIZE
from git_agentckpt.redact import DEFAULT_SECRET_PATHS

SETTINGS_PATH = ".agent/ckpt.toml"
CONTRACTS_DIR = ".agent/contracts"
CONTRACT_FILENAMES = ("constraints.yaml", "constraints.yml", "constraints.json")

# The keys the tool reads, per table of `.agent/ckpt.toml` ([policy]: triggers.Policy).
# A new setting is added here too, or `git ckpt config set` refuses it.
KNOWN_SETTINGS: dict[str, tuple[str, ...]] = {
    "snapshot": ("secret_paths", "regenerable", "max_file_size"),
    "env": ("files", "key_inputs"),
    "drift": ("context_drop",),
}

DEFAULT_REGENERABLE = (
    "*.log",
    "*.pyc",
    "__pycache__/",
    ".cache/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    "build/",
    "dist/",
    "*.egg-info/",
    "node_modules/",
)


@dataclass(frozen=True)
class Settings:
    secret_paths: tuple[str, ...] = DEFAULT_SECRET_PATHS
    regenerable: tuple[str, ...] = DEFAULT_REGENERABLE
    env_files: tuple[str, ...] = ()
    key_inputs: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; 0: no cap
    raw: Mapping[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> Mapping[str, Any]:
        value = self.raw.get(name, {})
        return value if isinstance(value, dict) else {}


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: object, where: str) -> int:
    """Bytes from an integer or a string like `100MiB`, `1.5G`, `500k` (0: no cap)."""
    if isinstance(value, bool):
        raise UsageError(f'{where} must be a size such as 104857600 or "100MiB"')
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        for suffix in ("ib", "b"):
            if text.endswith(suffix) and text[: -len(suffix)][-1:] in "kmgt" and text != suffix:
                text = text[: -len(suffix)]
                break
        unit = text[-1:] if text[-1:] in "kmgt" else ""
        number = text[: len(text) - len(unit)]
        try:
            amount = float(number)
        except ValueError:
            amount = -1.0
        if amount >= 0 and number:
            return int(amount * _UNITS[unit])
    raise UsageError(f'{where} must be a size such as 104857600 or "100MiB", not {value!r}')


def _strings(
    table: Mapping[str, Any], key: str, default: tuple[str, ...], path: str
) -> tuple[str, ...]:
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: '{key}' must be a list of strings")
    return tuple(value)


def load_settings(workdir: str) -> Settings:
    path = os.path.join(workdir, SETTINGS_PATH)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        return Settings()
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{SETTINGS_PATH}: {exc}", hint="fix the TOML syntax") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{SETTINGS_PATH}: not valid UTF-8 (at byte {exc.start})", hint="convert it to UTF-8"
        ) from exc
    except RecursionError as exc:
        raise UsageError(f"{SETTINGS_PATH}: nested too deeply") from exc
    return settings_from_doc(raw)


def settings_from_doc(raw: Mapping[str, Any]) -> Settings:
    snap = raw.get("snapshot", {})
    env = raw.get("env", {})
    if not isinstance(snap, dict) or not isinstance(env, dict):
        raise UsageError(f"{SETTINGS_PATH}: [snapshot] and [env] must be tables")
    return Settings(
        secret_paths=_strings(snap, "secret_paths", DEFAULT_SECRET_PATHS, SETTINGS_PATH),
        regenerable=_strings(snap, "regenerable", DEFAULT_REGENERABLE, SETTINGS_PATH),
        env_files=_strings(env, "files", (), SETTINGS_PATH),
        key_inputs=_strings(env, "key_inputs", (), SETTINGS_PATH),
        max_file_size=parse_size(
            snap.get("max_file_size", DEFAULT_MAX_FILE_SIZE),
            f"{SETTINGS_PATH}: [snapshot] max_file_size",
        ),
        raw=raw,
    )


def default_settings_document() -> dict[str, Any]:
    return {
        "snapshot": {
            "secret_paths": list(DEFAULT_SECRET_PATHS),
            "regenerable": list(DEFAULT_REGENERABLE),
        },
        "env": {"files": [], "key_inputs": []},
    }


SETTINGS_HEADER = """\
# git-ckpt settings (see `man git-ckpt`, section SETTINGS).
# [snapshot] secret_paths: gitignore-style globs whose content never reaches a
#   snapshot (untracked: left out; tracked: HEAD's blob is kept); never restored.
# [snapshot] regenerable: files that resume may clean and regenerate.
# [snapshot] max_file_size: untracked files above it ("100MiB" by default, 0: no
#   cap) are recorded by size and sha256 instead of stored.
# [env] files: files whose sha256 every checkpoint records in its env.
# [env] key_inputs: files (configs, data) every checkpoint asserts by sha256.

"""

CONSTRAINTS_MD = """\
# Constraints of this project

Long-term rules for agents working here, written for people. Keep the
machine-checkable version in `constraints.yaml` beside this file: every
checkpoint carries both, so a context compaction can never erase them.

- (none yet)
"""

CONSTRAINTS_YAML = """\
# Machine-checkable constraints (see `man git-ckpt`, section CONTRACTS).
# A new repository has no active constraint; the entries below are examples.
constraints: []
#  - id: seed42
#    text: Experiments must use seed 42
#    severity: block            # block | warn
#    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
#  - id: api-frozen
#    text: Do not modify the public API under src/api
#    severity: block
#    check: {kind: protected_paths, paths: ["src/api/**"]}
#  - id: smoke
#    text: The smoke test passes
#    severity: warn
#    check: {kind: command, argv: ["pytest", "-q", "tests/smoke"], timeout: 60}
"""


def render_value(value: Any) -> str:
    """A value as TOML writes it (tomli-w), for the template `init` writes."""
    import tomli_w  # only `init` writes TOML from scratch

    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    return tomli_w.dumps({"x": value}).split("=", 1)[1].strip()


def settings_template() -> str:
    """The file `init` writes: every default, one key a line, each policy key explained."""
    from git_agentckpt.triggers import POLICY_DOCS, Policy  # only `init` needs the policy

    out = [SETTINGS_HEADER]
    for table, values in default_settings_document().items():
        out.append(f"[{table}]\n")
        out += [f"{k} = {render_value(v)}\n" for k, v in values.items()]
        out.append("\n")
    out.append("# When to checkpoint (`git ckpt tick`); `git ckpt config set policy.KEY VALUE`.\n")
    out.append("[policy]\n")
    for key, value in Policy().to_mapping().items():
        out.append(f"# {POLICY_DOCS.get(key, '')}\n{key} = {render_value(value)}\n")
    return "".join(out)


def init_files(workdir: str) -> tuple[list[str], list[str]]:
    """Write the settings file and contract templates; never overwrite. (created, kept)."""
    files = {
        SETTINGS_PATH: settings_template(),
        f"{CONTRACTS_DIR}/constraints.md": CONSTRAINTS_MD,
        f"{CONTRACTS_DIR}/constraints.yaml": CONSTRAINTS_YAML,
    }
    created: list[str] = []
    kept: list[str] = []
    for rel, content in files.items():
        full = os.path.join(workdir, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        try:
            with open(full, "x", encoding="utf-8") as fh:
                fh.write(content)
            created.append(rel)
        except FileExistsError:
            kept.append(rel)
    return created, kept
