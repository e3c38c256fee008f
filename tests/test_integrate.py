"""`git ckpt integrate claude-code|codex [--remove]`: the hooks go into the agent's
settings file beside the user's own, in the file's own formatting; `--remove` gives back
every byte of every file it touched."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, real_ckpt

from git_agentckpt.integrations.instructions import CONSTRAINTS_IMPORT

CLAUDE_EVENTS = [
    "SessionStart",
    "PreCompact",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "SessionEnd",
    "PostCompact",
]
CODEX_EVENTS = [
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "Stop",
]

USER_HOOK = {"type": "command", "command": "./scripts/lint.sh", "timeout": 5}
USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "hooks": {
        "Stop": [{"hooks": [USER_HOOK]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [USER_HOOK]}],
    },
    "env": {"FOO": "1"},
}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under `root` (outside .git), with the bytes of each file."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".git":
            continue
        out[str(rel)] = path.read_bytes() if path.is_file() else None
    return out


def ours(settings_obj: dict[str, Any], agent: str) -> dict[str, list[dict[str, Any]]]:
    """Our hook entries by event, as the agent will read them."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in settings_obj.get("hooks", {}).items():
        for g in groups:
            for h in g["hooks"]:
                if h["command"].startswith(f"git ckpt hook {agent} "):
                    found.setdefault(event, []).append({**h, "matcher": g.get("matcher")})
    return found


def assert_ours_complete(settings_obj: dict[str, Any], agent: str, events: list[str]) -> None:
    found = ours(settings_obj, agent)
    assert sorted(found) == sorted(events)
    for event in events:
        (hook,) = found[event]
        assert hook["command"] == f"git ckpt hook {agent} {event}"
        assert hook["type"] == "command" and isinstance(hook["timeout"], int)
        if event == "SessionStart":
            assert hook["matcher"] == "startup|resume|compact|clear"


# -- whole runs through the CLI ----------------------------------------------------------


def test_absent_files_created_then_removed_without_a_trace(repo: Path) -> None:
    ckpt(repo, "init")
    before = snapshot(repo)
    out = ckpt(repo, "integrate", "claude-code").stdout
    assert "created   .claude/settings.json (9 hooks added)" in out
    assert "created   CLAUDE.md" in out
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    assert list(data) == ["hooks"]
    assert_ours_complete(data, "claude-code", CLAUDE_EVENTS)
    claude_md = (repo / "CLAUDE.md").read_text()
    assert f"\n{CONSTRAINTS_IMPORT}\n" in claude_md
    assert claude_md.startswith("<!-- git-ckpt: begin")
    assert claude_md.endswith("<!-- git-ckpt: end -->\n")
    assert "git ckpt step start TASK STEP_ID" in claude_md

    out = ckpt(repo, "integrate", "claude-code", "--remove").stdout
    assert "removed   .claude/settings.json (9 hooks removed)" in out
    assert "removed   CLAUDE.md (block removed)" in out
    assert snapshot(repo) == before
    assert not (repo / ".claude").exists()


def test_user_hooks_kept_before_between_and_after(repo: Path) -> None:
    original = json.dumps(USER_SETTINGS, indent=2) + "\n"
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(original)
    (repo / "CLAUDE.md").write_text("# Project\n\nUse tabs.\n")
    before = snapshot(repo)

    ckpt(repo, "integrate", "claude-code")
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    assert_ours_complete(data, "claude-code", CLAUDE_EVENTS)
    # the user's own, untouched and first; everything else as it was
    assert data["hooks"]["Stop"][0] == {"hooks": [USER_HOOK]}
    assert data["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in USER_SETTINGS.items() if k != "hooks"
    }
    assert list(data) == list(USER_SETTINGS)  # key order kept
    assert (repo / "CLAUDE.md").read_text().startswith("# Project\n\nUse tabs.\n\n<!-- git-ckpt")

    ckpt(repo, "integrate", "claude-code", "--remove")
    assert snapshot(repo) == before


def test_second_integrate_changes_nothing_and_says_so(repo: Path) -> None:
    ckpt(repo, "integrate", "claude-code")
    after_first = snapshot(repo)
    out = ckpt(repo, "integrate", "claude-code").stdout
    assert "unchanged .claude/settings.json (9 hooks present)" in out
    assert "nothing changed: already integrated" in out
    assert snapshot(repo) == after_first
    result = ckpt_json(repo, "integrate", "claude-code")
    assert result["changed"] is False
    assert {f["change"] for f in result["files"]} == {"unchanged"}


