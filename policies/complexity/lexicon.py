"""Word lists behind the complexity scorer's lexical features, in English and a dozen languages.

Two kinds of entry:
- `WORDS`: whole words, matched after lower-casing and splitting on non-letters. English plus
  the common imperative and question forms of Spanish, Portuguese, French, German and Italian,
  so a Latin-script prompt in those languages is read like an English one.
- `STEMS`: substrings in scripts without spaces between words (Chinese, Japanese) or with rich
  inflection (Korean, Russian, Arabic, Hindi), found anywhere in the text. Every stem is written
  wholly in a non-Latin script, so it never double-counts an English word, and it is looked for
  only when the prompt has non-ASCII text.

Lists are general, not fitted: the reasoning and everyday-request words of each language,
translated from the English lists. The order of `CLASSES` fixes the feature names.
"""

from __future__ import annotations

import re

__all__ = ["CLASSES", "JOINERS", "STEMS", "STOPWORDS", "WORDS", "stem_pattern"]

CLASSES: tuple[str, ...] = (
    "lex_reasoning",
    "lex_math",
    "lex_code",
    "lex_constraint",
    "lex_sequence",
    "lex_simple",
    "lex_creative",
)

WORDS: dict[str, str] = {
    "lex_reasoning": """prove proof proofs derive derivation justify explain explanation why analyze
        analyse analysis compare contrast evaluate reason reasoning implication implications critique
        argue argument demonstrate infer deduce tradeoff tradeoffs optimize optimise strategy
        hypothesis counterexample rigorous rigorously formally assumption assumptions design
        architect architecture assess estimate defend diagnose investigate steelman nuanced
        explica explique explicar explicame analiza analice analizar demuestra demuestre demostrar
        compara compare comparar justifica justifique explicite expliquez expliquer analysez
        analyser demontrez prouvez comparez justifiez pourquoi erkläre erklären erläutere erläutern
        analysiere analysieren beweise beweisen vergleiche vergleichen begründe begründen warum
        entwirf entwerfen démontrez démontrer diseña diseñe evalúa evalúe évaluez bewerte bewerten
        spiega spiegare analizza dimostra confronta perché explique analise demonstre""",
    "lex_math": """equation equations integral derivative probability matrix matrices theorem lemma
        polynomial solve calculate compute ratio percent percentage fraction average remainder
        prime vector eigenvalue eigenvalues limit series logarithm sqrt modulo variance expected
        geometric arithmetic sum product quotient factorial permutation permutations combinations
        inequality function functions graph converge convergence differential optimization
        recurrence induction integer integers rational irrational abelian isomorphism
        calcula calcule calcular calculez resuelve resuelva résolvez berechne berechnen löse lösen
        ecuación équation gleichung""",
    "lex_code": """code function functions class method def return import compile compiler bug
        bugs debug error exception stack trace refactor implement implementation algorithm
        complexity python javascript typescript java rust golang sql query regex api endpoint
        async thread threads concurrency recursion recursive array pointer struct runtime script
        shell bash docker kubernetes database schema test tests unit deadlock mutex atomic
        latency throughput distributed consensus cache kernel memory compiler parser""",
    "lex_constraint": """must exactly least most only without ensure format json yaml csv table
        bullet bullets words sentences paragraphs limit avoid strictly each every under within
        require requires required constraint constraints specific specifically strict""",
    "lex_sequence": """first second third then next finally additionally also afterwards step
        steps stage phase subsequently""",
    "lex_simple": """hi hello hey thanks thank joke jokes synonym synonyms antonym spell spelling
        define definition meaning capital translate rhyme greet greeting favorite favourite fun
        weather lol haha hola gracias buenos buenas bonjour bonsoir salut merci danke hallo guten
        ciao grazie obrigado obrigada olá""",
    "lex_creative": """write story stories poem poems essay email letter blog tweet slogan lyrics
        song haiku narrative fiction dialogue script""",
}

STEMS: dict[str, str] = {
    # Chinese (simplified and traditional), Japanese, Korean, Russian, Arabic, Hindi
    "lex_reasoning": """证明 證明 証明 推导 推導 导出 分析 解释 解釋 説明 说明 比较 比較 论证 論證 論じ
        评估 評価 评价 設計 设计 为什么 為什麼 为何 なぜ どうして 実装 实现 実現 考察
        증명 유도 분석 설명 비교 설계 구현 평가 논하 논해 왜
        докаж доказ объясн анализ сравн спроект проектир обоснуй обоснов почему вывед оцени
        برهن اثبت أثبت اشرح حلل قارن صمم لماذا فسر
        सिद्ध विश्लेषण समझाइए व्याख्या तुलना क्यों""",
    "lex_math": """方程 积分 積分 概率 確率 矩阵 行列 定理 素数 素數 函数 関数 函數 导数 微分
        방정식 적분 확률 행렬 소수 함수 미분
        уравнен интеграл вероятн матриц теорем простых функци производн
        معادلة تكامل احتمال مصفوفة مبرهنة نظرية
        समीकरण प्रमेय प्रायिकता""",
    "lex_code": """代码 代碼 コード 算法 アルゴリズム 数据库 データベース 并发 並行 编程 プログラム
        코드 알고리즘 데이터베이스 프로그램 동시성
        код алгоритм программ
        خوارزمية برمجة شيفرة
        एल्गोरिदम प्रोग्राम""",
    # chained steps ("first ... then ... finally"): the strongest learned signal after length,
    # so a request in these scripts must be able to show it too
    "lex_sequence": """首先 然后 然後 其次 最后 最後 接着 接著 まず 次に 最後に それから
        먼저 우선 그다음 마지막으로 сначала затем потом наконец во-первых во-вторых
        أولا أولاً أخيرا أخيراً पहले फिर अंत""",
    "lex_simple": """你好 您好 谢谢 謝謝 早上好 晚安 こんにちは こんばんは おはよう ありがとう 天気 天气
        안녕 고마워 고맙 감사합니다 날씨
        привет здравствуй спасибо погод
        مرحبا شكرا السلام
        नमस्ते धन्यवाद शुभ""",
    "lex_creative": """写一首 写一篇 故事 诗 書いて 物語 詩 시를 이야기 소설 стихотворен рассказ
        قصة قصيدة कहानी कविता""",
}

JOINERS = ["and", "or", "but", "if", "unless", "while", "whereas", "although", "because", "since"]


def stem_pattern() -> tuple[re.Pattern[str], dict[str, int]]:
    """One regex over every stem (longest first) and each stem's class index."""
    index: dict[str, int] = {}
    for i, name in enumerate(CLASSES):
        for stem in STEMS.get(name, "").split():
            index.setdefault(stem, i)
    alternation = "|".join(re.escape(s) for s in sorted(index, key=len, reverse=True))
    return re.compile(alternation), index


# Function words: they say how a prompt is phrased, not what it asks, and they are where a
# vocabulary fitted on a few benchmarks picks up style ("i", "my": one benchmark's
# first-person moral scenarios), so the learned vocabulary leaves them out.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "any", "are", "as", "at", "be", "been", "before", "being", "below", "between", "both", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "im", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "there", "these", "they", "this", "those", "through", "to", "too", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "many", "much", "get", "got", "make", "made", "let", "lets", "us", "s", "t", "d", "ll", "m", "re", "ve"]
)
