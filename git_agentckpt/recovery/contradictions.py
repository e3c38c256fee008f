"""Where a restatement dismisses, overrides or contradicts a constraint (pure, a heuristic).

Kinds of finding, each naming the constraint, the words refused and the sentence
(the ways to weaken a constraint, excepted, conditional, relaxed, left to chance and
negated, are in `recovery/weakening.py`; the checked value in `recovery/checked.py`):
- *dismissed*: a dismissal word ("ignore", "no longer", "not needed", "skip",
  "drop", "override", ...) within a few words of the constraint's id, or of
  its words (two of them, or one word of its id), and not itself negated
  ("I will not ignore seed42" is fine). The nearest constraint takes the blame;
  a word the constraint's own text uses ("Never skip the smoke test") is not a
  dismissal of it.
- *replaced*: "instead of", "rather than", "in place of", "replace" followed by
  the constraint's id or one of the values it fixes.
- *different value*: a number next to a word that names a value the constraint
  fixes ("seed 7" against "seed 42" or `equals: 42`), outside the bound the
  constraint sets ("at most 5 files": 8 is a contradiction, 3 is not); a
  string value (`equals: adam`) restated as another ("optimizer = sgd"); a
  pinned sha256 restated as another one.
- *different value*, also: the form's checked value stated otherwise
  (`train.seed = 7`, `changed files <= 8`, `unchanged: src/api/**` without api.py).
- *allowed*: a verb that breaks the constraint, not negated, in a clause that
  names what it is about: one its text forbids ("Do not modify ...": "src/api may be
  modified"), a change of protected paths or a pinned file ("api.py can be
  rewritten"), a removal of a file that must exist or keep a text.

Lines of the restatement form (`- <id>: ...`) are checked against their own
constraint as a whole: there a dismissal word anywhere in the line counts,
unless it is nearer to another constraint's id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from git_agentckpt.model import JSON
from git_agentckpt.recovery.checked import Carried, carried, check_terms, differences
from git_agentckpt.recovery.weakening import (
    Target,
    asserted,
    breaking_verbs,
    guard_of,
    weakenings,
)
from git_agentckpt.recovery.words import (
    STOP,
    Tok,
    excerpt,
    is_key,
    key_stems,
    negated,
    number,
    parts,
    sentences,
    stem,
    tok_stems,
    tokens,
)

WINDOW = 8  # words between a cue and what it is about


def _phrases(texts: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(stem(w) for w in t.split()) for t in texts.split("|"))


def _stems(words: str) -> frozenset[str]:
    return frozenset(stem(w) for w in words.split(" "))


# verb first, then what is dismissed ("ignore seed42"); passive forms work too
_PREFIX = _phrases(
    "ignore|disregard|skip|drop|override|overridden|overrode|bypass|waive|violate|"
    "relax|lift|suspend|abandon|forget|circumvent|dismiss|set aside|no need|omit|"
    "leave out|left out"
)
# what is dismissed first, then the verdict ("seed42 no longer applies")
_POSTFIX = _phrases(
    "no longer|not needed|not required|not necessary|unnecessary|not apply|"
    "not relevant|irrelevant|obsolete|outdated|optional|not matter|not important|"
    "not enforced|not binding|moot|anymore|any more|any longer|not mandatory|"
    "not compulsory|not obligatory|not strict|not essential|not critical|not have to|"
    "need not|not a must|not necessarily"
)
_DIRECTIONAL = _phrases("instead of|rather than|in place of|replace|switch from")
_AFTER_NEGATORS = frozenset(("nothing", "none", "no"))
_PRONOUNS = frozenset(("it", "this", "that", "them", "these", "those"))
_ADJECTIVE_NOUNS = _stems("file files data path paths dir directory")
_MAX_WORDS = frozenset(
    ("max", "maximum", "most", "under", "below", "within", "up", "fewer", "less")
)
_MIN_WORDS = frozenset(("min", "minimum", "over", "above", "least"))
_CONNECTORS = _stems("to is be as equal equals set stay stays remain remains become")
_VALUE_NEGATORS = frozenset(("not", "never", "no", "instead", "rather", "other", "except"))


@dataclass(frozen=True)
class Fixed:
    """A number the constraint fixes, the words that name it, and the kind of bound."""

    anchors: frozenset[str]
    value: float
    bound: str  # "eq" | "max" | "min"

    def contradicted_by(self, n: float) -> bool:
        if self.bound == "max":
            return n > self.value
        if self.bound == "min":
            return n < self.value
        return n != self.value


@dataclass(frozen=True)
class ConstraintRef:
    """What the checker knows of one constraint: its id, words and fixed values."""

    id: str
    text: str
    terms: frozenset[str]
    id_terms: frozenset[str]
    fixed: tuple[Fixed, ...]
    literals: tuple[tuple[frozenset[str], str], ...]
    sha256: str | None
    own_cues: frozenset[tuple[str, ...]]  # dismissal words its own text uses, not negated
    forbidden: frozenset[str]  # stems of verbs its text forbids ("do not modify")
    target: Target  # what `weakening` reads: terms, values, predicates, guards
    carried: Carried | None  # the checked value its form line carries

    def values(self) -> set[str]:
        out = {_num_text(f.value) for f in self.fixed} | {v for _, v in self.literals}
        if self.sha256:
            out.add(self.sha256)
        return out


@dataclass(frozen=True)
class Finding:
    constraint: str
    kind: str  # dismissed | replaced | different value | allowed | (weakening.py's kinds)
    reason: str
    words: tuple[str, ...] = ()  # the words refused


def _num_text(n: float) -> str:
    return str(int(n)) if n == int(n) else str(n)


def _anchor_stems(tok: Tok) -> set[str]:
    """A word and its pieces: `train.seed` names a seed too."""
    return {tok.stem} | {stem(p) for p in parts(tok.raw) if len(p) >= 2 and p.isalpha()}


def _anchors(toks: Sequence[Tok], i: int) -> set[str]:
    """The words that name the number at `i`: up to two meaningful words within three
    words before it and two after, not past another number ("seed 42 for 3 runs")."""
    out: set[str] = set()
    for direction, reach in ((-1, 3), (1, 2)):
        found = 0
        for j in range(i + direction, i + direction * (reach + 1), direction):
            if not 0 <= j < len(toks) or number(toks[j].raw) is not None or found == 2:
                break
            raw = toks[j].raw
            if raw not in STOP and len(raw) >= 2 and any(ch.isalpha() for ch in raw):
                out |= _anchor_stems(toks[j])
                found += 1
    return out


def _bound(toks: Sequence[Tok], i: int) -> str:
    """How the constraint's text bounds the number at `i`: at most, at least, exactly."""
    before = {t.raw for t in toks[max(0, i - 3) : i]}
    beyond = before & {"more", "exceed", "over", "above"}
    if before & _MAX_WORDS or (beyond and before & {"no", "not"}):
        return "max"
    if before & _MIN_WORDS or beyond:
        return "min"
    return "eq"


