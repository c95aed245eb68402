"""English words as spaCy's `blank("en")` tokenizer makes them (datatrove's English words).

Gopher's alphabetic-word rule, as datatrove runs it, counts these tokens: each punctuation mark
is a token without a letter ('said,' is two tokens, '"Hi!"' four), 'don't' is 'do' + 'n't',
'Mr.' and 'e.g.' are one token, a URL one. `tokens` splits one whitespace-free chunk the way
spaCy's tokenizer does (prefixes and suffixes peeled off, special cases, then infixes), with the
English rules written out here: no spaCy at run time. `alpha_token_counts` counts the tokens of
a text's whitespace-separated words through a bounded cache of chunks, so a common word costs
one dict lookup. tests/core/test_en_words.py compares both with spaCy where it is installed.

The character classes, affix patterns and special cases follow spaCy 3.8's English tokenizer
rules (github.com/explosion/spaCy, spacy/lang/char_classes.py, punctuation.py and
lang/en/tokenizer_exceptions.py), MIT License, Copyright (C) 2016-2024 ExplosionAI GmbH,
2016 spaCy GmbH, 2015 Matthew Honnibal.
"""

from __future__ import annotations

import re

# spaCy's character classes (spacy/lang/char_classes.py, punctuation.py, en/punctuation.py);
# its icons (Unicode "So") approximated by the symbol blocks below
_PUNCT = "…,:;!?¿؟¡()\\[\\]{}<>_#*&。？！，、；：～·।،۔؛٪"
_QUOTES = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉〈〉⟦⟧"
_ICONS = (
    "¦©®°\u2100-\u214f\u2190-\u21ff\u2300-\u23ff\u2440-\u24ff\u2500-\u27bf\u2800-\u2bff"
    "\U0001f000-\U0001faff"
)
_CURRENCY = "$£€¥฿₽﷼₠-₿"
_UNITS = (
    "km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz "
    "m/s km/h kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K %"
)
_PREFIX = re.compile(rf"[§%=—–{_PUNCT}{_QUOTES}{_CURRENCY}{_ICONS}]|\+(?!\d)|\.\.+|US\$|C\$|A\$")
_SUFFIX = re.compile(  # searched: the suffix that starts first wins, as in spaCy
    rf"(?:[{_PUNCT}{_QUOTES}{_ICONS}—–]|\.\.+|……|['’][sS]|(?<=\d)\+|(?<=°[FfCcKk])\."
    rf"|(?<=\d)(?:[{_CURRENCY}]|US\$|C\$|A\$)"
    rf"|(?<=\d)(?:{'|'.join(sorted(map(re.escape, _UNITS.split()), key=len, reverse=True))}))$"
)
_ONE_SUFFIX = frozenset(f".{_PUNCT}{_QUOTES}".replace("\\", "")) - {"…"}
_PERIOD_AFTER = frozenset(f"%²-+{_PUNCT}{_QUOTES}".replace("\\", ""))
_LETTER = r"[^\W\d_]"
_INFIX = re.compile(
    rf"\.\.+|…|[{_ICONS}]|(?<=\d)[+\-*^](?=[\d-])"
    rf"|(?:(?<=[^\W\d_A-Z])|(?<=[{_QUOTES}]))\.(?=[A-Z{_QUOTES}])"
    rf"|(?<={_LETTER}),(?={_LETTER})|(?<=[^\W_])(?:---|--|——|[-–—~])(?={_LETTER})"
    rf"|(?<=[^\W_])[:<>=/](?={_LETTER})"
)
_ABBREVIATIONS = (
    "Adm Ak Ala Apr Ariz Ark Aug Bros Calif Co Colo Conn Corp D.C Dec Del Dr E.G E.g Feb Fla Ga "
    "Gen Gov I.E I.e Ia Id Ill Inc Ind Jan Jr Jul Jun Kan Kans Ky La Ltd Mar Mass Md Messrs Mich "
    "Minn Miss Mo Mont Mr Mrs Ms Mt N.C N.D N.H N.J N.M N.Y Neb Nebr Nev Nov Oct Okla Ore Pa Ph.D "
    "Prof Rep Rev S.C Sen Sep Sept St Tenn Va Wash Wis a.m co e.g i.e p.m v.s vs "
    "a b c d e f g h i j k l m n o p q r s t u v w x y z ä ö ü"
)
_APOSTROPHE_WORDS = (
    "'s 'S 'd 'll 're '' 'em 'bout 'nuff 'cause 'cos 'coz 'cuz 'Cause 'Cos 'Coz 'Cuz "
    "doin' goin' havin' lovin' nothin' nuthin' somethin' Doin' Goin' Havin' Lovin' "
    "Nothin' Nuthin' Somethin' ol' Ol' ma'am Ma'am o'clock O'clock"
)
_ONE_TOKEN = {*(f"{a}." for a in _ABBREVIATIONS.split()), *_APOSTROPHE_WORDS.split()}
_ONE_TOKEN |= {s.replace("'", "’") for s in _ONE_TOKEN}
_EMOTICON_LIST = (  # and the rest of spaCy's one-token special cases
    r"""(*_*) (-8 (-: (-; (-_-) (._.) (: (; (= (>_<) (^_^) (o: (¬_¬) (ಠ_ಠ) )-: ): ._. 8) 8-) 8-D
    :'( :') :'-( :'-) :( :(( :((( :() :) :)) :))) :* :-( :-(( :-((( :-) :-)) :-))) :-* :-/ :-0
    :-3 :-> :-D :-O :-P :-X :-] :-o :-p :-x :-| :-} :/ :0 :1 :3 :> :D :O :P :X :] :o :o) :p :x
    :| :} :’( :’) :’-( :’-) ;) ;-) ;-D ;D ;_; <.< </3 <3 <33 <333 =( =) =/ =3 =D =[ =] =| >.<
    >.> >:( >:o ><(((*> [-: [: [= \") ]= and/or o.O w/o ‘S ‘s"""
)
_EMOTICONS = frozenset(_EMOTICON_LIST.split())
_ONE_TOKEN |= _EMOTICONS
_LONGEST = max(map(len, _ONE_TOKEN))
_NOT_CONTRACTIONS = frozenset(
    ("hell", "ill", "its", "lets", "shed", "shell", "well", "were", "whore")
)
_PRONOUNS = "he how i it she that there these they this those we what when where who why you"
_CONTRACTIONS = (  # (bases, the pieces that may follow one), as spaCy's English exceptions
    (
        "ai are ca could dare did do does had has have is may might must need ought sha should "
        "was were wo would",
        [("n't",)],
    ),
    ("ca could did do does had may might must need ought sha should wo would", [("n't", "'ve")]),
    (_PRONOUNS, [("'d",), ("'ll",), ("'d", "'ve"), ("'ll", "'ve")]),
    ("how there these they those we what when where who why you", [("'re",)]),
    (
        "could how i might must not should there these they those we what when where who why "
        "would you",
        [("'ve",)],
    ),
    ("i", [("'m",), ("'m", "a")]),
    ("let he how it she that there this what when where who why", [("'s",)]),
    ("can", [("not",)]),
    ("gon", [("na",)]),
    ("got", [("ta",)]),
)


