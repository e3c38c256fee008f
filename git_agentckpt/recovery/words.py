"""Words of a restatement: tokens, stems, sentences, key terms (pure).

The restatement checker (`recovery/confirm.py`) reads English the cheap way:
lower-cased tokens, a crude suffix-stripping stem ("ignored", "ignores" and
"ignoring" are all `ignor`), contractions split ("won't" is `will not`), and
sentences cut at `.`, `!`, `?`, `;`, `…` and line ends. No model, no grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STOP = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "must",
        "never",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "was",
        "were",
        "will",
        "with",
        "without",
        "you",
        "your",
        "all",
        "any",
        "each",
        "every",
        "may",
        "can",
        "only",
        "most",
        "least",
        "than",
        "more",
        "less",
        "i",
        "we",
        "me",
        "my",
        "no",
    )
)
# things that turn what follows into its opposite (checked a few words before a cue)
NEGATORS = frozenset(
    (
        "not",
        "never",
        "no",
        "nothing",
        "none",
        "nor",
        "neither",
        "without",
        "cannot",
        "avoid",
        "refuse",
        "forbid",
        "forbidden",
        "prohibited",
        "nowhere",
        "nobody",
    )
)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?(?:[_./-][A-Za-z0-9]+(?:['’][A-Za-z]+)?)*")
_SPLIT = re.compile(r"[.!?]+(?=\s|$)|[\n;…]")
_LETTERS_DIGITS = re.compile(r"([a-z]{3,})(\d+(?:\.\d+)?)")
_CONTRACTED = {"won't": "will", "can't": "can", "shan't": "shall", "ain't": "is"}


def stem(word: str) -> str:
    """A crude stem: `experiments`->`experiment`, `ignored`->`ignor`, `modifies`->`modify`."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if not w.isalpha():
        return w
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: -len(suffix)]
            # dropped -> drop, skipping -> skip (not: filled, passed)
            if suffix in ("ing", "ed") and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
                w = w[:-1]
            break
    if w.endswith("i"):
        w = w[:-1] + "y"
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


@dataclass(frozen=True)
class Tok:
    raw: str  # lower-cased, as written
    stem: str
    start: int
    end: int


def tokens(text: str) -> list[Tok]:
    out: list[Tok] = []
    for m in _TOKEN.finditer(text):
        word = m.group().lower().replace("’", "'")
        s, e = m.start(), m.end()
        if word.endswith("n't"):
            base = _CONTRACTED.get(word, word[:-3])
            out += [Tok(base, stem(base), s, e), Tok("not", "not", s, e)]
        elif word.endswith("'ll"):
            out += [Tok(word[:-3], stem(word[:-3]), s, e), Tok("will", "will", s, e)]
        else:
            if word.endswith("'s"):
                word = word[:-2]
            out.append(Tok(word, stem(word), s, e))
    return out


def sentences(text: str) -> list[str]:
    return [s for s in _SPLIT.split(text) if s.strip()]


def parts(raw: str) -> list[str]:
    """A token and its pieces: `src/api` -> src/api, src, api; `seed42` -> seed42, seed, 42."""
    out = [raw]
    pieces = [p for p in re.split(r"[_./-]", raw) if p]
    if len(pieces) > 1:
        out += pieces
    for p in pieces:
        m = _LETTERS_DIGITS.fullmatch(p)
        if m:
            out += [m.group(1), m.group(2)]
    return out


# words that name the same thing in a constraint and its restatement ("download" and
# "fetch"): a line sharing one of them shares a word with the constraint
SYNONYMS = tuple(
    frozenset(stem(w) for w in group.split())
    for group in (
        "modify change edit alter touch rewrite update",
        "delete remove erase",
        "download fetch pull",
        "network internet web online",
        "write overwrite",
        "doc docs documentation",
        "config configuration",
        "exist present",
        "pass green succeed",
        "keep preserve retain",
        "test tests check",
    )
)


def with_synonyms(stems: set[str] | frozenset[str]) -> set[str]:
    out = set(stems)
    for group in SYNONYMS:
        if group & out:
            out |= group
    return out


def is_key(word: str) -> bool:
    return bool(word) and word not in STOP and (len(word) >= 3 or word.isdigit())


def key_stems(text: str) -> set[str]:
    """The stems of the words that carry meaning (no stop words, no 1-2 letter words)."""
    out: set[str] = set()
    for tok in tokens(text):
        for p in parts(tok.raw):
            if is_key(p):
                out.add(stem(p))
    return out


def tok_stems(tok: Tok) -> set[str]:
    return {stem(p) for p in parts(tok.raw) if is_key(p)}


# numbers written as words ("four decimals", "at most five files", "twice"); not "one",
# which is as often a pronoun ("no one", "the final one") as a count
NUMBER_WORDS = (
    {"once": 1.0, "twice": 2.0, "thrice": 3.0}
    | {
        w: float(n)
        for n, w in enumerate(
            (
                *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
                *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
                *("seventeen", "eighteen", "nineteen", "twenty"),
            )
        )
        if n >= 2
    }
    | {"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "hundred": 100.0}
)


def number(raw: str) -> float | None:
    if raw in NUMBER_WORDS:
        return NUMBER_WORDS[raw]
    if not any(ch.isdigit() for ch in raw):
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def negated(toks: list[Tok], i: int, before: int = 3) -> bool:
    """Whether the word at `i` is negated by one of the `before` words before it."""
    return any(t.raw in NEGATORS for t in toks[max(0, i - before) : i])


def excerpt(text: str, limit: int = 100) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
