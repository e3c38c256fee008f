"""The rule-head prefilter never changes what redaction does, only when it compiles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from git_agentckpt.redact import Redactor
from git_agentckpt.redact_rules import _RULE_HEADS, _rules

FRAGMENTS = [
    "Authorization: Bearer abc123def456",
    "token=",
    "s3cr3tValue99",
    "://",
    "user:pw@",
    "AKIA",
    "QX7ZT4LM2PB9KD3W",
    "ghp_",
    "A" * 36,
    "sk-proj-",
    "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7",
    "xoxb-",
    "1234567890-abc",
    "AIza",
    "ya29.",
    "hf_",
    "eyJ",
    "hbGciOiJIUzI1NiJ9",
    ".",
    "password: ",
    '"api_key": "',
    "SENDGRID_KEY=",
    "tok",
    "hunter2hunter2",
    " ",
    "\n",
    "hello",
    "01M8KC2S352MH2E0WXXBMSRRGR",
    "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "-----BEGIN RSA PRIVATE KEY-----\nMII\n",
]


def full(r: Redactor, s: str) -> str:
    """Redaction without the prefilter: the prepass, then every rule."""
    s = r._prepass.sub(r._prepass_sub, s)
    return _rules()[0].sub(r._rule_sub, s)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=12))
def test_prefilter_is_transparent(parts: list[str]) -> None:
    text = "".join(parts)
    r = Redactor(env={})
    assert r.text(text) == full(Redactor(env={}), text)


def test_ordinary_text_skips_the_rules() -> None:
    for text in (
        "checkpoint 3 of ablation: before run 3",
        "01M8KC2S352MH2E0WXXBMSRRGR",
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "step s2 done",
        "full",
    ):
        assert _RULE_HEADS.search(text) is None
