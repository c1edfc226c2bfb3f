"""Hand-designed prompt features for the complexity scorer: cheap, general, deterministic.

Each feature is a float, most of them `log1p` of a count so that one more list item matters
more in a short prompt than in a long one. `FEATURES` fixes their order; the fitted weights
are stored by name, so the order may change without breaking a weights file.

Work is bounded: only a prefix and a suffix of a huge prompt are read (`HEAD_CHARS`,
`TAIL_CHARS`), and its length is extrapolated from the whole text's character count, so a
1 MB prompt costs about as much as an 8 kB one. radon runs only on fenced code blocks,
at most `CODE_CHARS` of them, and its results are cached by block text.
"""

from __future__ import annotations

import math
import re
from operator import mul

from policies.complexity.lexicon import CLASSES, JOINERS, WORDS, stem_pattern
from policies.radon_metrics import analyse

__all__ = ["FEATURES", "LEXICON", "NON_LATIN", "SCRIPT_BOUND", "analysed_text", "extract", "script_profile"]

HEAD_CHARS = 6000  # characters read from the start of a long prompt
TAIL_CHARS = 2000  # ... and from its end (the question often comes last)
CODE_CHARS = 4000  # characters of fenced code handed to radon, per prompt
HISTORY_TURNS = 64  # earlier messages looked at, most recent first

FEATURES: tuple[str, ...] = (
    "log_tokens",  # log1p(English-equivalent tokens of the last user turn, script-aware)
    "non_latin",  # share of letters in non-Latin scripts (CJK, Hangul, Cyrillic, Arabic...)
    "lines",  # log1p(newlines)
    "sentences",  # log1p(sentence ends)
    "clauses",  # log1p(commas, semicolons and joining words): clause nesting within sentences
    "capitals",  # log1p(upper-case ASCII letters): names, acronyms, symbols to keep track of
    "questions",  # log1p(question marks): several questions in one prompt
    "list_items",  # log1p(enumerated or bulleted lines): multi-part instructions
    "choices",  # 1 when the prompt offers lettered answer options (A. B. C. ...)
    "digits",  # log1p(digits in the text): quantities to combine
    "math_symbols",  # log1p(= ^ \\ + * < characters): formulas
    "code_fences",  # log1p(fenced code blocks)
    "code_punct",  # log1p({ } ; characters): code without fences
    "code_cc",  # log1p(cyclomatic complexity of fenced code; radon for Python)
    "code_effort",  # log1p(Halstead effort of fenced Python code) / 10
    "code_mi_deficit",  # (100 - maintainability index) / 100 of fenced Python code
    "lex_reasoning",  # log1p(prove, derive, justify, analyze, why...)
    "lex_math",  # log1p(equation, integral, probability, matrix...)
    "lex_code",  # log1p(function, class, compile, bug, sql...)
    "lex_constraint",  # log1p(must, exactly, at least, without, format...)
    "lex_sequence",  # log1p(first, then, finally, additionally...): chained steps
    "lex_simple",  # log1p(hi, thanks, joke, define, synonym...): everyday requests
    "lex_creative",  # log1p(write, story, poem, essay, email...)
    "wh_factoid",  # 1 when the turn opens with what/who/when/where/which
    "open_question",  # 1 when it opens with how/why/explain/design/implement/prove...
    "avg_word_len",  # mean letters per word, minus 4.5: technical vocabulary
    "history_turns",  # log1p(earlier messages in the conversation)
    "history_tokens",  # log1p(estimated tokens of the earlier messages)
)

# Features that only Latin script can show (capital letters, English word length and openers):
# for text mostly in other scripts the model reads them as "typical" (the training mean), so a
# Korean or Chinese prompt is not scored below its English translation for lacking capitals.
SCRIPT_BOUND: tuple[int, ...] = tuple(
    FEATURES.index(f) for f in ("capitals", "wh_factoid", "open_question", "avg_word_len")
)
NON_LATIN = FEATURES.index("non_latin")

LEXICON: dict[str, int] = {}  # word -> index in CLASSES (or _JOINER)
for _i, _name in enumerate(CLASSES):
    for _w in WORDS[_name].split():
        LEXICON.setdefault(_w, _i)
_JOINER = len(CLASSES)  # lexicon index of the joining words, counted as clauses
for _w in JOINERS:
    LEXICON.setdefault(_w, _JOINER)
_STEM, _STEM_CLASS = stem_pattern()

