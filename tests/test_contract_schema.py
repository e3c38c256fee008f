"""Contract files and assertions: parsing, validation, and file:line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_agentckpt.contracts.schema import (
    CHECK_KINDS,
    Assertion,
    Check,
    Constraint,
    ContractError,
    assertion_from_spec,
    check_to_json,
    load_assertions_text,
    load_contract_dir,
    load_contract_text,
    parse_assertions,
    parse_check,
)
from git_agentckpt.errors import Exit, UsageError

DESIGN_YAML = """\
constraints:
  - id: seed42                       # unique, [A-Za-z0-9_.-]+
    text: Experiments must use seed 42
    severity: block                  # block | warn
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
    check: {kind: protected_paths, paths: ["src/api/**"]}
  - id: smoke
    text: The smoke test passes
    severity: warn
    check: {kind: command, argv: ["pytest", "-q", "tests/smoke"], timeout: 60}
  - id: notes.md
    text: Write down what you tried
"""


def error_of(text: str, filename: str = "constraints.yaml") -> str:
    with pytest.raises(ContractError) as info:
        load_contract_text(text, filename)
    message = info.value.one_line()
    assert "\n" not in message
    return message


def test_design_example_parses() -> None:
    contract = load_contract_text(DESIGN_YAML, "constraints.yaml")
    assert contract.path == "constraints.yaml"
    seed, api, smoke, notes = contract.constraints
    assert seed == Constraint(
        "seed42",
        "Experiments must use seed 42",
        "block",
        Check("json_value", {"file": "config.json", "path": "train.seed", "equals": 42}),
        2,
    )
    assert api.check is not None and api.check.params["paths"] == ("src/api/**",)
    assert api.line == 6
    assert smoke.severity == "warn"
    assert smoke.check is not None
    assert smoke.check.params == {"argv": ("pytest", "-q", "tests/smoke"), "timeout": 60.0}
    assert notes.check is None and notes.severity == "block" and notes.line == 14


def test_json_contract_is_the_same_structure_with_lines() -> None:
    yaml_contract = load_contract_text(DESIGN_YAML, "constraints.yaml")
    doc = {
        "constraints": [
            {"id": c.id, "text": c.text, "severity": c.severity}
            | ({"check": check_to_json(c.check)} if c.check else {})
            for c in yaml_contract.constraints
        ]
    }
    text = json.dumps(doc, indent=2)
    contract = load_contract_text(text, "constraints.json")
    assert [(c.id, c.text, c.severity, c.check) for c in contract.constraints] == [
        (c.id, c.text, c.severity, c.check) for c in yaml_contract.constraints
    ]
    lines = text.splitlines()
    for constraint in contract.constraints:
        assert constraint.line is not None
        assert lines[constraint.line - 1].strip() == "{"
        assert f'"id": "{constraint.id}"' in lines[constraint.line]


@pytest.mark.parametrize(
    "text",
    ["", "\n# only comments\n", "constraints: []\n", "constraints:\n  # - id: x\n", "{}\n"[:0]],
)
def test_empty_contracts_are_valid(text: str) -> None:
    assert load_contract_text(text, "constraints.yaml").constraints == ()


@pytest.mark.parametrize("text", ["", "  \n", '{"constraints": []}', "null"])
def test_empty_json_contracts_are_valid(text: str) -> None:
    assert load_contract_text(text, "constraints.json").constraints == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "- a\n- b\n",
            "constraints.yaml:1: must be a mapping (with a 'constraints' list), not list",
        ),
        ("just a string\n", "not string"),
        ("{}\n", "constraints.yaml:1: missing 'constraints'"),
        ("constraints: 3\n", "constraints.yaml:1: constraints: must be a list, not integer"),
        ("constraints: []\nrules: []\n", "constraints.yaml:2: rules: unknown field 'rules'"),
        ("version: 2\nconstraints: []\n", "constraints.yaml:1: version: unsupported version 2"),
    ],
)
def test_not_a_contract_mapping(text: str, expected: str) -> None:
    assert expected in error_of(text)


def test_yaml_syntax_error_names_the_line() -> None:
    text = "constraints:\n  - id: a\n    text: ok\n  - id: b\n    text: [unclosed\n  - id: c\n"
    message = error_of(text)
    assert re.match(r"constraints\.yaml:[56]: invalid YAML: ", message), message


def test_yaml_bad_indentation_names_the_line() -> None:
    text = "constraints:\n  - id: a\n    text: ok\n   bad: indent\n"
    assert error_of(text).startswith("constraints.yaml:4: invalid YAML: ")


def test_yaml_control_character_names_the_line() -> None:
    assert error_of("constraints:\n  - id: a\x00\n").startswith("constraints.yaml:2: invalid YAML")


def test_json_syntax_error_names_the_line() -> None:
    text = (
        '{\n  "constraints": [\n'
        '    {"id": "a", "text": "t"},\n'
        '    {"id": "b" "text": "t"}\n'
        "  ]\n}\n"
    )
    assert error_of(text, "c.json") == "c.json:4: invalid JSON: Expecting ',' delimiter"


def test_unknown_kind_names_file_line_and_key() -> None:
    text = DESIGN_YAML.replace("kind: protected_paths", "kind: foo")
    known = ", ".join(sorted(CHECK_KINDS))
    assert error_of(text) == (
        f"constraints.yaml:9: constraints[1].check.kind: unknown check kind 'foo' (known: {known})"
    )


def test_unknown_kind_in_json_names_the_line() -> None:
    doc = {"constraints": [{"id": "a", "text": "t", "check": {"kind": "file_exists", "file": "x"}}]}
    doc["constraints"].append({"id": "b", "text": "t", "check": {"kind": "nope"}})
    text = json.dumps(doc, indent=2)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if '"nope"' in row)
    assert error_of(text, "c.json").startswith(
        f"c.json:{line}: constraints[1].check.kind: unknown check kind 'nope'"
    )


def test_bad_regex_names_line_and_key() -> None:
    text = (
        "constraints:\n"
        "  - id: r\n"
        "    text: a regex\n"
        "    check:\n"
        "      kind: file_matches\n"
        "      file: README.md\n"
        "      regex: 'seed = (4'\n"
    )
    message = error_of(text)
    assert message.startswith(
        "constraints.yaml:7: constraints[0].check.regex: bad regular expression"
    )
    assert "missing )" in message


def test_duplicate_ids_are_refused() -> None:
    text = DESIGN_YAML.replace("id: smoke", "id: seed42")
    assert error_of(text) == (
        "constraints.yaml:10: constraints[2].id: duplicate id 'seed42' (first at line 2)"
    )


def test_duplicate_ids_in_json() -> None:
    doc = {"constraints": [{"id": "a", "text": "t"}, {"id": "a", "text": "u"}]}
    assert "constraints[1].id: duplicate id 'a'" in error_of(json.dumps(doc, indent=1), "c.json")


def test_duplicate_keys_are_refused() -> None:
    assert error_of("constraints:\n  - id: a\n    text: t\n    text: u\n") == (
        "constraints.yaml:4: duplicate key 'text'"
    )
    assert error_of('{"constraints": [],\n "constraints": []}', "c.json") == (
        "c.json:2: duplicate key 'constraints'"
    )


def constraint_with(check: str, extra: str = "") -> str:
    return f"constraints:\n  - id: c1\n    text: t\n{extra}    check: {check}\n"


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ("{file: x}", "constraints[0].check: missing required field 'kind'"),
        ("[a]", "constraints[0].check: must be a mapping"),
        ("{kind: file_exists}", "constraints[0].check: missing required field 'file'"),
        ("{kind: file_exists, file: x, fiel: y}", "check.fiel: unknown field 'fiel'"),
        ("{kind: file_exists, file: /etc/passwd}", "check.file: must be a path relative"),
        ("{kind: file_exists, file: ../x}", "check.file: must not contain '..'"),
        ("{kind: file_exists, file: 3}", "check.file: must be a string, not integer"),
        ("{kind: file_contains, file: x, text: ''}", "check.text: must not be empty"),
        ("{kind: file_sha256, file: x, sha256: abc}", "check.sha256: must be 64 hexadecimal"),
        ("{kind: json_value, file: x, path: a..b, equals: 1}", "check.path: empty component"),
        ("{kind: json_value, file: x, path: a}", "missing required field 'equals'"),
        ("{kind: yaml_value, file: x, path: a, equals: !!binary aGk=}", "unsupported value"),
        ("{kind: max_changed_files, max: -1}", "check.max: must be a non-negative integer"),
        ("{kind: max_changed_files, max: true}", "check.max: must be a non-negative integer"),
        ("{kind: protected_paths, paths: src/**}", "check.paths: must be a non-empty list"),
        ("{kind: protected_paths, paths: []}", "check.paths: must be a non-empty list"),
        ("{kind: forbidden_paths, paths: [ok, 'a//b']}", "check.paths[1]: empty path component"),
        ("{kind: command, argv: 'pytest -q'}", "check.argv: must be a non-empty list of strings"),
        ("{kind: command, argv: []}", "check.argv: must be a non-empty list of strings"),
        ("{kind: command, argv: [pytest, 3]}", "check.argv[1]: must be a string, not integer"),
        ("{kind: command, argv: ['']}", "check.argv[0]: the program name must not be empty"),
        ("{kind: command, argv: [x], timeout: 0}", "check.timeout: must be a positive number"),
        ("{kind: command, argv: [x], timeout: -5}", "check.timeout: must be a positive number"),
        ("{kind: command, argv: [x], timeout: '5'}", "check.timeout: must be a positive number"),
        ("{kind: command, argv: [x], timeout: true}", "check.timeout: must be a positive number"),
        ("{kind: command, argv: [x], timeout: .inf}", "check.timeout: must be a positive number"),
    ],
)
def test_check_field_validation(check: str, expected: str) -> None:
    message = error_of(constraint_with(check))
    assert message.startswith("constraints.yaml:4: constraints[0].check"), message
    assert expected in message


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    severity: fatal\n", "constraints.yaml:4: constraints[0].severity: severity must be"),
        ("    owner: me\n", "constraints.yaml:4: constraints[0].owner: unknown field 'owner'"),
        ("    text: 5\n", "duplicate key 'text'"),
    ],
)
def test_constraint_field_validation(extra: str, expected: str) -> None:
    assert expected in error_of(constraint_with("{kind: file_exists, file: x}", extra))


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("  - text: t\n", "constraints[0]: missing required field 'id'"),
        ("  - id: 'has space'\n    text: t\n", "constraints[0].id: id must match"),
        ("  - id: 7\n    text: t\n", "constraints[0].id: id must match"),
        ("  - id: ok\n", "constraints[0]: missing required field 'text'"),
        ("  - id: ok\n    text: ''\n", "constraints[0].text: must not be empty"),
        ("  - just a string\n", "constraints[0]: must be a mapping"),
    ],
)
def test_constraint_required_fields(item: str, expected: str) -> None:
    assert expected in error_of("constraints:\n" + item)


def test_command_timeout_defaults_and_globs_with_negation() -> None:
    check = parse_check({"kind": "command", "argv": ["make", "test"]})
    assert check.params["timeout"] == 60.0
    check = parse_check({"kind": "forbidden_paths", "paths": ["data/**", "!data/tmp/**"]})
    assert check.params["paths"] == ("data/**", "!data/tmp/**")


def test_parse_check_errors_use_where_and_source() -> None:
    with pytest.raises(ContractError) as info:
        parse_check({"kind": "file_matches", "file": "a", "regex": "["}, "assertions[2].check")
    assert info.value.one_line().startswith("<check>: assertions[2].check.regex: bad regular")
    assert isinstance(info.value, UsageError) and info.value.exit_status == Exit.USAGE


def test_load_contract_dir(tmp_path: Path) -> None:
    assert load_contract_dir(tmp_path) is None
    (tmp_path / "constraints.md").write_text("# for people\n")
    assert load_contract_dir(tmp_path) is None
    (tmp_path / "constraints.yaml").write_text(DESIGN_YAML)
    contract = load_contract_dir(tmp_path)
    assert contract is not None and len(contract.constraints) == 4
    assert contract.path == str(tmp_path / "constraints.yaml")
    (tmp_path / "constraints.json").write_text('{"constraints": []}')
    with pytest.raises(ContractError, match="more than one contract file"):
        load_contract_dir(tmp_path)
    (tmp_path / "constraints.yaml").unlink()
    contract = load_contract_dir(tmp_path)
    assert contract is not None and contract.constraints == ()
    (tmp_path / "constraints.json").write_bytes(b'{"constraints": ["\xff"]}')
    with pytest.raises(ContractError, match="not valid UTF-8"):
        load_contract_dir(tmp_path)


def test_load_contract_dir_error_names_the_real_path(tmp_path: Path) -> None:
    (tmp_path / "constraints.yml").write_text(
        "constraints:\n  - id: x\n    text: t\n    check: 1\n"
    )
    with pytest.raises(ContractError) as info:
        load_contract_dir(tmp_path)
    assert info.value.one_line().startswith(
        f"{tmp_path / 'constraints.yml'}:4: constraints[0].check"
    )


def test_assertions_round_trip_through_json() -> None:
    assertions = (
        Assertion("cfg", Check("file_sha256", {"file": "cfg.yaml", "sha256": "a" * 64})),
        Assertion("paths", Check("protected_paths", {"paths": ("src/**",)}), text="frozen"),
    )
    doc = {"v": 1, "assertions": [a.to_json() for a in assertions]}
    assert parse_assertions(json.loads(json.dumps(doc))) == assertions
    assert parse_assertions([a.to_json() for a in assertions]) == assertions
    assert parse_assertions({"assertions": None}) == ()


def test_assertion_file_errors_name_the_line() -> None:
    text = "assertions:\n  - id: a\n    check: {kind: file_exists, file: x}\n  - id: b\n"
    with pytest.raises(ContractError) as info:
        load_assertions_text(text, "asserts.yaml")
    assert info.value.one_line() == "asserts.yaml:4: assertions[1]: missing required field 'check'"
    good = load_assertions_text("- id: a\n  check: {kind: file_exists, file: x}\n", "a.yaml")
    assert good == (Assertion("a", Check("file_exists", {"file": "x"})),)


HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("spec", "kind", "params"),
    [
        ("file_exists:path/to/x", "file_exists", {"file": "path/to/x"}),
        (f"file_sha256:a=b.bin={HEX.upper()}", "file_sha256", {"file": "a=b.bin", "sha256": HEX}),
        (
            "file_contains:README.md=seed = 42",
            "file_contains",
            {"file": "README.md", "text": "seed = 42"},
        ),
        (
            "file_matches:train.py=seed\\s*=\\s*42",
            "file_matches",
            {"file": "train.py", "regex": "seed\\s*=\\s*42"},
        ),
        (
            "json_value:file.json#train.seed=42",
            "json_value",
            {"file": "file.json", "path": "train.seed", "equals": 42},
        ),
        (
            'yaml_value:c.yaml#name="42"',
            "yaml_value",
            {"file": "c.yaml", "path": "name", "equals": "42"},
        ),
        (
            "toml_value:p.toml#tool.x.on=true",
            "toml_value",
            {"file": "p.toml", "path": "tool.x.on", "equals": True},
        ),
        (
            "json_value:c.json#model=gpt x",
            "json_value",
            {"file": "c.json", "path": "model", "equals": "gpt x"},
        ),
        (
            "json_value:c.json#layers.0=[1, 2]",
            "json_value",
            {"file": "c.json", "path": "layers.0", "equals": [1, 2]},
        ),
        ("max_changed_files:20", "max_changed_files", {"max": 20}),
        (
            "protected_paths:src/api/**,docs/**",
            "protected_paths",
            {"paths": ("src/api/**", "docs/**")},
        ),
        ("forbidden_paths:data/raw/", "forbidden_paths", {"paths": ("data/raw/",)}),
        (
            "command:pytest -q 'tests/a b'",
            "command",
            {"argv": ("pytest", "-q", "tests/a b"), "timeout": 60.0},
        ),
    ],
)
def test_assert_spec_parsing(spec: str, kind: str, params: dict[str, object]) -> None:
    assertion = assertion_from_spec(spec)
    assert assertion.check == Check(kind, params)
    assert re.fullmatch(rf"{kind}-[0-9a-f]{{8}}", assertion.id)
    assert assertion_from_spec(spec).id == assertion.id


def test_assert_spec_ids_differ_between_specs() -> None:
    ids = {assertion_from_spec(f"file_exists:f{i}").id for i in range(50)}
    assert len(ids) == 50


def test_assert_spec_with_explicit_id() -> None:
    assertion = assertion_from_spec("cfg.seed@json_value:cfg.json#seed=42")
    assert assertion.id == "cfg.seed"
    assert assertion.check.kind == "json_value"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("file_exists", "--assert 'file_exists': expected KIND:ARGS"),
        ("nope:x", "--assert 'nope:x': check.kind: unknown check kind 'nope'"),
        ("file_sha256:a", "expected PATH=SHA256"),
        ("file_sha256:a=zz", "check.sha256: must be 64 hexadecimal digits"),
        ("file_contains:a", "expected PATH=TEXT"),
        ("json_value:c.json=1", "expected FILE#KEY.PATH=VALUE"),
        ("json_value:c.json#a", "expected FILE#KEY.PATH=VALUE"),
        ("max_changed_files:many", "check.max: must be a non-negative integer"),
        ("file_exists:../up", "check.file: must not contain '..'"),
        ("file_exists:", "check.file: must not be empty"),
        ("protected_paths:a,,b", "check.paths[1]: must not be empty"),
        ("file_matches:a=(", "check.regex: bad regular expression"),
        ("command:pytest 'unclosed", "cannot split the command"),
        ("command:", "check.argv: must be a non-empty list"),
        ("bad id@file_exists:x", "id must match"),
    ],
)
def test_assert_spec_errors(spec: str, expected: str) -> None:
    with pytest.raises(ContractError) as info:
        assertion_from_spec(spec)
    assert expected in info.value.one_line()
    assert "\n" not in info.value.one_line()


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("constraints:- {}[]\"'idtexk,#\n\t !&*@0123")), max_size=80
    )
)
def test_arbitrary_text_is_a_contract_or_one_contract_error(text: str) -> None:
    for filename in ("c.yaml", "c.json"):
        try:
            load_contract_text(text, filename)
        except ContractError as exc:
            assert "\n" not in exc.one_line()
            assert exc.one_line().startswith(filename)
