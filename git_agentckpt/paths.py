"""File names are bytes: how they are carried inside the tool and shown at its edges (pure).

git stores a file name as bytes, UTF-8 or not (`caf\\xe9.txt` written by a
Latin-1 program). Inside the tool a path is a `str` holding those bytes
decoded as UTF-8 with `surrogateescape` (`os.fsdecode`), which is what pygit2
and Python's `os` functions give and take: each byte that is not part of
valid UTF-8 is a lone surrogate U+DC80..U+DCFF, and `fs_bytes` gives the bytes
back exactly. At each edge the path is converted once:

- git, pygit2, the file system: the exact bytes (`os.fsencode`, `-z` output).
- Text for people (stdout, the brief, `report.md`): git's quoting, `quote`:
  a name with a control character, `"` or `\\` (and, with `core.quotePath`,
  git's default, any byte >= 0x80) is shown in double quotes with C escapes
  and octal bytes, `"caf\\351.txt"`. A name that is not UTF-8 is always quoted.
- JSON output (`--json`): `to_json`: the name itself when it is valid UTF-8
  and does not begin with `"`, else its quoted form (ASCII). So a string that
  begins with `"` is a quoted name and `from_json` gives the bytes back.
- JSON stored in git (events, notes, `report.json`): `store_json` writes a
  lone surrogate as the JSON escape `\\udce9`, which Python's `json` reads back
  as the same `str`: stored paths come back byte for byte.
Text (goals, messages) is refused at the door when it is not UTF-8
(`cli/common.py`), so a lone surrogate anywhere else came from a file name.
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "escape_lone_bytes",
    "from_json",
    "fs_bytes",
    "is_utf8",
    "json_fields",
    "json_safe",
    "quote",
    "store_json",
    "to_json",
    "unquote",
]

_LONE = re.compile("[\udc80-\udcff]")
# git's quote.c: the characters with a name of their own inside double quotes
_NAMED = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 34: '"', 92: "\\"}
_UNNAMED = {v: k for k, v in _NAMED.items()}
TEXT_ERRORS = "git-ckpt-octal"  # codec error handler: a lone surrogate as git's `\ooo`


def fs_bytes(path: str) -> bytes:
    """The bytes of the file name (as `os.fsencode` on Linux)."""
    return path.encode("utf-8", "surrogateescape")


def is_utf8(path: str) -> bool:
    """Whether the name's bytes are valid UTF-8 (no byte was smuggled as a surrogate)."""
    return _LONE.search(path) is None


def _must_quote(byte: int, non_ascii: bool) -> bool:
    return byte < 0x20 or byte in (0x22, 0x5C, 0x7F) or (non_ascii and byte >= 0x80)


def quote(path: str, *, non_ascii: bool = True) -> str:
    """`path` as git prints it (`quote_c_style`); `non_ascii` is `core.quotePath`.

    A name that is not valid UTF-8 is quoted with every byte >= 0x80 in octal
    whatever `non_ascii` says: text output stays valid UTF-8.
    """
    raw = fs_bytes(path)
    non_ascii = non_ascii or not is_utf8(path)
    if not any(_must_quote(b, non_ascii) for b in raw):
        return path
    out = ['"']
    plain = bytearray()
    for b in raw:
        if not _must_quote(b, non_ascii):
            plain.append(b)
            continue
        out.append(plain.decode("utf-8"))
        plain.clear()
        out.append("\\" + _NAMED[b] if b in _NAMED else f"\\{b:03o}")
    out.append(plain.decode("utf-8"))
    out.append('"')
    return "".join(out)


def unquote(text: str) -> str:
    """The name a quoted form stands for (the inverse of `quote`); plain text as it is."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body = text[1:-1].encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(body):
        b = body[i]
        if b != 0x5C or i + 1 >= len(body):
            out.append(b)
            i += 1
            continue
        nxt = chr(body[i + 1])
        if nxt in _UNNAMED:
            out.append(_UNNAMED[nxt])
            i += 2
        elif re.fullmatch(rb"[0-3][0-7]{2}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(b)
            i += 1
    return out.decode("utf-8", "surrogateescape")


def to_json(path: str) -> str:
    """The name in JSON output: itself when plain UTF-8, else its quoted form (lossless)."""
    if is_utf8(path) and not path.startswith('"'):
        return path
    return quote(path, non_ascii=True)


def from_json(text: str) -> str:
    """The name a `to_json` string stands for."""
    return unquote(text) if text.startswith('"') else text


def json_fields(path: str) -> dict[str, str]:
    """`{"path": to_json(path)}`, plus `path_bytes_b64` (the bytes) when it had to be quoted."""
    shown = to_json(path)
    if shown == path:
        return {"path": path}
    return {"path": shown, "path_bytes_b64": base64.b64encode(fs_bytes(path)).decode("ascii")}


def json_safe(value: Any) -> Any:
    """A JSON value whose strings holding a file name's raw bytes are in `to_json` form."""
    if isinstance(value, str):
        return value if is_utf8(value) else to_json(value)
    if isinstance(value, Mapping):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def store_json(text: str) -> str:
    """JSON text (from `json.dumps(ensure_ascii=False)`) with each lone surrogate escaped."""
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_lone_bytes(text: str) -> str:
    """`text` with each byte smuggled as a surrogate written as git's octal `\\ooo`."""
    return _LONE.sub(lambda m: f"\\{ord(m.group()) - 0xDC00:03o}", text)


def _octal_errors(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    if not all("\udc80" <= ch <= "\udcff" for ch in bad):
        raise exc
    return escape_lone_bytes(bad), exc.end


codecs.register_error(TEXT_ERRORS, _octal_errors)
