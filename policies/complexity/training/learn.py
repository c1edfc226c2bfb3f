"""The estimator behind the complexity scorer's weights, in pure Python (no numpy).

Two stages, both deterministic:

1. Word weights: for each word seen in at least `min_df` training prompts (function words and
   lexicon words excluded, `EXCLUDED_WORDS`), the shrunken mean of the label's deviation from
   its dataset's mean over the prompts that contain it: sum(residual) / (prompts + word_prior).
   A prompt's `vocabulary` feature is the mean weight of its words. For the second stage it is
   computed out of fold (cross-fitting), so its weight reflects how well word weights predict
   prompts they were not counted on.
2. Logistic regression (Newton's method) on the standardised hand-designed features plus
   `vocabulary`, with one intercept per dataset (so base rates that differ between
   benchmarks do not bend the features) and a strong L2 pull of every weight towards its
   hand-set prior (`PRIORS`): the shared records are grade-school math and multiple-choice
   exams, and what they alone would teach (length barely matters, formulas and long words mean
   easy) does not carry over to chat, code or writing. Features the data cannot speak to
   (`FIXED`: code, non-Latin scripts, chit-chat, conversation history) keep their prior.
   The fitted vocabulary weight is then scaled, separately for prompts with lettered choices
   (`exam_boost`) and for the rest (`vocabulary_boost`), by factors chosen by cross-validated
   APGR; the model caps each vocabulary term (`vocabulary_cap`).

Label: y = (hosted - local + 1) / 2, whose expectation is monotone in the quality gained by
sending the prompt up.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policies.complexity.features import (
    FEATURES,
    LEXICON,
    NON_LATIN,
    SCRIPT_BOUND,
    extract,
)
from policies.complexity.lexicon import STOPWORDS
from policies.complexity.model import (
    EXAM_VOCABULARY,
    MODEL_FEATURES,
    VOCABULARY,
    Weights,
    vocabulary_value,
)

__all__ = ["EXCLUDED_WORDS", "FIXED", "GENERAL", "PRIORS", "Design", "LearnOptions", "dataset_of", "design", "learn", "subset"]

# Logit per unit of each feature before any data is seen: general beliefs about what makes
# a prompt need a stronger model, set by hand (not fitted), and the part of the score that must
# carry over to chat, code, writing and other languages that the shared GSM8K/MMLU records do
# not show. Fitting pulls each weight towards its prior, strongly (`LearnOptions.l2_features`).
PRIORS: dict[str, float] = {
    "log_tokens": 0.5,  # longer asks carry more to do: the one signal every benchmark agrees on
    "non_latin": 0.3,  # small local models are weaker outside English; the content counts more
    "lines": 0.05,
    "sentences": 0.0,
    "clauses": 0.2,  # clause nesting and named things to track: the most telling structural
    "capitals": 0.2,  # signals on both shared sets after length (training part, feature alone)
    "questions": 0.1,
    "list_items": 0.3,
    "choices": 0.0,
    "digits": 0.05,
    "math_symbols": 0.2,
    "code_fences": 0.4,
    "code_punct": 0.1,
    "code_cc": 0.3,
    "code_effort": 0.3,
    "code_mi_deficit": 0.5,
    "lex_reasoning": 0.6,
    "lex_math": 0.3,
    "lex_code": 0.3,
    "lex_constraint": 0.2,
    "lex_sequence": 0.1,
    "lex_simple": -1.0,
    "lex_creative": 0.0,  # a haiku and a novel chapter both say "write"; length tells them apart
    "wh_factoid": -0.4,
    "open_question": 0.3,
    "avg_word_len": 0.3,
    "history_turns": 0.3,
    "history_tokens": 0.05,
    VOCABULARY: 0.0,
    EXAM_VOCABULARY: 0.0,
}

# Features the shared GSM8K/MMLU records cannot speak to (almost no code, non-Latin text,
# chit-chat or conversations there): fitting them would learn the few odd cases, so they
# keep the prior.
FIXED = frozenset(
    {"non_latin", "code_fences", "code_cc", "code_effort", "code_mi_deficit", "lex_simple",
     "lex_creative", "history_turns", "history_tokens", EXAM_VOCABULARY}
)  # fmt: skip

# Words that never enter the learned vocabulary: function words (they say how a prompt is
# phrased, not what it asks, and carry one benchmark's style: "i", "my" in MMLU's first-person
# moral scenarios), and words already in the hand-set lexicons (a benchmark must not flip
# "probability" or "prove" to mean easy).
EXCLUDED_WORDS = STOPWORDS | frozenset(LEXICON)


@dataclass(frozen=True, slots=True)
class LearnOptions:
    """`l2_features`: pull towards the priors, in pseudo-examples per standardised unit (about
    2,700 is what 10k records weigh, so 10,000 lets the data move a weight a fifth of the way).
    `word_prior`: pseudo-prompts with residual 0 added to every word's mean.
    `l2_vocabulary`: pull of the vocabulary feature's weight towards 0, same units.
    `vocabulary_boost`: factor on the fitted vocabulary weight. Logistic regression on these soft
    labels gives the out-of-fold vocabulary less weight than ranking prompts would; the factor
    is chosen by cross-validated APGR, and `vocabulary_cap` bounds what it can do.
    `exam_boost`: the same for the vocabulary term of prompts with lettered choices.
    `vocabulary_cap`: the most logits each vocabulary term may add or take away."""

    l2_features: float = 10_000.0
    word_prior: float = 200.0
    l2_vocabulary: float = 1.0
    vocabulary_boost: float = 1.0
    exam_boost: float = 16.0  # what cross-validation chose on the shared data
    vocabulary_cap: float = 1.5
    balance: float = 0.5  # 0: every record weighs 1; 1: every dataset weighs the same in total
    min_df: int = 20  # a word enters the vocabulary when this many training prompts contain it
    cross_fit_folds: int = 5
    newton_steps: int = 12
    prune: float = 0.002  # word weights smaller than this are dropped from the file
    free_features: tuple[str, ...] | None = None  # None: every feature outside FIXED is fitted
    prior_scale: float = 1.0  # factor on PRIORS, for fitted and pinned features alike
    relative_priors: float = 0.0  # with prior_scale 0: unfitted features at this share of PRIORS, relative to length
    # unfitted features whose share of the prior differs from `relative_priors`: (name, share)
    relative_shares: tuple[tuple[str, float], ...] = ()


# The shipped recipe, chosen leaving one dataset out (`benchmarks/routing_quality.py`) among
# recipes that keep the everyday easy/hard pairs (`benchmarks/general_pairs.py`) ranked: a few
# task-level features fitted freely, no learned vocabulary (word weights won on a split of the
# sets they came from and lost on sets of another kind), every set weighing the same (`balance`
# 1: a kind of prompt counts, not how many records a benchmark happens to have; by record count
# 14k exam questions set the weights and the 11-task mix falls well below length), and every
# other feature at its hand-set prior relative to the fitted length weight: the six sets barely
# show code, other languages, chit-chat or open requests, which is what the priors are for.
# Mean word length keeps half its prior: five of the six sets say long words mean easier
# (exam vocabulary both models know), the everyday pairs say technical words mean harder.
# Freeing `code_punct` too looks better on the table (mean +0.022 against +0.015, no set worse),
# but its weight turns negative (semicolon-rich reading passages in MMLU and llmrouter) and
# llmrouter's code tasks (MBPP, HumanEval) lose 0.016 APGR left out: it stays at its prior.
GENERAL = LearnOptions(
    free_features=("log_tokens", "lines", "lex_sequence", "clauses", "open_question", "lex_math"),
    prior_scale=0.0,
    l2_features=200.0,
    vocabulary_boost=0.0,
    exam_boost=0.0,
    balance=1.0,
    relative_priors=1.0,
    relative_shares=(("avg_word_len", 0.5),),
)


@dataclass(slots=True)
class Design:
    """Features of the training records, computed once and shared by every fit."""

    ids: list[str]
    dense: list[list[float]]
    words: list[list[str]]
    labels: list[float]
    groups: list[str]


def dataset_of(record: dict[str, Any]) -> str:
    """The benchmark a record comes from: `dataset` if given, else its id up to the first '-'."""
    return str(record.get("dataset") or str(record["id"]).split("-", 1)[0])


def design(records: Sequence[dict[str, Any]]) -> Design:
    dense, words = [], []
    for r in records:
        values, ws = extract(r["prompt"])
        dense.append(values)
        words.append(ws)
    labels = [(float(r["hosted"]) - float(r["local"]) + 1.0) / 2.0 for r in records]
    return Design([str(r["id"]) for r in records], dense, words, labels, [dataset_of(r) for r in records])


def subset(d: Design, idx: Sequence[int]) -> Design:
    return Design(
        [d.ids[i] for i in idx], [d.dense[i] for i in idx], [d.words[i] for i in idx],
        [d.labels[i] for i in idx], [d.groups[i] for i in idx],
    )  # fmt: skip


def fold_of(record_id: str, folds: int, salt: str) -> int:
    digest = hashlib.sha256((salt + record_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") * folds >> 64


def _sample_weights(groups: Sequence[str], balance: float) -> list[float]:
    """Per-record weights, normalised to sum to the number of records."""
    counts = Counter(groups)
    raw = [(1.0 / counts[g]) ** balance for g in groups]
    scale = len(groups) / sum(raw)
    return [w * scale for w in raw]


def _residuals(d: Design, sw: Sequence[float]) -> list[float]:
    total: dict[str, float] = defaultdict(float)
    weight: dict[str, float] = defaultdict(float)
    for g, y, w in zip(d.groups, d.labels, sw):
        total[g] += y * w
        weight[g] += w
    return [y - total[g] / weight[g] for g, y in zip(d.groups, d.labels)]


def _word_weights(
    words: Sequence[list[str]], residuals: Sequence[float], sw: Sequence[float], opts: LearnOptions
) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    mass: dict[str, float] = defaultdict(float)
    df: Counter[str] = Counter()
    for ws, r, w in zip(words, residuals, sw):
        for word in set(ws).difference(EXCLUDED_WORDS):
            total[word] += r * w
            mass[word] += w
            df[word] += 1
    return {
        word: total[word] / (mass[word] + opts.word_prior)
        for word, n in df.items()
        if n >= opts.min_df
    }


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve a x = b for a small symmetric positive definite a (Gaussian elimination)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            if f:
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][k] * x[k] for k in range(c + 1, n))) / m[c][c]
    return x


def newton(
    rows: list[list[float]], offsets: list[float], labels: list[float], sw: list[float],
    prior: list[float], l2: list[float], steps: int,
) -> list[float]:  # fmt: skip
    """Weighted logistic regression with an L2 pull of strength `l2[a]` towards `prior[a]`."""
    theta = list(prior)
    for _ in range(steps):
        grad, hess = _gradient_and_hessian(rows, offsets, labels, sw, theta)
        _add_pull(grad, hess, theta, prior, l2)
        step = _solve(hess, grad)
        theta = [t - s for t, s in zip(theta, step)]
        if max(abs(s) for s in step) < 1e-7:
            break
    return theta


def _gradient_and_hessian(
    rows: list[list[float]], offsets: list[float], labels: list[float], sw: list[float], theta: list[float],
) -> tuple[list[float], list[list[float]]]:  # fmt: skip
    """The weighted log-loss's gradient and Hessian at `theta`; only the Hessian's upper
    triangle is filled (it is symmetric), and zero features are skipped (most are zero)."""
    dim = len(theta)
    grad = [0.0] * dim
    hess = [[0.0] * dim for _ in range(dim)]
    for x, o, y, w in zip(rows, offsets, labels, sw):
        z = o + sum(t * v for t, v in zip(theta, x))
        p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
        r, h = (p - y) * w, p * (1.0 - p) * w
        for a in range(dim):
            xa = x[a]
            if xa:
                grad[a] += r * xa
                ha = h * xa
                row = hess[a]
                for b in range(a, dim):
                    row[b] += ha * x[b]
    return grad, hess


def _add_pull(
    grad: list[float], hess: list[list[float]], theta: list[float], prior: list[float], l2: list[float]
) -> None:
    """Mirror the Hessian's upper triangle and add the L2 pull towards `prior`, in place."""
    for a in range(len(theta)):
        for b in range(a):
            hess[a][b] = hess[b][a]
        grad[a] += l2[a] * (theta[a] - prior[a])
        hess[a][a] += l2[a] + 1e-9


