"""ReMemR1's memory history and the recall search over it (ALGORITHMS.md section 2).

The history is an ordered list of ``(step, memory)`` entries: the memory each step wrote, labelled
with that step. The reference kept a set, which lost the order and the step ids; here the order is
the reading order and ties in score go to the earlier step.

``MemoryHistory`` is the protocol the agent talks to, so another retriever (BM25, embeddings) can
be plugged in; ``TfidfHistory`` is the reference's TF-IDF cosine, with a similarity threshold
added so that a query matching nothing recalls nothing.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

# Cosine below this recalls nothing: TF-IDF scores of unrelated texts sit near 0, and a recall
# of an unrelated memory only spends prompt tokens and misleads the model.
DEFAULT_THRESHOLD = 0.1
# Scores equal to this many decimals count as ties (identical texts can differ in the last bit).
_TIE_DECIMALS = 9


class RecallHit(NamedTuple):
    """One recalled memory: the step that wrote it, its text, and its similarity to the query."""

    step: int
    memory: str
    score: float


class MemoryHistory(Protocol):
    """An ordered store of earlier memories that can be searched with a free-text query."""

    def add(self, step: int, memory: str) -> bool:
        """Append the memory ``step`` wrote; return False when it was not stored (a duplicate)."""
        ...

    def search(
        self, query: str, top_k: int = 1, threshold: float = DEFAULT_THRESHOLD
    ) -> list[RecallHit]:
        """At most ``top_k`` entries scoring at least ``threshold``, best first."""
        ...

    def __len__(self) -> int: ...


class TfidfHistory:
    """Memory history ranked by TF-IDF cosine, the vectorizer fitted on the history per query.

    Fitting per query keeps the IDF weights in step with the history as it grows; the history
    holds one entry per chunk at most (a few hundred for a million-token document), so a fit
    costs milliseconds.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[int, str]] = []

    @property
    def entries(self) -> list[tuple[int, str]]:
        """A copy of the ``(step, memory)`` entries, in the order they were added."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, step: int, memory: str) -> bool:
        """Append ``memory`` under ``step``. An exact duplicate of a stored memory is skipped
        (the model often copies its memory unchanged, and copies would fill the top-k slots
        with one text); the stored entry keeps the step that first wrote it."""
        if self._entries and step <= self._entries[-1][0]:
            raise ValueError(f"step {step} added after step {self._entries[-1][0]}")
        if any(memory == stored for _, stored in self._entries):
            return False
        self._entries.append((step, memory))
        return True

    def search(
        self, query: str, top_k: int = 1, threshold: float = DEFAULT_THRESHOLD
    ) -> list[RecallHit]:
        """The ``top_k`` best entries by cosine with ``query``, highest score first and the
        earlier step first on ties. An entry sharing no word with the query never counts, even
        at threshold 0; an empty history, query or vocabulary gives no hit."""
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if not self._entries or not query.strip():
            return []
        scores = _tfidf_cosine(query, [memory for _, memory in self._entries])
        hits = [
            RecallHit(step, memory, score)
            for (step, memory), score in zip(self._entries, scores, strict=True)
            if score > 0.0 and score >= threshold
        ]
        hits.sort(key=lambda hit: (-round(hit.score, _TIE_DECIMALS), hit.step))
        return hits[:top_k]


def _tfidf_cosine(query: str, documents: list[str]) -> list[float]:
    """Cosine of ``query`` with each document in a TF-IDF space fitted on the documents."""
    # Imported here: scikit-learn takes a second to import and only ReMemR1 runs need it.
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer()
    try:
        matrix = vectorizer.fit_transform(documents)
    except ValueError:  # empty vocabulary: no document holds a word of two or more characters
        return [0.0] * len(documents)
    # Rows are L2-normalised, so the dot product is the cosine.
    scores = matrix @ vectorizer.transform([query]).T
    return [float(score) for score in scores.toarray().ravel()]
