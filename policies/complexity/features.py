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
from collections import Counter
from functools import lru_cache

__all__ = ["FEATURES", "analysed_text", "extract", "words_of"]

HEAD_CHARS = 6000  # characters read from the start of a long prompt
TAIL_CHARS = 2000  # ... and from its end (the question often comes last)
CODE_CHARS = 4000  # characters of fenced code handed to radon, per prompt
HISTORY_TURNS = 64  # earlier messages looked at, most recent first

FEATURES: tuple[str, ...] = (
    "log_tokens",  # log1p(estimated tokens of the last user turn)
    "non_latin",  # share of multi-byte characters: non-Latin scripts (CJK, Hangul, Cyrillic...)
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

_LEXICON_WORDS = {
    "lex_reasoning": """prove proof proofs derive derivation justify explain explanation why analyze
        analyse analysis compare contrast evaluate reason reasoning implication implications critique
        argue argument demonstrate infer deduce tradeoff tradeoffs optimize optimise strategy
        hypothesis counterexample rigorous rigorously formally assumption assumptions""",
    "lex_math": """equation equations integral derivative probability matrix matrices theorem lemma
        polynomial solve calculate compute ratio percent percentage fraction average remainder
        prime vector eigenvalue eigenvalues limit series logarithm sqrt modulo variance expected
        geometric arithmetic sum product quotient factorial permutation permutations combinations
        inequality function functions graph converge convergence differential optimization""",
    "lex_code": """code function functions class method def return import compile compiler bug
        bugs debug error exception stack trace refactor implement implementation algorithm
        complexity python javascript typescript java rust golang sql query regex api endpoint
        async thread concurrency recursion recursive array pointer struct runtime script shell
        bash docker kubernetes database schema test tests unit""",
    "lex_constraint": """must exactly least most only without ensure format json yaml csv table
        bullet bullets words sentences paragraphs limit avoid strictly each every under within
        require requires required constraint constraints specific specifically""",
    "lex_sequence": """first second third then next finally additionally also afterwards step
        steps stage phase subsequently""",
    "lex_simple": """hi hello hey thanks thank joke jokes synonym synonyms antonym spell spelling
        define definition meaning capital translate rhyme greet greeting favorite favourite fun""",
    "lex_creative": """write story stories poem poems essay email letter blog tweet slogan lyrics
        song haiku narrative fiction dialogue script""",
}
_LEXICON: dict[str, int] = {}
_LEX_NAMES = tuple(_LEXICON_WORDS)
for _i, _name in enumerate(_LEX_NAMES):
    for _w in _LEXICON_WORDS[_name].split():
        _LEXICON.setdefault(_w, _i)

_FACTOID_OPENERS = frozenset("what who when where which whose name list".split())
_OPEN_OPENERS = frozenset(
    """how why explain describe discuss compare design implement prove derive analyze analyse
    write create build develop evaluate refactor debug optimize""".split()
)

_ASCII_WORD = re.compile(r"[a-z]+")
_UNICODE_WORD = re.compile(r"[^\W\d_]+")
_LIST_ITEM = re.compile(r"\n[ \t]*(?:[-*\u2022]|\d{1,2}[.)])[ \t]")
_CHOICE = re.compile(r"\n\(?[A-E][.)][ \t]")
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_JOINERS = "and or but if unless while whereas although because since".split()
_JOINER = len(_LEX_NAMES)  # lexicon index of the joining words, counted as clauses
for _w in _JOINERS:
    _LEXICON.setdefault(_w, _JOINER)


def _keep(chars: bytes) -> bytes:
    """The bytes to delete so that only `chars` remain (for fast counting by translate)."""
    return bytes(b for b in range(256) if b not in chars)


# counting classes of ASCII characters in the UTF-8 bytes with bytes.translate (C speed)
_DIGITS = _keep(b"0123456789")
_CAPITALS = _keep(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MATH = _keep(b"=^\\+*<")
_CODE = _keep(b"{};")
_SENTENCE_END = _keep(b".?!")
_BRANCH = re.compile(r"\b(?:if|for|while|case|catch|except|elif|else if)\b|&&|\|\|")


def analysed_text(text: str) -> str:
    """The part of `text` the features read: all of it, or a head and tail of a huge one."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]


def words_of(lowered: str) -> list[str]:
    """Lower-case words (letters only) of already lower-cased text, in order."""
    return (_ASCII_WORD if lowered.isascii() else _UNICODE_WORD).findall(lowered)


def _est_tokens(full_chars: int, text: str, utf8: bytes) -> tuple[float, float]:
    """(estimated tokens of the full text, share of multi-byte characters).

    About 4 characters a token for ASCII; each extra UTF-8 byte adds half a token, so a
    CJK or Hangul character counts about 1.25 tokens and Cyrillic 0.75, roughly what
    tokenizers spend on them. Measured on `text` (bounded) and scaled to `full_chars`.
    """
    n = len(text)
    if n == 0:
        return 0.0, 0.0
    extra = len(utf8) - n
    per_char = 0.25 + 0.5 * extra / n
    return full_chars * per_char, min(1.0, extra / n)


@lru_cache(maxsize=512)
def _code_metrics(code: str) -> tuple[float, float, float]:
    """(cyclomatic complexity, Halstead effort, 100 - maintainability index) of a code block.

    radon parses Python only; other languages fall back to counting branch keywords and
    report no effort or MI (0), so unparseable code is never scored as trivial by accident.
    """
    try:
        from radon.complexity import cc_visit
        from radon.metrics import h_visit, mi_visit

        blocks = cc_visit(code)
        cc = float(sum(b.complexity for b in blocks)) or 1.0
        effort = float(h_visit(code).total.effort)
        mi_deficit = max(0.0, 100.0 - float(mi_visit(code, multi=True)))
        return cc, effort, mi_deficit
    except Exception:  # radon raises SyntaxError and others on non-Python code
        return 1.0 + len(_BRANCH.findall(code)), 0.0, 0.0


def _code_features(text: str) -> tuple[int, float, float, float]:
    blocks = _FENCE.findall(text)
    if not blocks:
        return 0, 0.0, 0.0, 0.0
    code = "\n".join(blocks)[:CODE_CHARS]
    cc, effort, mi_deficit = _code_metrics(code)
    return len(blocks), cc, effort, mi_deficit


def extract(text: str, history_turns: int = 0, history_chars: int = 0) -> tuple[list[float], list[str]]:
    """Feature values (in `FEATURES` order) and the words of the analysed text.

    `text` is the turn to score; `history_*` describe the conversation before it.
    """
    t = analysed_text(text)
    b = t.encode("utf-8", "surrogatepass")  # lone surrogates must not raise
    low = t.lower()
    words = words_of(low)
    tokens, non_latin = _est_tokens(len(text), t, b)
    log1p = math.log1p

    lex = Counter(map(_LEXICON.get, words))
    first = words[0] if words else ""

    fences = cc = effort = mi_deficit = 0.0
    if "```" in t:
        fences, cc, effort, mi_deficit = _code_features(t)

    n_words = len(words)
    avg_len = (sum(map(len, words)) / n_words - 4.5) if n_words else 0.0
    values = [
        log1p(tokens),
        non_latin,
        log1p(b.count(b"\n")),
        log1p(len(b.translate(None, _SENTENCE_END)) + 1 if t else 0),
        log1p(b.count(b",") + b.count(b";") + lex[_JOINER]),
        log1p(len(b.translate(None, _CAPITALS))),
        log1p(b.count(b"?")),
        log1p(len(_LIST_ITEM.findall(t))),
        1.0 if _CHOICE.search(t) else 0.0,
        log1p(len(b.translate(None, _DIGITS))),
        log1p(len(b.translate(None, _MATH))),
        log1p(fences),
        log1p(len(b.translate(None, _CODE))),
        log1p(cc),
        log1p(effort) / 10.0,
        mi_deficit / 100.0,
        log1p(lex[0]),
        log1p(lex[1]),
        log1p(lex[2]),
        log1p(lex[3]),
        log1p(lex[4]),
        log1p(lex[5]),
        log1p(lex[6]),
        1.0 if first in _FACTOID_OPENERS else 0.0,
        1.0 if first in _OPEN_OPENERS else 0.0,
        avg_len,
        log1p(history_turns),
        log1p(history_chars / 4.0),
    ]
    return values, words