def test_a_deleted_hook_of_ours_is_put_back_alone(repo: Path) -> None:
    ckpt(repo, "integrate", "claude-code")
    path = repo / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    del data["hooks"]["Stop"]
    path.write_text(json.dumps(data, indent=2) + "\n")
    result = ckpt_json(repo, "integrate", "claude-code")
    settings_file = next(f for f in result["files"] if f["path"] == ".claude/settings.json")
    assert settings_file["change"] == "updated" and settings_file["what"] == "1 hooks added"
    assert_ours_complete(json.loads(path.read_text()), "claude-code", CLAUDE_EVENTS)


def test_edits_made_in_between_stay_and_only_our_entries_go(repo: Path) -> None:
    original = (
        '{\n  "model": "opus",\n  "hooks": {\n    "Stop": [\n'
        '      {"hooks": [{"type": "command", "command": "a"}]}\n    ]\n  }\n}\n'
    )
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(original)
    ckpt(repo, "integrate", "claude-code")
    text = path.read_text()
    # the user edits the model and adds a hook of their own after ours, in between
    text = text.replace('"opus"', '"sonnet"')
    stop_end = text.index('"timeout": 60\n          }\n        ]\n      }') + len(
        '"timeout": 60\n          }\n        ]\n      }'
    )
    text = (
        text[:stop_end]
        + ',\n      {"hooks": [{"type": "command", "command": "b"}]}'
        + text[stop_end:]
    )
    path.write_text(text)
    ckpt(repo, "integrate", "claude-code", "--remove")
    expected = original.replace('"opus"', '"sonnet"').replace(
        '"command": "a"}]}\n',
        '"command": "a"}]},\n      {"hooks": [{"type": "command", "command": "b"}]}\n',
    )
    assert path.read_text() == expected


def test_invalid_json_refused_with_file_and_line_nothing_touched(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  "model": "opus",\n  "hooks": {,}\n}\n')
    before = snapshot(repo)
    result = ckpt(repo, "integrate", "claude-code", ok=False)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "git ckpt: error: .claude/settings.json line 3: not valid settings JSON"
    )
    assert "nothing was changed" in lines[0]
    assert snapshot(repo) == before  # CLAUDE.md not created either
    assert ckpt(repo, "integrate", "claude-code", "--remove", ok=False).exit_code == 2
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[1, 2]\n", "no JSON object"),
        ('{"hooks": []}\n', '"hooks" is not a JSON object'),
        ('{"hooks": {"Stop": {}}}\n', '"hooks"."Stop" is not a JSON array'),
    ],
)
def test_wrong_shapes_refused(repo: Path, text: str, what: str) -> None:
    path = repo / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    result = ckpt(repo, "integrate", "claude-code", ok=False)
    assert result.exit_code == 2 and what in result.stderr
    assert path.read_text() == text and not (repo / "CLAUDE.md").exists()


def test_remove_with_nothing_integrated_is_refused(repo: Path) -> None:
    (repo / "CLAUDE.md").write_text("mine\n")
    before = snapshot(repo)
    result = ckpt(repo, "integrate", "codex", "--remove", ok=False)
    assert result.exit_code == 3
    assert "nothing of git ckpt to remove" in result.stderr and ".codex/hooks.json" in result.stderr
    assert snapshot(repo) == before
    result = ckpt(repo, "integrate", "claude-code", "--remove", "--json", ok=False)
    assert json.loads(result.stdout)["exit"] == 3