_FACTOID_OPENERS: frozenset[str | bytes] = frozenset(["what", "who", "when", "where", "which", "whose", "name", "list"])
_OPEN_OPENERS: frozenset[str | bytes] = frozenset(
    ["how", "why", "explain", "describe", "discuss", "compare", "design", "implement", "prove", "derive", "analyze", "analyse", "write", "create", "build", "develop", "evaluate", "refactor", "debug", "optimize", "should", "critique", "assess", "estimate", "plan", "identify"]
)

_FACTOID_OPENERS |= {w.encode("ascii") for w in _FACTOID_OPENERS if isinstance(w, str)}  # as for _LEX_BYTE
_OPEN_OPENERS |= {w.encode("ascii") for w in _OPEN_OPENERS if isinstance(w, str)}

_UNICODE_WORD = re.compile(r"[^\W\d_]+")
# Line starts that open a list item ("" found) or a lettered answer option (its text found): one
# regex pass for both. Neither kind of match spans a line end, so they never hide each other.
_LINE_MARK = re.compile(r"\n(?:[ \t]*(?:[-*\u2022]|\d{1,2}[.)])[ \t]|(\(?[A-E][.)][ \t]))")
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)

# The lexicon as one byte per word: class index + 1 (so that 0, "no class", can be filtered out
# in C), letting `bytes(filter(None, map(...)))` and `bytes.count` replace a Counter.
# ASCII words are looked up as the bytes they were split into (no decoding, cheaper to hash), so
# the ASCII entries are there twice: as str and as bytes (equal hashes, never equal keys).
_LEX_BYTE: dict[str | bytes, int] = {w: i + 1 for w, i in LEXICON.items()}
_LEX_BYTE.update({w.encode("ascii"): k for w, k in list(_LEX_BYTE.items()) if isinstance(w, str) and w.isascii()})
_STEM_BYTE: dict[str, int] = {w: i + 1 for w, i in _STEM_CLASS.items()}
_NO_LEX = (0.0,) * len(CLASSES)
# log1p of every count a read text can give (a count of its characters, plus one), looked up:
# a tuple index costs a fraction of a call and the table a quarter of a megabyte
_LOG1P = tuple(map(math.log1p, range(HEAD_CHARS + TAIL_CHARS + 3)))
if len(CLASSES) != 7:  # extract() counts the classes one by one, for speed
    raise ImportError("policies.complexity.features.extract counts seven lexicon classes")


def _keep(chars: bytes) -> bytes:
    """The bytes to delete so that only `chars` remain (for fast counting by translate)."""
    return bytes(b for b in range(256) if b not in chars)


# One bytes.translate (C speed) reduces the UTF-8 text to a byte per character worth counting,
# one byte value per class, so each count below is a `bytes.count` of a short string instead of
# a pass of its own over the whole text. Lower-case letters, most of any text, are left out
# (they are counted from the words' text).
_CLASS_OF = {
    **{d: "0" for d in "0123456789"},  # digits
    **{c: "A" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},  # capitals
    **{c: "=" for c in "=^\\+*<"},  # math symbols
    **{c: "{" for c in "{}"},  # code punctuation, with ";" counted below
    **{c: c for c in ";,?\n"},  # ";" is code and a clause; "?" a question and a sentence end
    ".": ".",  # sentence ends, with "?"
    "!": ".",
}
_CLASS_TABLE = bytes(ord(_CLASS_OF.get(chr(b), "\x00")) for b in range(256))
_CLASS_DROP = _keep(bytes(ord(c) for c in _CLASS_OF))
_BRANCH = re.compile(r"\b(?:if|for|while|case|catch|except|elif|else if)\b|&&|\|\|")
# ASCII text -> lower-case letters with everything else a space, so split() gives the words
_WORD_BYTES = bytes(b + 32 if 65 <= b <= 90 else b if 97 <= b <= 122 else 32 for b in range(256))
_ASCII = bytes(range(128))

