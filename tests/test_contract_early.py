"""Issue 10, item 10: bad input is caught when it is given, not at check or resume.

A malformed contract is named (file, line, key) by `task start` (refused) and by
`create`, `step done` and `tick` (warned, the checkpoint still taken); the verdict is
cached by the contract's sha256. Constraint ids and task names that do not exist are
refused with "did you mean"; `config set` refuses keys the tool does not read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

GOOD = """\
constraints:
  - id: seed42
    text: Experiments use seed 42
    severity: block
  - id: api-frozen
    text: Do not touch src/api
    check: {kind: protected_paths, paths: ["src/api/**"]}
"""
BAD = GOOD.replace("severity: block", "severity: blocker")  # line 4
WHERE = ".agent/contracts/constraints.yaml:4: constraints[0].severity"
CONTRACT = Path(".agent") / "contracts" / "constraints.yaml"


def refs(repo: Path, prefix: str) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)", prefix).split()


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("git ckpt: warning:")]


def test_task_start_refuses_a_malformed_contract_naming_file_line_and_key(repo: Path) -> None:
    write(repo / CONTRACT, BAD)
    result = ckpt(repo, "task", "start", "t", "--goal", "g", ok=False)
    assert result.exit_code == 2
    assert WHERE in result.stderr and "'blocker'" in result.stderr
    assert refs(repo, "refs/agent/") == []  # nothing was started


@pytest.mark.parametrize("command", ["create", "step done", "tick"])
def test_checkpointing_commands_warn_loudly_and_still_protect_the_work(
    repo: Path, command: str
) -> None:
    write(repo / CONTRACT, GOOD)
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    ckpt(repo, "step", "start", "t", "s1")
    write(repo / CONTRACT, BAD)  # broken mid-task
    args = {
        "create": ("create", "-t", "t"),
        "step done": ("step", "done", "t", "s1"),
        "tick": ("tick", "t"),
    }[command]
    result = ckpt(repo, *args)
    (line,) = warnings(result.stderr)  # once, even when tick also takes a checkpoint
    assert WHERE in line and "does not validate" in line
    if command == "step done":  # a refused `step done` would lose the completion
        state = ckpt_json(repo, "task", "show", "t")
        assert state["steps"][0]["status"] == "done"


def test_the_verdict_is_cached_by_the_contracts_sha256(repo: Path) -> None:
    write(repo / CONTRACT, GOOD)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    cache = repo / ".git" / "agent" / "contract-check.json"
    doc = json.loads(cache.read_text())
    assert doc["error"] is None and doc["ids"] == ["seed42", "api-frozen"]
    # the same bytes are never parsed again: a (forged) cached verdict is what counts
    doc["error"] = "cached verdict, not a parse"
    cache.write_text(json.dumps(doc))
    assert "cached verdict, not a parse" in ckpt(repo, "create", "-t", "t").stderr
    write(repo / CONTRACT, GOOD + "\n")  # one byte more: validated again
    assert warnings(ckpt(repo, "create", "-t", "t").stderr) == []
    assert json.loads(cache.read_text())["key"] != doc["key"]


def test_a_cache_hit_loads_no_yaml_parser(repo: Path) -> None:
    """Cheap: with the verdict cached, `create` neither parses nor imports YAML."""
    import subprocess
    import sys

    write(repo / CONTRACT, GOOD)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    code = (
        "import sys, git_agentckpt.api as a\n"
        f"a.Checkpointer.open({str(repo)!r}).create('t')\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_unknown_constraint_ids_are_refused(repo: Path) -> None:
    write(repo / CONTRACT, GOOD)
    result = ckpt(repo, "task", "start", "t", "--goal", "g", "--constraint", "seed24", ok=False)
    assert result.exit_code == 2
    assert "'seed24' is not defined in .agent/contracts/constraints.yaml" in result.stderr
    assert "did you mean 'seed42'?" in result.stderr
    assert refs(repo, "refs/agent/") == []
    made = ckpt_json(repo, "task", "start", "t", "--goal", "g", "--constraint", "seed42")
    assert made["task"] == "t"


def test_a_constraint_id_without_any_contract_is_refused(repo: Path) -> None:
    result = ckpt(repo, "task", "start", "t", "--goal", "g", "--constraint", "seed42", ok=False)
    assert result.exit_code == 2 and "defined nowhere" in result.stderr
    assert refs(repo, "refs/agent/") == []


@pytest.mark.parametrize(
    "args",
    [
        ("event", "trian", "--type", "tool.call"),
        ("tick", "trian"),
        ("check", "trian"),
        ("step", "start", "trian", "s1"),
        ("step", "done", "trian", "s1"),
        ("step", "fail", "trian", "s1"),
    ],
)
def test_an_unknown_task_name_is_an_error_with_did_you_mean(
    repo: Path, args: tuple[str, ...]
) -> None:
    ckpt(repo, "task", "start", "train", "--goal", "g", "--step", "s1:one")
    before = refs(repo, "refs/agent/")
    result = ckpt(repo, *args, ok=False)
    assert result.exit_code == 3, result.output
    assert "no task 'trian'; did you mean 'train'?" in result.stderr
    assert refs(repo, "refs/agent/") == before  # no task was created


def test_config_set_refuses_keys_the_tool_does_not_read(repo: Path) -> None:
    ckpt(repo, "init")
    path = repo / ".agent" / "ckpt.toml"
    before = path.read_text()
    typo = ckpt(repo, "config", "set", "policy.light_every_call", "3", ok=False)
    assert typo.exit_code == 2 and "did you mean 'policy.light_every_calls'?" in typo.stderr
    table = ckpt(repo, "config", "set", "polcy.light_every_calls", "3", ok=False)
    assert table.exit_code == 2 and "did you mean 'policy.light_every_calls'?" in table.stderr
    mine = ckpt(repo, "config", "set", "custom.name", "x", ok=False)
    assert mine.exit_code == 2 and "--add" in mine.stderr
    assert path.read_text() == before  # nothing written
    assert ckpt(repo, "config", "set", "--add", "custom.name", "x").exit_code == 0
    assert ckpt(repo, "config", "set", "custom.name", "y").exit_code == 0  # now in the file
    refused = ckpt(repo, "config", "set", "--add", "policy.nope", "1", ok=False)
    assert refused.exit_code == 2  # --add never adds to a table the tool reads
    assert ckpt(repo, "config", "set", "snapshot.max_file_size", '"1MiB"').exit_code == 0
    assert ckpt(repo, "config", "set", "drift.context_drop", "0.4").exit_code == 0
