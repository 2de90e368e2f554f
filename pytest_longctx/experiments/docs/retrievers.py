"""The RAG arm's retrievers: maintained sparse (``bm25s``) and dense (``wordllama``) retrieval, their fusion, and a
user's own through the ``pytest_longctx_retriever`` hook.

``--longctx-docs-retriever``:

* ``bm25``: Okapi BM25 (Lucene's variant, k1 1.5, b 0.75) from ``bm25s``, over the chunks of the trial's context,
  on :func:`~.retrieval.terms` (stopwords dropped, plurals folded).
* ``dense``: cosine similarity of ``wordllama``'s static embeddings (its bundled 256-dimensional ``l2_supercat``
  model, 16 MB, loaded from the wheel with downloads disabled: no network, ever). A chunk is embedded once a
  session.
* ``hybrid`` (the longctx protocol's default): reciprocal rank fusion (Cormack et al. 2009, k = 60) of the two
  full rankings: a word-embedding model alone misses rare names that BM25 finds, and BM25 alone misses paraphrased
  questions (the low-overlap condition), so the fused arm is the fairer opponent for long context.
* any other name: the retriever a ``pytest_longctx_retriever`` hook returns for it (a user's Chroma or LanceDB
  collection), given plain passages ``{"id", "doc", "text"}`` and returning passage ids, best first.

Every ranking breaks ties by the chunk's place in the context, so a run is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs.retrieval import Chunk, terms

if TYPE_CHECKING:
    import numpy as np

BUILT_IN = ("bm25", "dense", "hybrid")
#: Reciprocal rank fusion's constant (Cormack, Clarke and Buettcher 2009).
RRF_K = 60
#: What a user's retriever is: (question, passages as {"id", "doc", "text"}, k) -> passage ids, best first.
UserRetriever = Callable[[str, list[dict[str, str]], int], Sequence[str]]


class Retriever(Protocol):
    """Ranks a context's chunks for a question."""

    name: str

    def rank(self, question: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        """The ``k`` best chunks for ``question``, best first."""
        ...


def _order(scores: Sequence[float]) -> list[int]:
    """Indices by score, best first; ties keep the context's order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


class SparseRetriever:
    """BM25 from ``bm25s`` over the chunks of one context (the index is the context's: idf as the context has it)."""

    name = "bm25"

    def order(self, question: str, chunks: Sequence[Chunk]) -> list[int]:
        import bm25s

        corpus = [terms(c.text) or ["\x00"] for c in chunks]  # bm25s refuses an empty document
        index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        index.index(corpus, show_progress=False)
        query = [t for t in terms(question) if t in index.vocab_dict]
        if not query:
            return list(range(len(chunks)))
        return _order([float(s) for s in index.get_scores(query)])

    def rank(self, question: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        return [chunks[i] for i in self.order(question, chunks)[:k]]


class DenseRetriever:
    """Cosine similarity of ``wordllama`` embeddings; chunk embeddings cached by chunk id for the session."""

    name = "dense"

    def __init__(self) -> None:
        self._model: Any = None
        self._cache: dict[str, np.ndarray] = {}

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_wordllama()
        return self._model

    def _embed(self, chunks: Sequence[Chunk]) -> np.ndarray:
        import numpy as np

        new = [c for c in chunks if c.id not in self._cache]
        if new:
            for chunk, vector in zip(new, self.model.embed([c.text for c in new], norm=True), strict=True):
                self._cache[chunk.id] = np.asarray(vector, dtype=np.float32)
        return np.stack([self._cache[c.id] for c in chunks])

    def order(self, question: str, chunks: Sequence[Chunk]) -> list[int]:
        if not chunks:
            return []
        query = self.model.embed([question], norm=True)[0]
        return _order([round(float(s), 6) for s in self._embed(chunks) @ query])

    def rank(self, question: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        return [chunks[i] for i in self.order(question, chunks)[:k]]


def load_wordllama() -> Any:
    """wordllama's default model from the files inside its wheel (its own lookup misses the bundled tokenizer and
    would download it): ``cache_dir`` is the package folder and downloads are off."""
    import wordllama

    try:
        return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    except FileNotFoundError as exc:
        raise UsageError(f"--longctx-docs-retriever dense: wordllama's bundled model is missing ({exc}); "
                         "reinstall it (pip install --force-reinstall wordllama==0.4.0.post1)") from None


def fuse(rankings: Sequence[Sequence[int]], n: int) -> list[int]:
    """Reciprocal rank fusion of full rankings of ``n`` items: score 1/(RRF_K + rank), summed; ties by index."""
    score = [0.0] * n
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            score[i] += 1.0 / (RRF_K + rank)
    return _order(score)


class HybridRetriever:
    """:class:`SparseRetriever` and :class:`DenseRetriever` fused by reciprocal rank."""

    name = "hybrid"

    def __init__(self, dense: DenseRetriever | None = None) -> None:
        self.sparse, self.dense = SparseRetriever(), dense or DenseRetriever()

    def rank(self, question: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        fused = fuse([self.sparse.order(question, chunks), self.dense.order(question, chunks)], len(chunks))
        return [chunks[i] for i in fused[:k]]


class HookRetriever:
    """A user's retriever (from the ``pytest_longctx_retriever`` hook) behind the same interface."""

    def __init__(self, name: str, function: UserRetriever) -> None:
        self.name, self.function = name, function

    def rank(self, question: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        by_id = {c.id: c for c in chunks}
        passages = [{"id": c.id, "doc": c.doc, "text": c.text} for c in chunks]
        ids = list(self.function(question, passages, k))
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise ValueError(f"retriever {self.name!r} returned ids not among the passages it was given: "
                             f"{unknown[:3]}")
        return [by_id[i] for i in ids[:k]]


def make_retriever(name: str, hooked: UserRetriever | None = None) -> Retriever:
    """The retriever ``--longctx-docs-retriever`` names (``hooked``: what the hook returned for ``name``)."""
    if hooked is not None:
        return HookRetriever(name, hooked)
    if name == "bm25":
        return SparseRetriever()
    if name == "dense":
        return DenseRetriever()
    if name == "hybrid":
        return HybridRetriever()
    raise UsageError(f"--longctx-docs-retriever: no retriever {name!r}; use bm25, dense or hybrid, or return one "
                     "for this name from a pytest_longctx_retriever hook in your conftest.py")