# Non-ASCII text: each character's UTF-8 lead byte names its script block; continuation bytes
# (0x80-0xBF) are dropped so one byte stands for one character. Per block: English-equivalent
# tokens per character (a Han character carries about a word, a Hangul syllable about 0.6 of
# one, an alphabetic letter a quarter, as tokenizers and translations both suggest) and whether
# it is a non-Latin letter.
_BLOCKS = (  # (first lead byte, last lead byte, tokens per character, non-Latin letter)
    (0x00, 0x7F, 0.25, False),  # ASCII
    (0xC2, 0xCD, 0.25, False),  # Latin-1 supplement, Latin extended, IPA, combining marks
    (0xCE, 0xDF, 0.25, True),  # Greek, Cyrillic, Armenian, Hebrew, Arabic, Syriac...
    (0xE0, 0xE1, 0.25, True),  # Indic scripts, Thai, Georgian, Hangul jamo, Vietnamese Latin
    (0xE2, 0xE2, 0.5, False),  # punctuation, symbols, arrows, mathematical operators
    (0xE3, 0xE3, 0.5, True),  # CJK punctuation, Hiragana, Katakana
    (0xE4, 0xE9, 0.85, True),  # CJK unified ideographs
    (0xEA, 0xED, 0.6, True),  # Hangul syllables (and a few rarer blocks)
    (0xEE, 0xEF, 0.5, False),  # private use, compatibility forms, full-width punctuation
    (0xF0, 0xF4, 1.0, False),  # emoji and other supplementary-plane characters
)
_BLOCK_OF = bytes(
    next((k for k, (lo, hi, _, _) in enumerate(_BLOCKS) if lo <= b <= hi), 0) for b in range(256)
)
_CONTINUATION = bytes(range(0x80, 0xC0))
_BLOCK_TOKENS = tuple(blk[2] for blk in _BLOCKS)
_NON_LATIN_BLOCKS = tuple(k for k, blk in enumerate(_BLOCKS) if blk[3])
_WIDE_PUNCT = {"。": ".", "？": "?", "！": "!", "，": ",", "、": ",", "；": ";", "،": ",", "؟": "?"}
_ANY_WIDE_PUNCT = re.compile("[" + "".join(_WIDE_PUNCT) + "]")


