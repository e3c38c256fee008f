"""Every command has help text and a section in man/git-ckpt.1; the README's test
command is exactly what .ci/run runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from git_agentckpt.cli.main import LAZY_COMMANDS, cli, load_all_commands

load_all_commands()

ROOT = Path(__file__).resolve().parent.parent
MAN = (ROOT / "man" / "git-ckpt.1").read_text()


def walk(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, cmd in sorted(group.commands.items()):
        if cmd.hidden:
            continue
        full = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            yield from walk(cmd, full + " ")
        else:
            yield full, cmd


def test_lazy_command_table_is_complete() -> None:
    assert set(cli.commands) == set(LAZY_COMMANDS)


def test_every_command_has_help_and_a_man_section() -> None:
    sections = re.findall(r"^\.SS (.+)$", MAN, flags=re.MULTILINE)
    plain = [re.sub(r"\\f[BIRP]|\\", "", s) for s in sections]
    commands = list(walk(cli))
    assert len(commands) >= 14
    for full, cmd in commands:
        assert (cmd.help or "").strip(), f"{full} has no help text"
        assert any(s == full or s.startswith(full + " ") for s in plain), f"no .SS for {full}"
        result = CliRunner().invoke(cli, [*full.split(), "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output


def test_every_option_is_in_the_man_page() -> None:
    for full, cmd in walk(cli):
        for param in cmd.params:
            if isinstance(param, click.Option):
                for opt in param.opts:
                    if opt.startswith("--") and opt != "--help":
                        escaped = opt.replace("-", r"\-")
                        assert opt in MAN or escaped in MAN, f"{full}: {opt} is not documented"


def test_exit_statuses_documented() -> None:
    from git_agentckpt.errors import Exit

    exit_section = MAN.split(".SH EXIT STATUS", 1)[1].split(".SH", 1)[0]
    for status in Exit:
        assert f".B {int(status)}\n" in exit_section, f"exit status {int(status)} undocumented"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", readme, flags=re.DOTALL)
    assert match, "README has no marked test command"
    command = match.group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci.splitlines(), ".ci/run does not run the README's test command"


def test_readme_contract_example_is_valid() -> None:
    from git_agentckpt.contracts.schema import load_contract_text

    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n(constraints:.+?)```", readme, flags=re.DOTALL)
    assert block, "README has no constraints.yaml example"
    contract = load_contract_text(block.group(1), "constraints.yaml")
    ids = [c.id for c in contract.constraints]
    assert {"seed42", "api-frozen", "raw-data-readonly", "results-from-config"} <= set(ids)
    kinds = {c.check.kind for c in contract.constraints if c.check}
    assert {"json_value", "protected_paths", "forbidden_paths"} <= kinds