def _specials() -> dict[str, tuple[str, ...]]:
    """Every special case: its tokens. Contractions come with ' or ’ or none ('dont', 'Im'),
    in lower case and capitalized, as spaCy lists them; '10am' is '10' 'am'."""
    out: dict[str, tuple[str, ...]] = {s: (s,) for s in _ONE_TOKEN}
    for bases, tails in _CONTRACTIONS:
        for base in bases.split():
            for tail in tails:
                for apostrophe in ("'", "’", ""):
                    low = tuple(piece.replace("'", apostrophe) for piece in (base, *tail))
                    if "".join(low) in _NOT_CONTRACTIONS:
                        continue
                    for case in (low, (low[0][:1].upper() + low[0][1:], *low[1:])):
                        out["".join(case)] = case
    for a in ("'", "’"):
        out[f"c{a}mon"], out[f"C{a}mon"] = (f"c{a}m", "on"), (f"C{a}m", "on")
        out[f"y{a}all"] = (f"y{a}", "all")
    out["yall"] = ("y", "all")
    for hour in range(1, 13):
        for half in ("am", "pm", "a.m.", "p.m."):
            out[f"{hour}{half}"] = (str(hour), half)
    return out


_SPECIALS = _specials()


def special(s: str) -> tuple[str, ...] | None:
    """The tokens of one of spaCy's English special cases, or None."""
    return _SPECIALS.get(s)


# spaCy's URL_MATCH (after Diego Perini's, MIT), its private-IP exclusions left out: a chunk
# left by the affixes that looks like an address or a host name ('the-the.the') is one token
_URL = re.compile(
    r"(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?"
    r"(?:\d{1,3}(?:\.\d{1,3}){3}"
    r"|(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    r"[^\W\d_A-Z]{2,63})"
    r"(?::\d{2,5})?(?:[/?#]\S*)?"
)


def _is_url(s: str) -> bool:
    return "." in s and _URL.fullmatch(s) is not None


def _period_suffix(s: str) -> bool:
    """A final '.' is a suffix after a lowercase letter, a digit, punctuation, or two capitals."""
    if len(s) < 2 or s[-1] != ".":
        return False
    p = s[-2]
    if p.islower() or p.isdigit() or p in _PERIOD_AFTER:
        return True
    return p.isupper() and len(s) > 2 and s[-3].isupper()