def number_pairs(text: str) -> list[tuple[frozenset[str], float, int, list[Tok]]]:
    """(anchors, value, index, sentence tokens) for every number in `text`."""
    out: list[tuple[frozenset[str], float, int, list[Tok]]] = []
    for sentence in sentences(text):
        toks = tokens(sentence)
        for i, tok in enumerate(toks):
            n = number(tok.raw)
            if n is not None:
                out.append((frozenset(_anchors(toks, i)), n, i, toks))
                continue
            ps = parts(tok.raw)
            if len(ps) == 3 and number(ps[2]) is not None and ps[1].isalpha():
                value = number(ps[2])
                assert value is not None
                out.append((frozenset({stem(ps[1])}), value, i, toks))
    return out


def _cues_in(toks: Sequence[Tok], cues: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    """(start, end) of each cue phrase in `toks`."""
    found: list[tuple[int, int]] = []
    for i in range(len(toks)):
        for cue in cues:
            if tuple(t.stem for t in toks[i : i + len(cue)]) == cue:
                found.append((i, i + len(cue)))
    return found


def _cue_negated(toks: Sequence[Tok], start: int, end: int) -> bool:
    if negated(list(toks), start):
        return True
    # "nothing about the seed is dropped", "none of them is ignored"
    if any(t.raw in ("nothing", "none", "neither") for t in toks[:start]):
        return True
    after = toks[end].raw if end < len(toks) else ""
    if after in _AFTER_NEGATORS:
        return True
    # "the ignored files": an adjective, not a dismissal
    return toks[start].raw == "ignored" and end < len(toks) and toks[end].stem in _ADJECTIVE_NOUNS


def constraint_ref(c: Mapping[str, JSON], check: Mapping[str, object] | None) -> ConstraintRef:
    cid = str(c.get("id"))
    text = str(c.get("text") or cid)
    id_terms = frozenset(stem(p) for p in parts(cid.lower()) if is_key(p))
    fixed: list[Fixed] = []
    for anchors, n, i, toks in number_pairs(text):
        fixed.append(Fixed(anchors, n, _bound(toks, i)))
    literals: list[tuple[frozenset[str], str]] = []
    sha = None
    if check:
        kind = check.get("kind")
        # the key that names the value: `train.seed` -> seed
        last = str(check.get("path") or "").lower().split(".")[-1]
        path_words = frozenset((stem(last),)) if last and not last.isdigit() else frozenset()
        equals = check.get("equals")
        if isinstance(equals, bool | str):
            value = str(equals).lower()
            literals.append((path_words, value))
        elif isinstance(equals, int | float):
            fixed.append(Fixed(path_words, float(equals), "eq"))
        if kind == "max_changed_files" and isinstance(check.get("max"), int):
            words = frozenset(stem(w) for w in ("file", "files", "change", "changed", "max"))
            fixed.append(Fixed(words, float(check["max"]), "max"))  # type: ignore[arg-type]
        if kind == "file_sha256" and isinstance(check.get("sha256"), str):
            sha = str(check["sha256"]).lower()
    toks = tokens(text)
    own = frozenset(
        tuple(t.stem for t in toks[start:end])
        for start, end in _cues_in(toks, _PREFIX + _POSTFIX)
        if not _cue_negated(toks, start, end)
    )
    forbidden: set[str] = set()
    for i, tok in enumerate(toks):
        if tok.raw in ("not", "never"):
            nxt = [t for t in toks[i + 1 : i + 3] if t.raw not in ("be", "ever", "to")]
            if nxt and is_key(nxt[0].raw):
                forbidden.add(nxt[0].stem)
    kind = str(check.get("kind")) if check else None
    terms = frozenset(key_stems(text)) | id_terms | check_terms(check)
    eq = [f for f in fixed if f.bound == "eq"]
    bound = next((f.bound for f in fixed if f.bound != "eq"), "")
    target = Target(
        id=cid,
        terms=terms,
        values=frozenset({_num_text(f.value) for f in eq} | {v for _, v in literals}),
        anchors=frozenset().union(*(f.anchors for f in eq), *(a for a, _ in literals)),
        asserted=asserted(text, kind, bounded=bool(bound)),
        guards=guard_of(kind, frozenset(key_stems(text))),
        bound=bound,
        own=tuple(t.stem for t in toks),
    )
    return ConstraintRef(
        id=cid,
        text=text,
        terms=terms,
        id_terms=id_terms,
        fixed=tuple(fixed),
        literals=tuple(literals),
        sha256=sha,
        own_cues=own,
        forbidden=frozenset(forbidden),
        target=target,
        carried=carried(check),
    )


# -- finding them -------------------------------------------------------------------------


def _mentions(toks: Sequence[Tok], ref: ConstraintRef) -> list[int]:
    """Where a sentence speaks of the constraint: its id, or its words (two of them,
    or one word of its id)."""
    ident = ref.id.lower()
    at_id = [i for i, t in enumerate(toks) if t.raw == ident]
    hits = [(i, tok_stems(t) & ref.terms) for i, t in enumerate(toks)]
    hits = [(i, s) for i, s in hits if s and toks[i].raw != ident]
    distinct = set().union(*(s for _, s in hits)) if hits else set()
    strong = len(distinct) >= min(2, len(ref.terms)) or any(
        s & ref.id_terms and max(map(len, s & ref.id_terms)) >= 4 for _, s in hits
    )
    return sorted(at_id + ([i for i, _ in hits] if strong else []))


def _blame(start: int, end: int, prefix: bool, mentions: dict[str, list[int]]) -> list[str]:
    """The constraints nearest to a cue at [start, end), within WINDOW words."""
    best: dict[str, int] = {}
    for cid, where in mentions.items():
        for i in where:
            if i >= end:
                d, wrong = i - end + 1, not prefix
            elif i < start:
                d, wrong = start - i, prefix
            else:
                continue
            if d > WINDOW:
                continue
            score = d + (4 if wrong else 0)
            best[cid] = min(best.get(cid, score), score)
    if not best:
        return []
    low = min(best.values())
    return [cid for cid, score in best.items() if score == low]


def _dismissals(
    sentence: str,
    toks: list[Tok],
    refs: dict[str, ConstraintRef],
    mentions: dict[str, list[int]],
    own: str | None,
) -> list[Finding]:
    out: list[Finding] = []
    said: dict[str, list[str]] = {}
    for cues, prefix in ((_PREFIX, True), (_POSTFIX, False)):
        for start, end in _cues_in(toks, cues):
            if _cue_negated(toks, start, end):
                continue
            # "drop it": the object is what came before
            pronoun = end < len(toks) and toks[end].raw in _PRONOUNS
            blamed = _blame(start, end, prefix and not pronoun, mentions)
            if not blamed and own is not None:
                blamed = [own]
            phrase = " ".join(t.raw for t in toks[start:end])
            cue = tuple(t.stem for t in toks[start:end])
            for cid in blamed:
                if cue in refs[cid].own_cues:
                    continue  # the constraint says it itself ("Never skip the smoke test")
                phrases = said.setdefault(cid, [])
                if phrase not in phrases:
                    phrases.append(phrase)
    for cid, phrases in said.items():
        quoted = ", ".join(f'"{p}"' for p in phrases)
        reason = f'{quoted} next to it in "{excerpt(sentence)}"'
        out.append(Finding(cid, "dismissed", reason, tuple(phrases)))
    for start, end in _cues_in(toks, _DIRECTIONAL):
        if negated(toks, start):
            continue
        phrase = " ".join(t.raw for t in toks[start:end])
        for cid, ref in refs.items():
            hit = _names_it(toks[end : end + 4], ref)
            if hit is not None:
                reason = f'"{phrase} {hit}" in "{excerpt(sentence)}"'
                out.append(Finding(cid, "replaced", reason, (f"{phrase} {hit}",)))
    return out


def _names_it(toks: Sequence[Tok], ref: ConstraintRef) -> str | None:
    """The first of `toks` that is the constraint's id or a value it fixes."""
    values = ref.values()
    for t in toks:
        n = number(t.raw)
        if t.raw == ref.id.lower() or t.raw in values or (n is not None and _num_text(n) in values):
            return t.raw
    return None


def _values(
    sentence: str,
    toks: list[Tok],
    refs: dict[str, ConstraintRef],
    reference: set[tuple[str, float]],
    mentions: dict[str, list[int]],
    own: str | None,
) -> list[Finding]:
    out: list[Finding] = []
    for anchors, n, i, _ in number_pairs(sentence):
        if any(t.raw in _VALUE_NEGATORS for t in toks[max(0, i - 3) : i]):
            continue
        if any((a, n) in reference for a in anchors):
            continue
        for cid, ref in refs.items():
            relevant = [f for f in ref.fixed if f.anchors & anchors]
            if relevant and all(f.contradicted_by(n) for f in relevant):
                f = relevant[0]
                bound = {"max": "at most ", "min": "at least "}.get(f.bound, "")
                near = sorted(range(max(0, i - 3), min(len(toks), i + 3)), key=lambda j: abs(j - i))
                word = next((toks[j].raw for j in near if _anchor_stems(toks[j]) & f.anchors), "")
                out.append(
                    Finding(
                        cid,
                        "different value",
                        f"it fixes {bound}{_num_text(f.value)} for '{word}', the restatement "
                        f'says {_num_text(n)}: "{excerpt(sentence)}"',
                        (toks[i].raw,),
                    )
                )
    for cid in set(mentions) | ({own} if own is not None else set()):
        out += _literal_values(sentence, toks, refs[cid])
        out += _allowed(sentence, refs[cid], cid == own)
        out += [
            Finding(cid, w.kind, f'refused {_quoted(w.words)} in "{excerpt(sentence)}"', w.words)
            for w in weakenings(sentence, refs[cid].target, cid == own)
        ]
    return out


def _quoted(words: Sequence[str]) -> str:
    return ", ".join(f'"{w}"' for w in words)


def _literal_values(sentence: str, toks: list[Tok], ref: ConstraintRef) -> list[Finding]:
    out: list[Finding] = []
    raws = {t.raw for t in toks}
    for anchors, value in ref.literals:
        if value in raws:
            continue
        for i, tok in enumerate(toks):
            if tok.stem not in anchors:
                continue
            j = i + 1
            while j < len(toks) and j <= i + 3 and toks[j].stem in _CONNECTORS | {"the", "a"}:
                j += 1
            between = sentence[tok.end : toks[j].start] if j < len(toks) else ""
            joined = j > i + 1 or "=" in between or ":" in between
            if j < len(toks) and joined and is_key(toks[j].raw) and not negated(toks, j):
                out.append(
                    Finding(
                        ref.id,
                        "different value",
                        f"it fixes {tok.raw} = {value}, the restatement says "
                        f'{toks[j].raw}: "{excerpt(sentence)}"',
                        (toks[j].raw,),
                    )
                )
                break
    if ref.sha256:
        for tok in toks:
            hexish = len(tok.raw) >= 7 and all(ch in "0123456789abcdef" for ch in tok.raw)
            if (
                hexish
                and any(ch.isdigit() for ch in tok.raw)
                and not ref.sha256.startswith(tok.raw)
            ):
                out.append(
                    Finding(
                        ref.id,
                        "different value",
                        f"it pins sha256 {ref.sha256[:12]}, the restatement says {tok.raw[:12]}: "
                        f'"{excerpt(sentence)}"',
                        (tok.raw,),
                    )
                )
    return out


def _allowed(sentence: str, ref: ConstraintRef, own_line: bool) -> list[Finding]:
    verbs = breaking_verbs(sentence, ref.target, ref.forbidden, own_line)
    if not verbs:
        return []
    reason = f'it forbids "{verbs[0]}", the restatement allows it: "{excerpt(sentence)}"'
    return [Finding(ref.id, "allowed", reason, tuple(verbs))]


def _carried(text: str, ref: ConstraintRef, own_line: bool) -> list[Finding]:
    """The checked value the form carries, stated otherwise (`train.seed = 7`)."""
    if ref.carried is None:
        return []
    said = differences(ref.carried, text, own_line)
    if not said:
        return []
    reason = (
        f"it checks `{ref.carried.text}`, the restatement says `{excerpt(said[0], 60)}`"
        f" (keep `{ref.carried.text}` as the form prints it)"
    )
    return [Finding(ref.id, "different value", reason, tuple(said))]


def find_contradictions(
    text: str,
    refs: Sequence[ConstraintRef],
    reference_texts: Sequence[str] = (),
    keyed: Mapping[str, Sequence[str]] | None = None,
) -> list[Finding]:
    """Every finding in `text`: sentence by sentence, plus each form line `- <id>: ...`
    against its own constraint (`keyed`: id -> the text of its lines).

    `reference_texts` (the goal, step titles, constraint texts) hold numbers that
    are no contradiction when restated ("table 2" in the goal is not a value).
    """
    by_id = {r.id: r for r in refs}
    reference: set[tuple[str, float]] = set()
    for ref_text in [*reference_texts, *(r.text for r in refs)]:
        for anchors, n, _, _ in number_pairs(ref_text):
            reference |= {(a, n) for a in anchors}
    # a value one constraint fixes is no contradiction of another that names it too
    reference |= {(a, f.value) for r in refs for f in r.fixed for a in f.anchors}
    # a form line first, against its own constraint; then every sentence
    scopes: list[tuple[str, str | None]] = [
        (s, cid)
        for cid, lines in (keyed or {}).items()
        for line in lines
        for s in sentences(f"- {cid}: {line}")
    ]
    scopes += [(s, None) for s in sentences(text)]
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for sentence, own in scopes:
        toks = tokens(sentence)
        mentions = {cid: m for cid, r in by_id.items() if (m := _mentions(toks, r))}
        found = _dismissals(sentence, toks, by_id, mentions, own)
        found += _values(sentence, toks, by_id, reference, mentions, own)
        for f in found:
            if own is not None and f.constraint != own:
                continue  # a form line speaks of its own constraint; the others come below
            if (f.constraint, f.kind) not in seen:
                seen.add((f.constraint, f.kind))
                out.append(f)
    # the checked value of the form, last: a number already refused above says it first
    lines = [(x, by_id[cid], True) for cid, xs in (keyed or {}).items() for x in xs]
    for x, ref, own_line in [*lines, *((text, r, False) for r in refs)]:
        for f in _carried(x, ref, own_line):
            if (f.constraint, f.kind) not in seen:
                seen.add((f.constraint, f.kind))
                out.append(f)
    return out