def test_codex_hooks_agents_md_and_trust_note(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("Build with make.")  # no final newline
    before = snapshot(repo)
    out = ckpt(repo, "integrate", "codex").stdout
    assert "created   .codex/hooks.json (6 hooks added)" in out
    assert "updated   AGENTS.md" in out
    assert "/hooks" in out and "--dangerously-bypass-hook-trust" in out
    data = json.loads((repo / ".codex" / "hooks.json").read_text())
    assert_ours_complete(data, "codex", CODEX_EVENTS)
    agents = (repo / "AGENTS.md").read_text()
    assert agents.startswith("Build with make.\n\n<!-- git-ckpt: begin")
    for needle in (
        "git ckpt step start TASK STEP_ID",
        "git ckpt step done TASK STEP_ID",
        "git ckpt check",
        "git ckpt resume TASK --brief-only",
        ".agent/contracts/",
    ):
        assert needle in agents
    ckpt(repo, "integrate", "codex", "--remove")
    assert snapshot(repo) == before


def test_json_output(repo: Path) -> None:
    result = ckpt_json(repo, "integrate", "codex")
    assert result["agent"] == "codex" and result["scope"] == "project"
    assert result["action"] == "integrate" and result["changed"] is True
    assert [(f["path"], f["change"]) for f in result["files"]] == [
        (".codex/hooks.json", "created"),
        ("AGENTS.md", "created"),
    ]
    assert result["files"][0]["file"] == str(repo / ".codex" / "hooks.json")
    assert any("trust" in n for n in result["notes"])
    result = ckpt_json(repo, "integrate", "codex", "--remove")
    assert result["action"] == "remove"
    assert [f["change"] for f in result["files"]] == ["removed", "removed"]


def test_user_scope_writes_under_home_only(repo: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir()
    user_file = home / ".claude" / "settings.json"
    user_file.write_text('{\n\t"theme": "dark"\n}')
    ckpt(repo, "list")  # a daemon, if the mode has one, and its entry in the user's list
    repo_before, home_before = snapshot(repo), snapshot(home)
    out = ckpt(repo, "integrate", "claude-code", "--user").stdout
    assert "updated   ~/.claude/settings.json (9 hooks added)" in out
    assert snapshot(repo) == repo_before
    assert not (repo / ".git" / "agent" / "integrations.json").exists()
    data = json.loads(user_file.read_text())
    assert data["theme"] == "dark"
    assert_ours_complete(data, "claude-code", CLAUDE_EVENTS)
    assert '\n\t"hooks": {\n\t\t"SessionStart": [' in user_file.read_text()  # tabs kept
    ckpt(repo, "integrate", "claude-code", "--user", "--remove")
    assert snapshot(home) == home_before


def test_codex_user_scope_follows_codex_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = Path(os.environ["HOME"]) / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    ckpt(outside, "integrate", "codex", "--user")  # no repository needed for --user
    assert_ours_complete(json.loads((codex_home / "hooks.json").read_text()), "codex", CODEX_EVENTS)
    assert list(outside.iterdir()) == []
    ckpt(outside, "integrate", "codex", "--user", "--remove")
    assert not codex_home.exists()
    assert ckpt(outside, "integrate", "codex", ok=False).exit_code == 4  # --project needs a repo


def test_local_scope_and_shared_claude_md(repo: Path) -> None:
    before = snapshot(repo)
    ckpt(repo, "integrate", "claude-code", "--local")
    ckpt(repo, "integrate", "claude-code", "--project")
    assert (repo / ".claude" / "settings.local.json").exists()
    assert (repo / ".claude" / "settings.json").exists()
    assert (repo / "CLAUDE.md").read_text().count("<!-- git-ckpt: begin") == 1
    out = ckpt(repo, "integrate", "claude-code", "--local", "--remove").stdout
    assert "unchanged CLAUDE.md (block kept for claude-code:project)" in out
    assert not (repo / ".claude" / "settings.local.json").exists()
    assert CONSTRAINTS_IMPORT in (repo / "CLAUDE.md").read_text()
    ckpt(repo, "integrate", "claude-code", "--project", "--remove")
    assert snapshot(repo) == before


def test_from_a_subdirectory_and_in_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    ckpt(repo / "src", "integrate", "claude-code")
    assert (repo / ".claude" / "settings.json").exists() and (repo / "CLAUDE.md").exists()
    assert not (repo / "src" / ".claude").exists()
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "-b", "side")
    (linked / "src" / "deep").mkdir()
    linked_before = snapshot(linked)
    result = ckpt_json(linked / "src" / "deep", "integrate", "codex")
    assert [f["path"] for f in result["files"]] == [".codex/hooks.json", "AGENTS.md"]
    assert (linked / ".codex" / "hooks.json").exists() and not (repo / ".codex").exists()
    gitdir = Path(git(linked, "rev-parse", "--absolute-git-dir"))
    assert (gitdir / "agent" / "integrations.json").exists()
    ckpt(linked, "integrate", "codex", "--remove")
    assert snapshot(linked) == linked_before
    ckpt(repo, "integrate", "claude-code", "--remove")
    assert not (repo / ".claude").exists() and not (repo / "CLAUDE.md").exists()


def test_remove_without_the_record_still_takes_our_entries_out(repo: Path) -> None:
    """A clone that got the committed files: no record, the entries are found all the same."""
    ckpt(repo, "integrate", "codex")
    (repo / ".git" / "agent" / "integrations.json").unlink()
    ckpt(repo, "integrate", "codex", "--remove")
    assert not (repo / ".codex").exists() and not (repo / "AGENTS.md").exists()


def test_real_git_ckpt_on_path(repo: Path) -> None:
    proc = real_ckpt(repo, "integrate", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert "created   .claude/settings.json" in proc.stdout
    assert "not on PATH" not in proc.stdout
    proc = real_ckpt(repo, "integrate", "claude-code", "--remove")
    assert proc.returncode == 0 and not (repo / ".claude").exists()


@pytest.mark.parametrize(
    "claude_md",
    ["", "# Rules\n", "# Rules", "# Rules\n\n", "a\r\nb\r\n", "a\r\nb"],
)
def test_claude_md_variants_round_trip(repo: Path, claude_md: str) -> None:
    (repo / "CLAUDE.md").write_bytes(claude_md.encode())
    ckpt(repo, "integrate", "claude-code")
    text = (repo / "CLAUDE.md").read_bytes().decode()
    assert text.startswith(claude_md)
    assert CONSTRAINTS_IMPORT in text.splitlines()  # an import line of its own
    if "\r\n" in claude_md:
        assert "\n" not in text.replace("\r\n", "")
    ckpt(repo, "integrate", "claude-code", "--remove")
    assert (repo / "CLAUDE.md").read_bytes() == claude_md.encode()


def test_text_added_after_the_block_stays(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("top")
    ckpt(repo, "integrate", "codex")
    with open(repo / "AGENTS.md", "a") as fh:
        fh.write("later\n")
    ckpt(repo, "integrate", "codex", "--remove")
    assert (repo / "AGENTS.md").read_text() == "top\nlater\n"


def test_symlinked_settings_file_written_through(repo: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"a": 1}\n')
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").symlink_to(real)
    ckpt(repo, "integrate", "claude-code")
    assert (repo / ".claude" / "settings.json").is_symlink()
    assert_ours_complete(json.loads(real.read_text()), "claude-code", CLAUDE_EVENTS)
    ckpt(repo, "integrate", "claude-code", "--remove")
    assert real.read_text() == '{"a": 1}\n' and (repo / ".claude" / "settings.json").is_symlink()


def test_one_line_file_gets_one_line_in_its_own_spacing(repo: Path) -> None:
    path = repo / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text('{"model": "x"}')
    ckpt(repo, "integrate", "codex")
    text = path.read_text()
    assert text.startswith('{"model": "x", "hooks": {"SessionStart": [{"matcher": "startup|')
    assert "\n" not in text
    path.write_text('{"model":"x"}')
    ckpt(repo, "integrate", "codex")
    assert path.read_text().startswith('{"model":"x","hooks":{"SessionStart":[{"matcher":"startup|')


def test_settings_file_not_utf8_refused(repo: Path) -> None:
    path = repo / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_bytes(b'{"a": "\xff"}\n')
    result = ckpt(repo, "integrate", "codex", ok=False)
    assert result.exit_code == 2 and ".codex/hooks.json is not valid UTF-8" in result.stderr
    assert path.read_bytes() == b'{"a": "\xff"}\n' and not (repo / "AGENTS.md").exists()


def test_file_deleted_in_between_is_created_again_and_removed_again(repo: Path) -> None:
    settings_file = repo / ".claude" / "settings.json"
    settings_file.parent.mkdir()
    settings_file.write_text('{"a": 1}\n')
    ckpt(repo, "integrate", "claude-code")
    settings_file.unlink()
    out = ckpt(repo, "integrate", "claude-code").stdout
    assert "created   .claude/settings.json" in out
    ckpt(repo, "integrate", "claude-code", "--remove")
    assert not settings_file.exists() and not (repo / "CLAUDE.md").exists()
    assert (repo / ".claude").is_dir()  # it was there before integrate made anything
