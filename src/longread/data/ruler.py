"""RULER's synthetic tasks (NVIDIA, Hsieh et al. 2024), rebuilt on built-in text.

Each task draws a sample's needles, values and question from a RNG seeded by ``(task, seed,
index)``, then fits the haystack: the size (noise sentences, essay words, distractor words...)
is searched so that context + question tokens land at most ``length_tokens`` and, for targets
of 1000 tokens or more, within 1% of it. Answers are all required (``kind="ruler"``, scored
with string_match_all), except qa (``kind="qa"``).

Departures from RULER, each so a record fits its length finely or stays unambiguous: sizes
are counted in sentences or words rather than RULER's steps of 25-500; the needles haystack
ends with up to one needle's worth of noise sentences; qa's last distractor may be cut at a
word; distractor needles never reuse a gold key or value; cwe has no in-context example; the
question holds only the query (agents bring their own instructions).
"""

from __future__ import annotations

import itertools
import random
import string
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..text.tokenizer import Tokenizer
from ._draft import Draft, Shared
from ._fit import largest_fitting
from ._haystack import LazyShuffle, insert_at, lines_of, noise_sentences
from ._niah import NIAH_TASKS, WORDING_CHOICES, niah_draft
from .hotpotqa import DocumentPicker, Paragraph, render_documents
from .records import Sample

RULER_TASKS = (*NIAH_TASKS, "vt", "cwe", "fwe", "qa")
HAYSTACKS = ("noise", "noise-paragraphs", "essay", "needles")
NEEDLE_WORDINGS = WORDING_CHOICES  # "ruler" (RULER's own), other wordings, "mixed"
_NO_HAYSTACK = ("cwe", "fwe", "qa")
_ZETA_2 = 1.6449340668482264  # zeta(2) = pi^2 / 6, fwe's word-frequency normaliser


def build_ruler(
    task: str,
    length_tokens: int,
    n: int,
    seed: int,
    tokenizer: Tokenizer,
    haystack: str | None = None,
    hotpotqa_records: Sequence[Mapping[str, Any]] | None = None,
    wording: str = "ruler",
) -> list[Sample]:
    """``n`` samples of RULER ``task`` at ``length_tokens`` (context + question tokens).

    ``haystack`` None uses the task's RULER haystack (niah_single_1 and vt: noise; multikey_2
    and _3: needles; the other niah tasks: essay, generated unless a file is given); "noise",
    "essay" or "needles" override it; any other value is a UTF-8 text file used as the essay.
    cwe, fwe and qa take no haystack. qa asks ``hotpotqa_records[i]`` for sample ``i``.
    ``wording`` words the niah tasks' needles and question: RULER's, another of
    ``_niah.WORDINGS`` (for training data), or "mixed" (one drawn per sample).
    """
    if task not in RULER_TASKS:
        raise UsageError(f"unknown RULER task {task!r}; expected one of {', '.join(RULER_TASKS)}")
    if n < 1 or length_tokens < 1:
        raise UsageError("n and length_tokens must be positive")
    if wording != "ruler" and task not in NIAH_TASKS:
        raise UsageError(f"task {task} has no needle wording to choose (got {wording!r})")
    shared = make_shared(task, length_tokens, seed, haystack, hotpotqa_records)
    shared.wording = wording
    samples: list[Sample] = []
    hint: int | None = None
    for i in range(n):
        rng = random.Random(f"ruler:{task}:{seed}:{i}")
        draft = (
            niah_draft(task, shared, rng) if task in NIAH_TASKS else _DRAFTS[task](shared, rng, i)
        )
        sample, hint = fit_draft(draft, task, i, shared, tokenizer, hint)
        samples.append(sample)
    return samples


