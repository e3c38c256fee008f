"""Showing text and commands so that a person sees exactly what is there (pure).

Constraint texts, check details and command lines come from files someone
else may have written: a bidi override, a zero-width space or an escape
sequence must never hide what a command does from the person approving it.
Whatever the CLI writes to a terminal (a fetched trail's goal, subject, actor,
brief) passes through `terminal_text`: a trail cannot command the terminal.
"""

from __future__ import annotations

import io
import re
import shlex
import unicodedata
from collections.abc import Sequence
from typing import TextIO

__all__ = ["TerminalText", "escape_control", "escape_for_display", "plain", "terminal_text"]


_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x1b": "\\e"}
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# what a terminal acts on: C0 controls but newline and tab, DEL, and the C1 range
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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


def _terminal_escape(found: re.Match[str]) -> str:
    ch = found.group()
    return f"\\u{ord(ch):04x}" if ch >= "\x7f" else _escape_char(ch)


def terminal_text(text: str) -> str:
    """`text` as it may reach a terminal: ESC, BEL, CR, the other C0 controls but newline
    and tab, DEL and C1 (which open a terminal's own commands: set the title, write the
    clipboard, clear the screen) shown as `\\e`, `\\x07`, `\\r`, `\\u009b`. JSON stays
    JSON: it never holds a C0 control raw, and DEL and C1 become its own `\\u00XX`."""
    if _TERMINAL_CONTROLS.search(text) is None:
        return text
    return _TERMINAL_CONTROLS.sub(_terminal_escape, text)


class TerminalText(io.TextIOWrapper):
    """stdout or stderr on a terminal (the CLI puts it in place): every write goes
    through `terminal_text`, the one path by which text a trail brought (a goal, an
    actor, a brief) reaches a terminal."""

    def __init__(self, under: TextIO) -> None:
        under.flush()
        super().__init__(under.buffer, under.encoding, under.errors, line_buffering=True)
        self.under = under  # kept: it shares our buffer, and closes it when freed

    def write(self, text: str) -> int:
        return super().write(terminal_text(text))


def plain(stream: TextIO) -> TextIO:
    """The stream under a `TerminalText`: for the tool's own control characters only
    (a progress meter's `\\r`)."""
    return stream.under if isinstance(stream, TerminalText) else stream


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