def analysed_text(text: str) -> str:
    """The part of `text` the features read: all of it, or a head and tail of a huge one."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]


def script_profile(utf8: bytes) -> tuple[float, float]:
    """(English-equivalent tokens per character, share of letters in non-Latin scripts)."""
    wide = utf8.translate(None, _ASCII)
    return _profile(wide, len(utf8) - len(wide), len(utf8.translate(None, _LETTERS)))


def _profile(wide: bytes, ascii_chars: int, ascii_letters: int) -> tuple[float, float]:
    """`script_profile` from the UTF-8 of the non-ASCII characters alone (a long prompt with a
    few curly quotes pays for those, not for its length) and counts of the ASCII ones."""
    blocks = wide.translate(_BLOCK_OF, _CONTINUATION)
    n = ascii_chars + len(blocks)
    if n == 0:
        return 0.25, 0.0
    counts = list(map(blocks.count, range(len(_BLOCKS))))
    counts[0] += ascii_chars
    tokens = sum(map(mul, counts, _BLOCK_TOKENS))
    non_latin = sum(map(counts.__getitem__, _NON_LATIN_BLOCKS))
    latin = ascii_letters + counts[1]
    return tokens / n, non_latin / (non_latin + latin) if non_latin else 0.0


_LETTERS = _keep(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _code_metrics(code: str) -> tuple[float, float, float]:
    """(cyclomatic complexity, Halstead effort, 100 - maintainability index) of a code block.

    radon parses Python only; other languages fall back to counting branch keywords and
    report no effort or MI (0), so unparseable code is never scored as trivial by accident.
    """
    found = analyse(code)
    if found is None:
        return 1.0 + len(_BRANCH.findall(code)), 0.0, 0.0
    return found.blocks_cyclomatic, found.halstead_effort, max(0.0, 100.0 - found.maintainability)


def _code_features(text: str) -> tuple[float, float, float, float]:
    """log1p of (fenced blocks, cyclomatic complexity), effort / 10, MI deficit / 100."""
    blocks = _FENCE.findall(text)
    if not blocks:
        return 0.0, 0.0, 0.0, 0.0
    code = "\n".join(blocks)[:CODE_CHARS]
    cc, effort, mi_deficit = _code_metrics(code)
    return math.log1p(len(blocks)), math.log1p(cc), math.log1p(effort) / 10.0, mi_deficit / 100.0


def _non_ascii(
    t: str, utf8: bytes, letter_text: bytes
) -> tuple[bytes, list[bytes] | list[str], int, float, float, bytes]:
    """(ASCII stand-ins for wide punctuation, ASCII words, their letters, tokens per character,
    non-Latin share, lexicon class bytes) of non-ASCII text. Stems count only in text with
    non-Latin letters.

    Most such prompts are English with a few curly quotes or dashes: when no non-ASCII character
    is a letter, the words are the ASCII letter runs, found (as bytes) as for ASCII text, and
    the Unicode word regex (several times slower) is skipped.
    """
    wide = utf8.translate(None, _ASCII)
    others = wide.decode("utf-8", "surrogatepass")  # the non-ASCII characters, in order
    ascii_letters = len(letter_text) - letter_text.count(b" ")
    per_char, non_latin = _profile(wide, len(utf8) - len(wide), ascii_letters)
    punct = b""
    if _ANY_WIDE_PUNCT.search(others):
        punct = "".join(mark * others.count(w) for w, mark in _WIDE_PUNCT.items()).encode("ascii")
    low = None
    words: list[bytes] | list[str]
    if _UNICODE_WORD.search(others.lower()) is None:
        words = letter_text.split()
        letters = ascii_letters
        hits = bytes(filter(None, map(_LEX_BYTE.get, words)))
    else:
        low = t.lower()
        all_words = _UNICODE_WORD.findall(low)
        hits = bytes(filter(None, map(_LEX_BYTE.get, all_words)))
        words = list(filter(str.isascii, all_words))  # vocabulary and word length: ASCII only
        letters = sum(map(len, words))
    if non_latin:
        hits += bytes(map(_STEM_BYTE.__getitem__, _STEM.findall(t.lower() if low is None else low)))
    return punct, words, letters, per_char, non_latin, hits


def extract(
    text: str, history_turns: int = 0, history_chars: int = 0, words: bool = True
) -> tuple[list[float], list[str]]:
    """Feature values (in `FEATURES` order) and the words of the analysed text.

    `text` is the turn to score; `history_*` describe the conversation before it. Only ASCII
    words are returned for the learned vocabulary; other scripts are read through `STEMS`.
    `words=False` returns no words (a decision needs them only for a learned vocabulary) and
    saves making them strings.
    """
    t = text if len(text) <= HEAD_CHARS + TAIL_CHARS else analysed_text(text)
    b = t.encode("utf-8", "surrogatepass")  # lone surrogates must not raise
    letter_text = b.translate(_WORD_BYTES)  # ASCII letters, lower-cased; all else a space
    c = b.translate(_CLASS_TABLE, _CLASS_DROP)  # one byte per counted character, by class
    found: list[bytes] | list[str]
    if t.isascii():
        found = letter_text.split()
        letters = len(letter_text) - letter_text.count(b" ")
        hits = bytes(filter(None, map(_LEX_BYTE.get, found)))
        per_char, non_latin = 0.25, 0.0
        first_is_ascii = True
    else:
        punct, found, letters, per_char, non_latin, hits = _non_ascii(t, b, letter_text)
        if punct:
            c += punct.translate(_CLASS_TABLE)
        first_is_ascii = (t[:64].lstrip() or t.lstrip())[:1].isascii()
    count = c.count
    log1p = math.log1p
    lex: tuple[float, ...]
    if hits:
        n = hits.count
        if len(hits) < len(_LOG1P):
            lex = _LOG1P[n(1)], _LOG1P[n(2)], _LOG1P[n(3)], _LOG1P[n(4)], _LOG1P[n(5)], _LOG1P[n(6)], _LOG1P[n(7)]
        else:
            lex = log1p(n(1)), log1p(n(2)), log1p(n(3)), log1p(n(4)), log1p(n(5)), log1p(n(6)), log1p(n(7))
        joiners = n(_JOINER + 1)
    else:
        lex, joiners = _NO_LEX, 0
    first = found[0] if found and first_is_ascii else ""
    newlines = count(b"\n")
    marks = _LINE_MARK.findall(t) if newlines else ()  # both kinds start a line
    choices = len(marks) - marks.count("")
    semicolons = count(b";")
    questions = count(b"?")
    code = _code_features(t) if "```" in t else (0.0, 0.0, 0.0, 0.0)
    log = _LOG1P  # each count below is of characters of t, each counted once (sentences: + 1)
    values = [
        log1p(len(text) * per_char),
        non_latin,
        log[newlines],
        log[count(b".") + questions + 1] if t else 0.0,
        log1p(count(b",") + semicolons + joiners),
        log[count(b"A")],
        log[questions],
        log[len(marks) - choices],
        1.0 if choices else 0.0,
        log[count(b"0")],
        log[count(b"=")],
        code[0],
        log[count(b"{") + semicolons],
        code[1],
        code[2],
        code[3],
        *lex,
        1.0 if first in _FACTOID_OPENERS else 0.0,
        1.0 if first in _OPEN_OPENERS else 0.0,
        (letters / len(found) - 4.5) if found else 0.0,
        log1p(history_turns),
        log1p(history_chars / 4.0),
    ]
    if not words:
        return values, []
    return values, [w.decode("ascii") if isinstance(w, bytes) else w for w in found]
