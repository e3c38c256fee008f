"""Showing text and commands so that a person sees exactly what is there (pure).

Constraint texts, check details and command lines come from files someone
else may have written: a bidi override, a zero-width space or an escape
sequence must never hide what a command does from the person approving it.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Sequence

__all__ = ["escape_control", "escape_for_display"]


_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _needs_escape(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category in _HIDDEN_CATEGORIES or (category == "Zs" and ch != " ")


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code < 0x80:  # \xNN is a raw byte in bash: only for ASCII
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a raw byte smuggled by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_control(text: str) -> str:
    """Escape control, format (bidi, zero-width), separator and unassigned
    characters as `\\n`, `\\e`, `\\x00`, `\\u202e`...; the result is one line."""
    return "".join(_escape_char(ch) if _needs_escape(ch) else ch for ch in text)


def _quote(arg: str) -> str:
    if _SAFE_WORD.fullmatch(arg):
        return arg
    if not any(_needs_escape(ch) for ch in arg):
        return shlex.quote(arg)
    body = "".join(
        _escape_char(ch) if _needs_escape(ch) else ("\\" + ch if ch in "\\'" else ch) for ch in arg
    )
    return f"$'{body}'"


def escape_for_display(argv: Sequence[str]) -> str:
    """The argv as one line of POSIX shell words: plain words bare, others in
    single quotes, and words with hidden characters in bash `$'...'` quoting
    with every such character escaped. Unambiguous and pasteable into bash."""
    return " ".join(_quote(arg) for arg in argv)