def make_shared(
    task: str,
    target: int,
    seed: int,
    haystack: str | None,
    records: Sequence[Mapping[str, Any]] | None = None,
) -> Shared:
    """What every sample of one build shares; refuses a haystack the task cannot take."""
    if haystack is not None and task in _NO_HAYSTACK:
        raise UsageError(f"task {task} takes no haystack (got {haystack!r})")
    if haystack is None or haystack in HAYSTACKS:
        return Shared(seed, target, haystack, None, records)
    if not Path(haystack).is_file():
        raise UsageError(
            f"haystack must be one of {', '.join(HAYSTACKS)} or a text file; "
            f"{haystack!r} is neither"
        )
    return Shared(seed, target, "essay", Path(haystack), records)


def fit_draft(
    draft: Draft,
    task: str,
    index: int,
    shared: Shared,
    tokenizer: Tokenizer,
    hint: int | None,
    dataset: str = "ruler",
) -> tuple[Sample, int]:
    """The sample of ``draft`` whose haystack size lands its tokens within 1% of the target
    (at most the target), and that size (the next sample's search starts there)."""
    question_tokens = tokenizer.count(draft.question)

    def measure(size: int) -> int:
        return tokenizer.count(draft.render(size)) + question_tokens

    what = f"{task} sample {index}"
    size = largest_fitting(measure, shared.target, hi=draft.limit, start=hint, what=what)
    context = draft.render(size)
    context_tokens = tokenizer.count(context)
    total = context_tokens + question_tokens
    if shared.target >= 1000 and total < 0.99 * shared.target:
        raise UsageError(
            f"{what}: reached only {total} of {shared.target} tokens (the task's material "
            "runs out at this length, or its steps are too coarse for this tokenizer)"
        )
    meta = {
        "dataset": dataset,
        "task": task,
        "kind": draft.kind,
        "length": shared.target,
        "context_tokens": context_tokens,
        "tokens": total,
        "seed": shared.seed,
        **draft.meta,
        **(draft.size_meta(size) if draft.size_meta else {}),
    }
    if shared.essay_file is not None:  # a haystack of the user's: reports name it
        meta["haystack_file"] = shared.essay_file.name
    sample_id = f"{task}-{shared.target}-{index}"
    return Sample(sample_id, draft.question, context, list(draft.answers), meta), size


def _vt_draft(shared: Shared, rng: random.Random, index: int) -> Draft:
    """Variable tracking: one chain ``VAR A = 12345``, ``VAR B = VAR A`` ... (4 hops) in
    noise (or essay) lines; the answer is every variable holding the value."""
    kind = shared.haystack or "noise"
    if kind in ("needles", "noise-paragraphs"):
        raise UsageError(f"task vt takes a noise or essay haystack, not {kind}")
    names: list[str] = []
    while len(names) < 5:
        name = "".join(rng.choices(string.ascii_uppercase, k=5))
        if name not in names:
            names.append(name)
    value = str(rng.randint(10000, 99999))
    chain = [f"VAR {names[0]} = {value}"]
    chain += [f"VAR {later} = VAR {earlier}" for earlier, later in itertools.pairwise(names)]
    spots = sorted(rng.random() for _ in chain)  # sorted: each variable is set before use

    def render(size: int) -> str:
        sentences = noise_sentences(size) if kind == "noise" else shared.essay.sentences(size)
        lines = lines_of(sentences)
        at = [(int(f * (len(lines) + 1)), s) for f, s in zip(spots, chain, strict=True)]
        return "\n".join(insert_at(lines, at))

    question = (
        "Track the chain(s) of variable assignment in the text above. Find all variables "
        f"that are assigned the value {value} in the text above."
    )
    meta = {"haystack": kind, "depths": spots, "value": value}
    return Draft(question, names, render, meta)