def _out_of_fold_vocabulary(d: Design, residuals: list[float], sw: list[float], opts: LearnOptions) -> list[float]:
    """Each prompt's vocabulary value from word weights fitted without its fold, so stage 2 sees
    how word weights do on prompts they were not counted on."""
    n = len(d.labels)
    folds = [fold_of(i, opts.cross_fit_folds, "cross-fit") for i in d.ids]
    vocab = [0.0] * n
    for f in range(opts.cross_fit_folds):
        inside = [i for i in range(n) if folds[i] != f]
        part = _word_weights(
            [d.words[i] for i in inside], [residuals[i] for i in inside], [sw[i] for i in inside], opts
        )
        for i in range(n):
            if folds[i] == f:
                vocab[i] = vocabulary_value(d.words[i], part.get)
    return vocab


def _columns(d: Design, vocab: list[float]) -> tuple[list[list[float]], list[float], list[float]]:
    """(columns in MODEL_FEATURES order as the model reads them, their means, their std devs)."""
    n = len(d.labels)
    choices = FEATURES.index("choices")
    v_mean = sum(vocab) / n
    exam = [(v - v_mean) * x[choices] for v, x in zip(vocab, d.dense)]  # as the model computes it
    columns = [list(col) for col in zip(*d.dense)] + [vocab, exam]
    means = [sum(c) / n for c in columns[:-1]] + [0.0]  # the exam term is 0 off exams
    for i in range(n):  # see features.SCRIPT_BOUND
        if columns[NON_LATIN][i] >= 0.5:
            for j in SCRIPT_BOUND:
                columns[j][i] = means[j]
    stds = [math.sqrt(sum((v - mu) ** 2 for v in c) / n) or 1.0 for c, mu in zip(columns, means)]
    return columns, means, stds


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where things sit in stage 2's parameter vector: one intercept per dataset (`groups`,
    sorted), then the standardised `free` features; `fixed` features keep their prior.
    `free` and `fixed` index `names` (MODEL_FEATURES order)."""

    names: list[str]
    free: list[int]
    fixed: list[int]
    groups: list[str]
    gindex: dict[str, int]

    @classmethod
    def of(cls, groups: Sequence[str], opts: LearnOptions) -> _Layout:
        names = list(MODEL_FEATURES)
        ordered = sorted(set(groups))
        fitted = set(opts.free_features) if opts.free_features is not None else set(names) - FIXED
        return cls(
            names,
            [j for j, f in enumerate(names) if f in fitted],
            [j for j, f in enumerate(names) if f not in fitted],
            ordered,
            {g: i for i, g in enumerate(ordered)},
        )


def _rows(
    d: Design, lay: _Layout, columns: list[list[float]], means: list[float], stds: list[float], scale: float
) -> tuple[list[list[float]], list[float]]:
    """Stage 2's design rows (dataset one-hot, then standardised free features) and each row's
    fixed offset (the fixed features' contribution at their prior)."""
    rows, offsets = [], []
    for i in range(len(d.labels)):
        onehot = [0.0] * len(lay.groups)
        onehot[lay.gindex[d.groups[i]]] = 1.0
        rows.append(onehot + [(columns[j][i] - means[j]) / stds[j] for j in lay.free])
        offsets.append(sum(scale * PRIORS[lay.names[j]] * (columns[j][i] - means[j]) for j in lay.fixed))
    return rows, offsets


def _prior_and_pull(lay: _Layout, stds: list[float], opts: LearnOptions) -> tuple[list[float], list[float]]:
    """Each parameter's prior (in standardised units) and the strength of the pull towards it."""
    prior = [0.0] * len(lay.groups) + [opts.prior_scale * PRIORS.get(lay.names[j], 0.0) * stds[j] for j in lay.free]
    # intercepts are free; `vocabulary` is pulled towards 0, every other feature to its prior
    l2 = [0.0] * len(lay.groups) + [
        opts.l2_vocabulary if lay.names[j] == VOCABULARY else opts.l2_features for j in lay.free
    ]
    return prior, l2


def _feature_weights(lay: _Layout, theta: list[float], stds: list[float], opts: LearnOptions) -> dict[str, float]:
    """Per-feature weights in raw units: the fitted ones unstandardised, the fixed ones at their
    prior, and the vocabulary weight split into its plain and exam terms by the boosts."""
    weights = {lay.names[j]: opts.prior_scale * PRIORS[lay.names[j]] for j in lay.fixed}
    for pos, j in enumerate(lay.free):
        weights[lay.names[j]] = theta[len(lay.groups) + pos] / stds[j]
    if opts.prior_scale == 0.0 and "log_tokens" in weights:
        # Features not fitted keep their hand-set prior relative to length's: the same belief,
        # on the scale the fitted length weight set; those the data cannot speak to (FIXED)
        # fully, the others by `relative_priors`.
        scale = weights["log_tokens"] / PRIORS["log_tokens"]
        for j in lay.fixed:
            f = lay.names[j]
            if f not in (VOCABULARY, EXAM_VOCABULARY):
                weights[f] = PRIORS[f] * scale * (1.0 if f in FIXED else _relative(f, opts))
    fitted = weights[VOCABULARY]  # one fitted weight; the exam term adds the difference
    weights[VOCABULARY] = fitted * opts.vocabulary_boost
    weights[EXAM_VOCABULARY] = fitted * (opts.exam_boost - opts.vocabulary_boost)
    return weights


def _relative(feature: str, opts: LearnOptions) -> float:
    """The share of its prior an unfitted, unfixed feature keeps (see `relative_priors`)."""
    return dict(opts.relative_shares).get(feature, opts.relative_priors)


def _bias(d: Design, sw: Sequence[float], lay: _Layout, theta: list[float]) -> float:
    """The dataset intercepts averaged with each dataset's share of the sample weight."""
    group_weight: dict[str, float] = defaultdict(float)
    for g, w in zip(d.groups, sw):
        group_weight[g] += w
    return sum(theta[lay.gindex[g]] * w for g, w in group_weight.items()) / len(d.labels)


def _vocabulary(
    d: Design, residuals: list[float], sw: list[float], lay: _Layout, opts: LearnOptions
) -> tuple[dict[str, float], list[float]]:
    """(the word-weight table to ship, each prompt's out-of-fold vocabulary value); nothing
    when the options give words no say."""
    if not (VOCABULARY in {lay.names[j] for j in lay.free} or opts.vocabulary_boost or opts.exam_boost):
        return {}, [0.0] * len(d.labels)
    table = {w: x for w, x in _word_weights(d.words, residuals, sw, opts).items() if abs(x) >= opts.prune}
    return table, _out_of_fold_vocabulary(d, residuals, sw, opts)


def learn(d: Design, opts: LearnOptions = LearnOptions()) -> Weights:
    """Weights fitted on a design; deterministic for the given options."""
    sw = _sample_weights(d.groups, opts.balance)
    residuals = _residuals(d, sw)
    lay = _Layout.of(d.groups, opts)
    table, vocab = _vocabulary(d, residuals, sw, lay, opts)
    columns, means, stds = _columns(d, vocab)
    rows, offsets = _rows(d, lay, columns, means, stds, opts.prior_scale)
    prior, l2 = _prior_and_pull(lay, stds, opts)
    theta = newton(rows, offsets, d.labels, sw, prior, l2, opts.newton_steps)
    weights = _feature_weights(lay, theta, stds, opts)
    return Weights(
        bias=round(_bias(d, sw, lay, theta), 6),
        weights={f: round(weights[f], 6) for f in lay.names},
        means={f: round(mu, 6) for f, mu in zip(lay.names, means)},
        vocabulary={w: round(x, 5) for w, x in sorted(table.items())},
        vocabulary_cap=opts.vocabulary_cap,
        metadata={"dataset_intercepts": {g: round(theta[lay.gindex[g]], 6) for g in lay.groups}},
    )
