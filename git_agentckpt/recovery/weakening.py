"""Where a restatement weakens a constraint instead of restating it (pure, a heuristic).

A constraint holds always, for every case, and for the one value it fixes. A
restatement that keeps its words but adds "except", "when needed", "may" or "random"
says something else. Six rules, by meaning, each naming the words it refused:

- *excepted*: an exception ("except", "unless", "other than", "apart from", "excluding",
  ...) or a restriction by "only" ("only successful runs" where the rule says every run).
  Not one: the marker negated ("no exceptions", "without exception", "even if"), or an
  exclusivity whose rest is the constraint itself ("no seed other than 42", "no step is
  done unless the smoke tests pass").
- *conditional*: a condition that lets it lapse: "when needed", "if possible", "as
  needed", "for now", "at first", "until", "as long as", "only after", "if ..." (not "even
  if", nor an "if" whose clause is the constraint itself: "done only if the tests pass").
- *relaxed*: a permission or a softening: "may", "can", "could", "allowed", "free to",
  "fine", "okay", "acceptable", "mostly", "usually", "ideally", "preferably", "by
  default", "roughly", "about 32", "more" against an "at most". Not when negated ("may
  not", "cannot", "nothing ... can", "not allowed") nor restricted ("can only"), nor a
  permission to read ("we can read data/raw").
- *left to chance*: for a constraint that fixes a value: "random", "at random", "any
  seed", "another optimizer", "a fresh seed", "whatever", "32 or 16", or a verb that
  moves the value ("tune", "raise", "vary", "reseed") on a clause that names it.
- *negated*: the rule's own predicate negated ("not read-only", "failures are not
  reported", "need not exist") or its fixed value ("the seed does not have to be 42").
- *allowed*: a verb that breaks the rule, not negated, on a clause that names what it
  protects: a change ("rewrite", "overwrite", "refactor", "extend", "clean", "refresh")
  for `protected_paths`, `forbidden_paths`, `file_sha256` and "read-only", "frozen",
  "pinned", "must not change" texts; a removal ("delete", "remove", "rename") for
  `file_exists` and `file_contains`; the verb a text forbids ("Never push": "pushing to
  main is fine") (`contradictions._allowed`).

A marker the constraint's own text uses is not a weakening of it ("Do not modify src/api
unless a person approves" may be restated with its "unless").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from git_agentckpt.recovery.words import NEGATORS, STOP, Tok, number, stem, tokens


def _phrases(texts: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(stem(w) for w in t.split()) for t in texts.split("|"))


def _stems(words: str) -> frozenset[str]:
    return frozenset(stem(w) for w in words.split())


EXCEPTIONS = _phrases(
    "except|excepting|exception|exceptions|unless|other than|apart from|aside from|"
    "excluding|save for|barring|besides|with the exception of"
)
CONDITIONS = _phrases(
    "if|only if|only when|only after|only before|only during|only once|only while|until|till|"
    "as long as|so long as|provided that|providing|in case|for now|for the moment|"
    "for the time being|temporarily|at first|initially|to begin with|to start with|"
    "as a start|for a start|at the start|later on"
)
# "when", "if", "where", "as" before one of these within three words: "when needed"
_LAPSE_HEADS = _stems("when if where as whenever wherever")
_LAPSE = _stems(
    "needed necessary possible practical feasible appropriate convenient useful helpful "
    "justified reasonable sensible desired wanted warranted helps makes matters relevant "
    "important applicable"
)
_LAPSE_AFTER_AS = _stems("needed necessary possible appropriate convenient desired wanted")
PERMISSIONS = _phrases(
    "may|might|can|could|allowed|allow|permitted|permit|free to|ok|okay|fine|acceptable|"
    "tolerated|tolerable|optionally|feel free|up to us|up to me|discretion|flexible|"
    "negotiable|nice to have|guideline|suggestion|recommended|recommendation|advisory|"
    "a preference"
)
HEDGES = _phrases(
    "mostly|usually|normally|generally|typically|largely|mainly|ideally|preferably|prefer|"
    "preferred|if possible|where possible|as much as possible|as far as possible|"
    "best effort|try to|tries to|trying to|aim to|aim for|aims to|in principle|in general|"
    "in most cases|most of the time|by default|more or less|roughly|approximately|circa|"
    "or so|give or take|within reason|loosely|as a rule|in spirit|somewhere|anywhere|"
    "in the range"
)
# before a number: "about 32", "between 0.1 and 0.3"
_APPROX = _stems("about around near nearly approx close between")
_READ_VERBS = _stems("read reads reading inspect look view open load consult list see copy")
_MODAL_FILLER = _stems("be also still always freely safely just")
# words that move a fixed value, or leave it open
_RANDOM_ALONE = _stems("random randomly randomized randomised arbitrary arbitrarily whatever")
_OPEN_BEFORE = _stems("any another other different fresh new random whichever alternative")
_MOVE = _stems(
    "vary varies varying change changes changed changing differ tune tuned tuning adjust "
    "raise raised lower lowered increase increased decrease decreased reduce reduced sweep "
    "search update updated reseed reseeded rotate randomize swap swapped switch switched "
    "modify modified alter altered bump bumped double halve"
)
# verbs that break a rule protecting files, and those that break a rule keeping one
CHANGE_VERBS = _stems(
    "modify modified change changed changes edit edited alter altered touch touched write "
    "wrote written writes rewrite rewrote rewritten overwrite overwrote overwritten update "
    "updated delete deleted remove removed rename renamed move moved replace replaced patch "
    "patched refactor refactored reshape tweak tweaked adjust adjusted extend extended add "
    "added append appended insert inserted create created clean cleaned cleaning regenerate "
    "regenerated refresh refreshed reformat reformatted truncate truncated recreate "
    "recreated rebuild rebuilt migrate migrated commit committed"
)
REMOVE_VERBS = _stems(
    "delete deleted remove removed rename renamed move moved drop dropped erase erased wipe "
    "wiped strip stripped clear cleared replace replaced"
)
_GUARD_WORDS = _stems("read-only readonly frozen pinned immutable untouched unchanged locked")
_POST_NEGATORS = _stems(
    "not never forbidden prohibited banned disallowed refused rejected none off-limits taboo "
    "blocked"
)
_EXCLUSIVE = _stems("than other but except else only")
# skipped when looking back from a value or a predicate for its negation
_FILLER = _stems(
    "be to have has had need needs necessarily always exactly strictly really stay remain "
    "equal set the a at of fixed kept is are was"
)
_BOUND_UP = _stems("more over above exceed exceeds exceeding beyond extra additional larger bigger")
_BOUND_DOWN = _stems("fewer less below under lower smaller")
_ONLY_SCOPES = _stems("for in on during after before when if once at while within until")
_ONLY_CONDITIONS = frozenset(("if", "when", "after", "before", "once", "while", "until"))
_POINTERS = frozenset(("it", "this", "that", "them", "these", "those", "there"))
_CLAUSE = re.compile(r"[,:()\[\]—–]|\s-\s|\bbut\b|\bwhereas\b", re.I)


@dataclass(frozen=True)
class Target:
    """What the rules need to know of one constraint (built by `contradictions`)."""

    id: str
    terms: frozenset[str]  # stems of its words, its id's and its check's
    values: frozenset[str]  # the values it fixes, as written (42, adam)
    anchors: frozenset[str]  # stems of the words naming a value it fixes equal (seed)
    asserted: frozenset[str]  # stems of what it asserts (exist, pass, read-only, report)
    guards: str  # "change" | "remove" | "" : verbs that break it
    bound: str  # "max" | "min" | "" : a bound it sets
    own: tuple[str, ...]  # its own text's stems, in order (markers it uses itself)


Hit = Callable[[str, str], None]  # (kind, the words refused)


@dataclass(frozen=True)
class Weakening:
    constraint: str
    kind: str  # excepted | conditional | relaxed | left to chance | negated | allowed
    words: tuple[str, ...]


def clauses(sentence: str) -> list[list[Tok]]:
    """The sentence's tokens, cut at commas, colons, dashes, brackets and "but"."""
    toks = tokens(sentence)
    cuts = sorted(m.start() for m in _CLAUSE.finditer(sentence))
    out: list[list[Tok]] = [[]]
    for t in toks:
        while cuts and cuts[0] < t.start:
            cuts.pop(0)
            if out[-1]:
                out.append([])
        if t.raw == "but":
            continue
        out[-1].append(t)
    return [c for c in out if c]


