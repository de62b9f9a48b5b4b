"""HotpotQA-style records (also 2WikiMultihopQA): parsing, rendering and distractor picking,
shared by the loader, the RULER-HQA builders and RULER's qa task."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ._haystack import LazyShuffle

DOCUMENT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Paragraph:
    """One Wikipedia paragraph; ``text`` is its sentences joined as the data gives them."""

    title: str
    text: str

    def render(self, number: int) -> str:
        """RULER's document block: ``Document i:\\n<title>\\n<text>``."""
        return f"Document {number}:\n{self.title}\n{self.text}"


@dataclass(frozen=True)
class HotpotQuestion:
    """A parsed HotpotQA record; ``gold_titles`` are the supporting-fact paragraphs."""

    id: str
    question: str
    answer: str
    paragraphs: tuple[Paragraph, ...]
    gold_titles: tuple[str, ...]
    meta: dict[str, Any]


def render_documents(paragraphs: Sequence[Paragraph]) -> str:
    """Paragraphs as numbered documents (from 1) separated by blank lines."""
    return DOCUMENT_SEPARATOR.join(p.render(i + 1) for i, p in enumerate(paragraphs))


def paragraphs_from_context(context: Any, where: str) -> list[Paragraph]:
    """``[[title, [sentences]], ...]`` (official JSON) or ``{"title": [...], "sentences":
    [[...], ...]}`` (the Hugging Face Parquet layout) as paragraphs, in the given order."""
    if isinstance(context, Mapping) and "title" in context and "sentences" in context:
        context = list(zip(context["title"], context["sentences"], strict=False))
    if not isinstance(context, Sequence) or isinstance(context, str):
        raise UsageError(f"{where}: 'context' is not a list of [title, sentences] pairs")
    paragraphs = []
    for item in context:
        if not (isinstance(item, Sequence) and len(item) == 2 and isinstance(item[0], str)):
            raise UsageError(f"{where}: 'context' item {item!r:.60} is not [title, sentences]")
        title, sentences = item
        text = sentences if isinstance(sentences, str) else "".join(map(str, sentences))
        paragraphs.append(Paragraph(title, text))
    return paragraphs


def supporting_facts(facts: Any) -> list[list[Any]]:
    """Supporting facts as ``[[title, sentence_id], ...]`` from either layout."""
    if isinstance(facts, Mapping):
        return [
            [t, i] for t, i in zip(facts.get("title", []), facts.get("sent_id", []), strict=False)
        ]
    return [list(f) for f in facts or []]


def supporting_sentences(context: Any, facts: Sequence[Sequence[Any]]) -> list[str]:
    """The text of each supporting fact ``[title, sentence_id]``, stripped, in the facts'
    order; a fact that points past its paragraph (it happens in HotpotQA) is left out. These
    are the sentences an ideal note-keeper keeps (``train/oracle.py``)."""
    if isinstance(context, Mapping):
        context = list(zip(context["title"], context["sentences"], strict=False))
    by_title = {str(title): sentences for title, sentences in context}
    evidence = []
    for title, index in facts:
        sentences = by_title.get(str(title))
        if isinstance(sentences, str):  # a paragraph given as one string has no sentence ids
            continue
        if sentences is not None and isinstance(index, int) and 0 <= index < len(sentences):
            evidence.append(str(sentences[index]).strip())
    return [s for s in evidence if s]


def parse_hotpot_record(record: Mapping[str, Any], where: str) -> HotpotQuestion:
    """Validate one official HotpotQA record; a missing field is a UsageError at ``where``."""
    for name in ("question", "answer", "context"):
        if name not in record:
            raise UsageError(f"{where}: record has no {name!r} (a HotpotQA record needs it)")
    qid = record.get("_id", record.get("id"))
    if qid is None:
        raise UsageError(f"{where}: record has no '_id' (a HotpotQA record needs it)")
    facts = supporting_facts(record.get("supporting_facts"))
    paragraphs = paragraphs_from_context(record["context"], where)
    gold = tuple(dict.fromkeys(str(f[0]) for f in facts))
    missing = set(gold) - {p.title for p in paragraphs}
    if missing:
        raise UsageError(f"{where}: supporting paragraphs {sorted(missing)} are not in 'context'")
    meta = {"supporting_facts": facts, "evidence": supporting_sentences(record["context"], facts)}
    meta.update({k: record[k] for k in ("type", "level") if k in record})
    return HotpotQuestion(
        id=str(qid),
        question=str(record["question"]),
        answer=str(record["answer"]),
        paragraphs=tuple(_unique_titles(paragraphs)),
        gold_titles=gold,
        meta=meta,
    )