def _cwe_draft(shared: Shared, rng: random.Random, index: int) -> Draft:
    """Common words extraction: a numbered list where 10 words repeat 30 times and the rest
    3 times (6 and 1 below 4096 tokens, as RULER); the answer is the 10 common words."""
    singles, compounds = shared.cwe_words
    single_order = LazyShuffle(len(singles), random.Random(rng.getrandbits(64)))
    compound_order = LazyShuffle(len(compounds), random.Random(rng.getrandbits(64)))

    def word(i: int) -> str:  # a seeded order of the real words, then of the compounds
        if i < len(singles):
            return singles[single_order[i]]
        return compounds[compound_order[i - len(singles)]]

    common = [word(i) for i in range(10)]
    common_repeats, rare_repeats = (30, 3) if shared.target >= 4096 else (6, 1)
    shuffle_seed = rng.getrandbits(64)

    def render(size: int) -> str:
        rare = [word(10 + i) for i in range(size)]
        words = common * common_repeats + rare * rare_repeats
        random.Random(shuffle_seed).shuffle(words)
        return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words))

    question = "What are the 10 most common words in the above list?"
    return Draft(
        question,
        common,
        render,
        {"repeats": [common_repeats, rare_repeats]},
        limit=len(singles) + len(compounds) - 10,
    )


def _fwe_draft(shared: Shared, rng: random.Random, index: int) -> Draft:
    """Frequent words extraction: coded 6-letter words with Zipf (alpha 2) counts over a
    vocabulary of ``target // 50``; rank 1 is the noise word "...", ranks 2-4 are the answer."""
    vocab = ["..."]
    while len(vocab) < max(10, shared.target // 50):
        word = "".join(rng.choices(string.ascii_lowercase, k=6))
        if word not in vocab:
            vocab.append(word)
    shuffle_seed = rng.getrandbits(64)

    def render(size: int) -> str:
        words = [w for rank, w in enumerate(vocab, 1) for _ in range(_zipf(size, rank))]
        random.Random(shuffle_seed).shuffle(words)
        return " ".join(words)

    question = (
        "Ignore the dots '....'. What are the three most frequently appeared coded words "
        "in the above coded text?"
    )
    return Draft(question, vocab[1:4], render, {"vocab_size": len(vocab)})


def _zipf(size: int, rank: int) -> int:
    return int(size * rank**-2 / _ZETA_2)


def _qa_draft(shared: Shared, rng: random.Random, index: int) -> Draft:
    """HotpotQA question ``index`` with its own paragraphs among other questions' ones; the
    size is the number of distractor words, so the last distractor may be cut short."""
    questions, pool = shared.hotpot
    if index >= len(questions):
        raise UsageError(f"qa sample {index} needs hotpotqa record {index}; got {len(questions)}")
    q = questions[index]
    picker = DocumentPicker(q, pool, f"ruler-qa:{shared.seed}:{q.id}")
    starts = [0]  # starts[j]: distractor words before distractor j

    def locate(size: int) -> tuple[int, int]:
        while starts[-1] < size and len(starts) <= picker.capacity:
            starts.append(starts[-1] + len(picker.distractor(len(starts) - 1).text.split()))
        k = bisect_right(starts, size) - 1
        return k, size - starts[k]

    def documents(size: int) -> list[Paragraph]:
        k, cut = locate(size)
        return picker.documents(k, cut_words=cut)

    def render(size: int) -> str:
        return render_documents(documents(size))

    def size_meta(size: int) -> dict[str, Any]:
        docs = documents(size)
        gold = [i + 1 for i, p in enumerate(docs) if p.title in q.gold_titles]
        return {"docs": len(docs), "gold_documents": gold}

    own_titles = {p.title for p in q.paragraphs}
    limit = sum(len(p.text.split()) for p in pool if p.title not in own_titles)
    meta = {"source_id": q.id, "gold_titles": list(q.gold_titles)}
    return Draft(q.question, [q.answer], render, meta, "qa", limit, size_meta)


_DRAFTS: dict[str, Callable[[Shared, random.Random, int], Draft]] = {
    "vt": _vt_draft,
    "cwe": _cwe_draft,
    "fwe": _fwe_draft,
    "qa": _qa_draft,
}