def _suffix(s: str) -> re.Match[str] | None:
    """The suffix that starts first; only an ellipsis is longer than 4 characters."""
    return _SUFFIX.search(s, 0 if s.endswith("..") else max(len(s) - 4, 0))


def _affixes(s: str) -> tuple[list[str], str, list[str]]:
    """Peel prefixes and suffixes off s as spaCy does: (prefixes, the rest, suffixes reversed)."""
    pre: list[str] = []
    suf: list[str] = []
    last = -1
    while s and len(s) != last:
        if special(s) is not None:
            break
        last = len(s)
        m = _PREFIX.match(s)
        p = len(m.group()) if m else 0
        if p and s[p:] and special(s[p:]) is not None:
            pre.append(s[:p])
            return pre, s[p:], suf
        m = _suffix(s[p:])
        q = len(m.group()) if m else int(_period_suffix(s[p:]))
        if q and s[:-q] and special(s[:-q]) is not None:
            suf.append(s[-q:])
            return pre, s[:-q], suf
        if p and q and p + q <= len(s):
            pre.append(s[:p])
            suf.append(s[-q:])
            s = s[p:-q]
        elif p:
            pre.append(s[:p])
            s = s[p:]
        elif q:
            suf.append(s[-q:])
            s = s[:-q]
    return pre, s, suf


def tokens(chunk: str) -> list[str]:
    """spaCy's English tokens of a chunk of text without whitespace."""
    if chunk.isalpha() or chunk.isdigit():  # no affix, infix or URL: itself or a special case
        return list(_SPECIALS.get(chunk, (chunk,)))
    if chunk[-1] in _ONE_SUFFIX and chunk[:-1].isalpha():  # 'said,': a word and one suffix
        if chunk in _SPECIALS:
            return list(_SPECIALS[chunk])
        if chunk[-1] != "." or _period_suffix(chunk):
            return _merged([*_SPECIALS.get(chunk[:-1], (chunk[:-1],)), chunk[-1]])
    pre, s, suf = _affixes(chunk)
    mid: list[str] = []
    whole = special(s) if s else None
    if whole is not None:
        mid = list(whole)
    elif _is_url(s):
        mid = [s]
    elif s:
        start = 0
        for m in _INFIX.finditer(s):
            if m.start() > start:
                mid.append(s[start : m.start()])
            mid.append(m.group())
            start = m.end()
        if start < len(s):
            mid.append(s[start:])
    found = pre + mid + suf[::-1]
    return _merged(found) if len(found) > 1 else found


def _merged(found: list[str]) -> list[str]:
    """Adjacent tokens that spell a one-token special case become one ('the,a.' has 'a' '.'
    after its infix: 'a.'): as spaCy's matcher, the longest first, then the leftmost, and a
    match is skipped when its first or last token is in one seen before."""
    spans = []
    for i in range(len(found)):
        joined = found[i]
        for j in range(i + 1, len(found)):
            joined += found[j]
            if len(joined) > _LONGEST:
                break
            if joined in _ONE_TOKEN:
                spans.append((i, j + 1))
    if not spans:
        return found
    seen: set[int] = set()
    kept = []
    for i, j in sorted(spans, key=lambda span: (span[0] - span[1], span[0])):
        if i not in seen and j - 1 not in seen:
            kept.append((i, j))
        seen.update(range(i, j))
    out = list(found)
    for i, j in sorted(kept, reverse=True):
        out[i:j] = ["".join(found[i:j])]
    return out


_SHIFT = 32
_ONE = ("",)  # the tokens of a chunk that is no special case: one
_CACHE_SIZE = 1 << 17


def _has_letter(token: str) -> bool:
    return token.isalpha() or any(map(str.isalpha, token))


class _Counts(dict[str, int]):
    """chunk -> its tokens << 32 | those with a letter; computed on first sight."""

    def __missing__(self, chunk: str) -> int:
        if len(self) >= _CACHE_SIZE:
            self.clear()
        if chunk.isalpha():  # itself or a special case's pieces: every token a word
            count = len(_SPECIALS.get(chunk, _ONE))
            value = count << _SHIFT | count
        else:
            found = tokens(chunk)
            value = len(found) << _SHIFT | sum(map(_has_letter, found))
        self[chunk] = value
        return value


_COUNTS = _Counts()


def alpha_token_counts(words: list[str]) -> tuple[int, int]:
    """(tokens, tokens holding a letter) of whitespace-separated words."""
    total = sum(map(_COUNTS.__getitem__, words))
    return total >> _SHIFT, total & ((1 << _SHIFT) - 1)
