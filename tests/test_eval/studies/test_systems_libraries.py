"""Library systems under test (LanceDB, ChromaDB) end to end on the tiny dataset, offline,
with the harness's LSA vectors (no model load), against brute-force cosine and a naive RRF.
A missing package skips its test with the reason (they are the `systems` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from memofs_datasets.format import bundled_datasets
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.inputs.spec import DatasetRef
from memofs_eval.studies.systems.config import SystemSpec
from memofs_eval.studies.systems.embedding import harness_embedder
from memofs_eval.studies.systems.run import run_in_process

K = 10


@pytest.fixture(scope="module")
def tiny() -> EvalData:
    ref = DatasetRef("tiny", bundled_datasets()["tiny"])
    return EvalData(ref, load(ref))


def brute_cosine(data: EvalData) -> dict[str, list[str]]:
    emb = harness_embedder("lsa", [m.text for m in data.dataset.memories])
    out = {}
    for q in data.queries:
        corpus = data.dataset.corpus_for(q)
        cos = emb.encode([m.text for m in corpus]).astype(np.float64) @ emb.encode([q.text])[0].astype(np.float64)
        out[q.id] = [corpus[i].id for i in np.argsort(-cos, kind="stable")[:K]]
    return out


def run(name: str, adapter: str, options: dict, data: EvalData):
    r = run_in_process(SystemSpec(name, adapter, options), [data], K, 60)[0]
    assert r.failures == {}, r.failures
    assert r.index_bytes and r.n_memories and len(r.recall_s) == len(data.queries)
    return r


def test_chroma_is_exact_cosine_on_a_small_corpus(tiny):
    pytest.importorskip("chromadb", reason="chromadb is not installed (pip install 'memofs[systems]')")
    r = run("chroma", "chroma", {"embedder": "lsa"}, tiny)
    assert r.ranked == brute_cosine(tiny)


def test_lancedb_vector_fts_and_hybrid_rrf(tiny):
    pytest.importorskip("lancedb", reason="lancedb is not installed (pip install 'memofs[systems]')")
    vec = run("lv", "lancedb", {"mode": "vector", "embedder": "lsa"}, tiny)
    assert vec.ranked == brute_cosine(tiny)  # flat search: exact
    fts = run("lf", "lancedb", {"mode": "fts"}, tiny)
    assert any(fts.ranked.values())
    hyb = run("lh", "lancedb", {"mode": "hybrid", "embedder": "lsa"}, tiny)
    for q in tiny.queries:  # LanceDB's RRFReranker: sum over the two lists of 1 / (60 + rank), rank from 1
        naive: dict[str, float] = {}
        for ranked in (vec.ranked[q.id], fts.ranked[q.id]):
            for r, d in enumerate(ranked, start=1):
                naive[d] = naive.get(d, 0.0) + 1.0 / (60 + r)
        got = hyb.scored[q.id]
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        assert {d: pytest.approx(naive[d], abs=1e-6) for d, _ in got} == {d: s for d, s in got}
        best = sorted(naive.values(), reverse=True)[:K]
        assert [s for _, s in got] == pytest.approx(best, abs=1e-6)


def test_a_bad_mode_fails_with_the_field(tiny):
    with pytest.raises(ValueError, match=r"^system 'x': options.mode: expected one of hybrid, vector, fts, got 'bm25'$"):
        SystemSpec("x", "lancedb", {"mode": "bm25"}).build()


@pytest.mark.slow  # mem0 and the real MiniLM
def test_mem0_without_inference_ranks_by_its_own_minilm_cosine(tiny):
    """mem0 (infer=False) on one scope: its ranking is cosine over MiniLM vectors of the texts
    as given, the order of a brute-force cosine with the same local model."""
    import memofs_eval.studies.systems.mem0_system  # noqa: F401  (telemetry off before mem0 loads)

    pytest.importorskip("mem0", reason="mem0ai is not installed (pip install 'memofs[systems]')")
    from memofs.signals.embedders.local import LocalEmbedder

    q0 = tiny.queries[0]
    corpus = tiny.dataset.corpus_for(q0)
    queries = [q for q in tiny.queries if q.scope == q0.scope][:4]
    sut = SystemSpec("mem0", "mem0", {"threshold": 0.0}).build()
    try:
        sut.open(tiny.dataset)
        sut.ingest("a", corpus)
        emb = LocalEmbedder()
        vecs = emb.encode([m.text for m in corpus]).astype(np.float64)
        for q in queries:
            from memofs_eval.studies.systems.base import Ask

            got = sut.recall("a", Ask(q.id, q.text, q.task_type, tiny.dataset.as_of), 5)
            cos = vecs @ emb.encode([q.text])[0].astype(np.float64)
            assert list(got.ids) == [corpus[i].id for i in np.argsort(-cos, kind="stable")[:5]]
            assert list(got.scores) == sorted(got.scores, reverse=True)  # mem0's own score scale
    finally:
        sut.close()