def _find(toks: Sequence[Tok], cues: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for i in range(len(toks)):
        for cue in cues:
            if tuple(t.stem for t in toks[i : i + len(cue)]) == cue:
                found.append((i, i + len(cue)))
    # the longest cue at a place: "only if" rather than "if"
    return [
        (s, e)
        for s, e in found
        if not any(s2 <= s and e <= e2 and (s2, e2) != (s, e) for s2, e2 in found)
    ]


def _says(words: tuple[str, ...], own: tuple[str, ...]) -> bool:
    n = len(words)
    return any(own[i : i + n] == words for i in range(len(own) - n + 1))


def _neg_before(clause: Sequence[Tok], i: int) -> bool:
    return any(t.raw in NEGATORS for t in clause[:i])


def _neg_after(clause: Sequence[Tok], i: int, reach: int = 4) -> bool:
    after = clause[i + 1 : i + 1 + reach]
    return any(t.stem in _POST_NEGATORS or t.raw in NEGATORS for t in after)


def _is_value(tok: Tok, target: Target) -> bool:
    n = number(tok.raw)
    return tok.raw in target.values or (n is not None and _num(n) in target.values)


def _num(n: float) -> str:
    return str(int(n)) if n == int(n) else str(n)


def _key(tok: Tok) -> bool:
    return tok.raw not in STOP and len(tok.raw) >= 3 and tok.raw not in NEGATORS


def _about_it(clause: Sequence[Tok], target: Target) -> bool:
    """The clause names what the constraint is about."""
    return any(t.stem in target.terms for t in clause)


def _is_itself(rest: Sequence[Tok], target: Target) -> bool:
    """What follows an "unless"/"only if" is the constraint itself: its predicate, or
    nothing but its words and values ("unless the smoke tests pass", "other than 42")."""
    keys = [t for t in rest if _key(t) or number(t.raw) is not None]
    if any(t.stem in target.asserted for t in keys):
        return True
    return bool(keys) and all(t.stem in target.terms or _is_value(t, target) for t in keys)


def weakenings(sentence: str, target: Target, own_line: bool) -> list[Weakening]:
    """Every weakening of `target` in `sentence`: its own form line (`own_line`), or a
    sentence of free text that names it."""
    out: dict[str, list[str]] = {}

    def hit(kind: str, words: str) -> None:
        out.setdefault(kind, [])
        if words not in out[kind]:
            out[kind].append(words)

    toks = tokens(sentence)
    for i in range(len(toks) - 2):  # "42, or 7", "adam or adamw": another value offered
        if _is_value(toks[i], target) and toks[i + 1].raw == "or":
            other = toks[i + 2]
            bound = other.stem in _BOUND_UP | _BOUND_DOWN or other.raw in ("so", "less", "more")
            offered = number(other.raw) is not None or (
                _key(other) and not target.anchors & {other.stem}
            )
            if offered and not bound and not _is_value(other, target):
                hit("left to chance", _text(toks[i : i + 3]))
    for clause in clauses(sentence):
        if own_line or _about_it(clause, target):
            _exceptions(clause, target, hit)
            _relaxations(clause, target, hit)
            _values(clause, target, hit, own_line)
            _negations(clause, target, hit)
    return [Weakening(target.id, kind, tuple(words)) for kind, words in out.items()]


def _text(toks: Sequence[Tok]) -> str:
    return " ".join(t.raw for t in toks)


def _exceptions(clause: list[Tok], target: Target, hit: Hit) -> None:
    """Exceptions, conditions, restrictions by "only"."""
    for cues, kind in ((EXCEPTIONS, "excepted"), (CONDITIONS, "conditional")):
        for s, e in _find(clause, cues):
            cue = tuple(t.stem for t in clause[s:e])
            if _says(cue, target.own):
                continue
            before = clause[s - 1].raw if s else ""
            if before in ("even", "no", "without", "not", "whether") or (
                before == "any" and clause[s].stem == "exception"
            ):
                continue  # "even if", "no exceptions", "not even"
            if clause[s].stem == "exception" and _neg_before(clause, s):
                continue
            rest = clause[e : e + 8]
            exclusive = _neg_before(clause, s) or cue[0] in ("only", "if")
            if exclusive and _is_itself(rest, target):
                continue
            hit(kind, _text(clause[s:e]))
    for i, t in enumerate(clause):  # "when needed", "if possible", "as necessary"
        if t.stem in _LAPSE_HEADS:
            window = clause[i + 1 : i + 4]
            lapse = _LAPSE_AFTER_AS if t.raw == "as" else _LAPSE
            j = next((k for k, w in enumerate(window) if w.stem in lapse), None)
            said = clause[i : i + j + 2] if j is not None else []
            if said and not _says(tuple(w.stem for w in said), target.own):
                hit("conditional", _text(said))
    for i, t in enumerate(clause):  # "only successful runs", "only for the baseline"
        if t.raw != "only":
            continue
        nxt = clause[i + 1 : i + 4]
        # ("only if", "only after", ...: conditions, above)
        if nxt and nxt[0].stem in _ONLY_SCOPES and nxt[0].raw not in _ONLY_CONDITIONS:
            if not _is_itself(clause[i + 2 : i + 8], target):
                hit("excepted", _text(clause[i : i + 3]))
        elif (
            len(nxt) >= 2
            and _key(nxt[0])
            and nxt[0].stem not in target.terms
            and not _is_value(nxt[0], target)
            and nxt[1].stem in target.terms
        ):
            hit("excepted", _text(clause[i : i + 3]))


def _relaxations(clause: list[Tok], target: Target, hit: Hit) -> None:
    """Permissions, softening words, approximations, a bound exceeded in words."""
    for cues in (PERMISSIONS, HEDGES):
        for s, e in _find(clause, cues):
            cue = tuple(t.stem for t in clause[s:e])
            if _says(cue, target.own) or _neg_before(clause, s):
                continue
            after = [t for t in clause[e : e + 4] if t.stem not in _MODAL_FILLER]
            if after and (after[0].raw in NEGATORS or after[0].raw in ("only", "nothing")):
                continue  # "may not", "can never", "can only"
            if cues is PERMISSIONS and after and after[0].stem in _READ_VERBS:
                continue  # "we can read data/raw"
            if _neg_after(clause, e - 1, reach=2):
                continue
            hit("relaxed", _text(clause[s:e]))
    for i, t in enumerate(clause):  # "about 32", "close to 0.001", "between 0.1 and 0.3"
        if t.stem in _APPROX:
            j = i + 2 if i + 1 < len(clause) and clause[i + 1].raw == "to" else i + 1
            if j < len(clause) and (
                number(clause[j].raw) is not None or clause[j].raw in target.values
            ):
                hit("relaxed", _text(clause[i : j + 1]))
    if target.bound:  # "more" against an "at most", "fewer" against an "at least"
        words = _BOUND_UP if target.bound == "max" else _BOUND_DOWN
        for i, t in enumerate(clause):
            if t.stem in words and not any(w.raw in NEGATORS for w in clause[max(0, i - 3) : i]):
                hit("relaxed", t.raw)


def _values(clause: list[Tok], target: Target, hit: Hit, own_line: bool) -> None:
    """A value left to chance or to choice, moved, or offered with an alternative."""
    if not target.anchors and not target.values:
        return
    names = [i for i, t in enumerate(clause) if t.stem in target.anchors or _is_value(t, target)]
    pronoun = any(t.raw in ("it", "them") for t in clause)
    if not names and not (own_line and pronoun):
        return
    for i, t in enumerate(clause):
        if _neg_before(clause, i):
            continue
        if t.stem in _RANDOM_ALONE or (t.raw == "random" and i and clause[i - 1].raw == "at"):
            # "the random seed stays 42": the thing's name, its value stated
            compound = i + 1 < len(clause) and clause[i + 1].stem in target.anchors
            if compound and any(_is_value(w, target) for w in clause):
                continue
            at = i - 1 if i and clause[i - 1].raw == "at" else i
            hit("left to chance", _text(clause[at : i + 1]))
        elif t.stem in _OPEN_BEFORE:  # "any seed", "another optimizer", "a fresh seed"
            nxt = [w for w in clause[i + 1 : i + 3] if w.raw not in ("one", "a")]
            if nxt and (nxt[0].stem in target.anchors or nxt[0].raw in ("value", "number")):
                hit("left to chance", _text(clause[i : i + 2]))
        elif t.stem in _MOVE and not _neg_after(clause, i, reach=3):
            hit("left to chance", t.raw)


def _negated_at(clause: Sequence[Tok], i: int) -> bool:
    """A negator before `i`, past filler words ("does not have to be 42"), and no
    exclusivity in between ("no seed other than 42")."""
    skipped = 0
    for j in range(i - 1, -1, -1):
        t = clause[j]
        if t.raw in NEGATORS or t.raw in ("nor",):
            return True
        if t.stem in _EXCLUSIVE or number(t.raw) is not None:
            return False
        if t.stem in _FILLER or t.raw in STOP:
            continue
        skipped += 1
        if skipped > 1:
            return False
    return False


def _negations(clause: list[Tok], target: Target, hit: Hit) -> None:
    """Its predicate or its value negated."""
    for i, t in enumerate(clause):
        if t.stem in target.asserted and _negated_at(clause, i):
            if i + 1 < len(clause) and clause[i + 1].raw in ("nothing", "none"):
                continue
            hit("negated", _text(clause[max(0, i - 3) : i + 1]))
        elif _is_value(t, target) and target.bound == "" and _negated_at(clause, i):
            hit("negated", _text(clause[max(0, i - 4) : i + 1]))


def breaking_verbs(
    sentence: str, target: Target, forbidden: frozenset[str], own_line: bool
) -> list[str]:
    """The verbs that break the constraint in `sentence`, in the first clause that names
    what it is about (or, in its own line, points back at it: "overwrite them")."""
    previous: list[Tok] = []
    for clause in clauses(sentence):
        # "I will not edit, add or delete ...": the clause goes on a negated list of verbs
        listed = (
            bool(previous)
            and previous[-1].stem in (CHANGE_VERBS | REMOVE_VERBS | forbidden)
            and any(t.raw in NEGATORS for t in previous)
        )
        previous = clause
        back = own_line and any(t.raw in _POINTERS for t in clause)
        if back or _about_it(clause, target):
            verbs = breaks(clause, target, forbidden, listed)
            if verbs:
                return verbs
    return []


def breaks(
    clause: list[Tok],
    target: Target,
    forbidden: frozenset[str],
    listed_after_negation: bool = False,
) -> list[str]:
    """The verbs in `clause` that break the rule (a change of what it protects, a removal
    of what it keeps, a verb its text forbids), not negated."""
    verbs = set(forbidden)
    if target.guards == "change":
        verbs |= CHANGE_VERBS
    elif target.guards == "remove":
        verbs |= REMOVE_VERBS
    out: list[str] = []
    # "not edit, add or delete": the verbs that open the clause share the negation
    lead = 0
    while listed_after_negation and lead < len(clause):
        if clause[lead].stem not in verbs and clause[lead].raw not in ("or", "and", "nor"):
            break
        lead += 1
    for i, t in enumerate(clause):
        if i < lead or t.stem not in verbs or t.stem in target.asserted:
            continue
        if _neg_before(clause, i) or _neg_after(clause, i):
            continue
        prev = " ".join(w.raw for w in clause[max(0, i - 2) : i])
        if prev.endswith(("rather than", "instead of", "without", "avoid")):
            continue
        out.append(t.raw)
    return out


def guard_of(kind: str | None, text_stems: frozenset[str]) -> str:
    if kind in ("protected_paths", "forbidden_paths", "file_sha256") or text_stems & _GUARD_WORDS:
        return "change"
    if kind in ("file_exists", "file_contains"):
        return "remove"
    return ""


_KIND_PREDICATES = {
    "file_exists": "exist exists present there",
    "file_contains": "contain contains keep keeps have has include includes hold holds",
    "file_matches": "match matches keep keeps have has follow follows",
    "command": "pass passes succeed succeeds green",
}
_MODALS = ("must", "shall", "always", "should")


def asserted(text: str, kind: str | None, bounded: bool) -> frozenset[str]:
    """The stems of what a constraint's text asserts: the word after its modal ("must
    exist"), after its copula ("is read-only"), or its first word when it is a command
    ("Report every run"), and the predicates of its check kind ("pass" for a command)."""
    out = set(_stems(_KIND_PREDICATES.get(kind or "", "")))
    if bounded:
        return frozenset(out)
    toks = tokens(text)
    raws = [t.raw for t in toks]
    found = False
    for i, t in enumerate(toks):
        modal = t.raw in _MODALS or t.raw in ("is", "are")
        if not modal and raws[i : i + 2] not in (["has", "to"], ["have", "to"], ["needs", "to"]):
            continue
        nxt = [w for w in toks[i + 1 : i + 4] if w.raw not in ("be", "to", "stay", "remain")]
        word = nxt[0].raw if nxt else ""
        skip = word in NEGATORS or word in ("at", "a", "the", "always")
        if word and not skip and not any(ch.isdigit() for ch in word):
            out.add(nxt[0].stem)
            found = True
    if not found and toks and toks[0].raw.isalpha() and toks[0].raw not in STOP:
        out.add(toks[0].stem)
    return frozenset(out)