def parse_hotpot_records(records: Sequence[Mapping[str, Any]]) -> list[HotpotQuestion]:
    """All records parsed; errors name the record index."""
    if not records:
        raise UsageError("no HotpotQA records given")
    return [parse_hotpot_record(r, f"HotpotQA record {i}") for i, r in enumerate(records)]


def distractor_pool(questions: Sequence[HotpotQuestion]) -> list[Paragraph]:
    """Every paragraph of every question, one per title (a title is one article: two copies
    would let a gold paragraph appear twice), in first-seen order."""
    pool: dict[str, Paragraph] = {}
    for q in questions:
        for p in q.paragraphs:
            pool.setdefault(p.title, p)
    return list(pool.values())


def _unique_titles(paragraphs: list[Paragraph]) -> list[Paragraph]:
    seen: dict[str, Paragraph] = {}
    for p in paragraphs:
        seen.setdefault(p.title, p)
    return list(seen.values())


class DocumentPicker:
    """A question's own paragraphs plus distractors drawn from other questions, in a seeded
    random order. Distractor ``j`` and every document's place are fixed by the seed alone, so
    the documents for ``k`` distractors are those for ``k - 1`` plus one (lengths can be
    searched) and a set built for N documents equals the one fitted to that size."""

    def __init__(self, question: HotpotQuestion, pool: Sequence[Paragraph], seed: str) -> None:
        self.question = question
        self._own_titles = {p.title for p in question.paragraphs}
        self._pool = pool
        # A lazy shuffle: a long context needs thousands of distractors, not all 60K.
        self._order = LazyShuffle(len(pool), random.Random(f"{seed}:pick"))
        self._next = 0  # pool positions read from the shuffle so far
        self._order_rng = random.Random(f"{seed}:order")
        self._distractors: list[Paragraph] = []
        self._keys = [self._order_rng.random() for _ in question.paragraphs]
        self.capacity = sum(p.title not in self._own_titles for p in pool)

    def distractors(self, k: int) -> list[Paragraph]:
        """The first ``k`` distractors (UsageError when the pool has fewer)."""
        self._draw(k)
        return self._distractors[:k]

    def distractor(self, j: int) -> Paragraph:
        """Distractor ``j`` (from 0)."""
        self._draw(j + 1)
        return self._distractors[j]

    def _draw(self, k: int) -> None:
        if k > self.capacity:
            raise UsageError(
                f"question {self.question.id}: needs {k} distractor paragraphs but the "
                f"records hold only {self.capacity}; pass more records"
            )
        while len(self._distractors) < k:
            p = self._pool[self._order[self._next]]
            self._next += 1
            if p.title not in self._own_titles:
                self._distractors.append(p)
                self._keys.append(self._order_rng.random())

    def documents(
        self, k: int, own: Sequence[Paragraph] | None = None, cut_words: int = 0
    ) -> list[Paragraph]:
        """``own`` (default: all the question's paragraphs) and ``k`` distractors, shuffled;
        with ``cut_words``, distractor ``k`` too, cut to its first ``cut_words`` words."""
        own_set = set(self.question.paragraphs if own is None else own)
        own_keys = self._keys[: len(self.question.paragraphs)]
        keyed = [
            (key, p)
            for key, p in zip(own_keys, self.question.paragraphs, strict=True)
            if p in own_set
        ]
        picked = self.distractors(k)
        if cut_words > 0:
            last = self.distractor(k)
            picked.append(Paragraph(last.title, " ".join(last.text.split()[:cut_words])))
        offset = len(self.question.paragraphs)
        keyed += [(self._keys[offset + j], p) for j, p in enumerate(picked)]
        return [p for _, p in sorted(keyed, key=lambda kp: kp[0])]

    def own_subset(self, size: int, seed: str) -> list[Paragraph]:
        """``size`` of the question's own paragraphs, always keeping the gold ones."""
        gold = [p for p in self.question.paragraphs if p.title in self.question.gold_titles]
        if size < len(gold):
            raise UsageError(
                f"question {self.question.id}: {size} documents cannot hold its "
                f"{len(gold)} supporting paragraphs"
            )
        others = [p for p in self.question.paragraphs if p not in gold]
        return gold + random.Random(f"{seed}:own").sample(others, size - len(gold))


def load_hotpotqa(path: str) -> list[dict[str, Any]]:
    """The records of an official HotpotQA JSON file, each checked to be a question record."""
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read HotpotQA JSON {path}: {exc}") from None
    if not isinstance(records, list) or not records:
        raise UsageError(f"{path} is not a HotpotQA JSON list of questions")
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise UsageError(f"{path}[{i}]: record is a {type(record).__name__}, not an object")
        missing = {"question", "answer", "context"} - set(record)
        if missing:
            raise UsageError(f"{path}[{i}]: record has no {', '.join(sorted(missing))}")
    return records
