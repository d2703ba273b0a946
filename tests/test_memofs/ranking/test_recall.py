"""The recall pipeline end to end: the spec's stories, drift on real files, fallbacks."""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memofs.signals.anchors import AnchorPathError, confine
from memofs.ranking.config import RecallConfig
from memofs.graph.entity_graph import EntityGraph
from memofs.ranking.recall import Recaller
from memofs.files.records import Anchor, GraphEdge, GraphNode, Memory
from memofs.signals.rerank import CrossEncoderReranker
from support import HashEmbedder

NOW = datetime(2026, 9, 1, tzinfo=timezone.utc)


def mem(id, text, kind="note", days=10, conf=None, **kw) -> Memory:
    return Memory(id, text, kind, NOW - timedelta(days=days), conf, **kw)


SEED = [
    mem("d1", "Use D1 for tenant metadata (decision rationale: edge latency)", "decision", 14, 0.9),
    mem("pg", "PostgreSQL connection pooling: pgBouncer in transaction mode keeps us under the 100 connection limit", "note", 20),
    mem("sq", "SQLite benchmarks: with WAL mode, reads were 2x faster than the default journal on our laptop fixtures", "note", 10),
    mem("jwt", "JWT tokens are used for stateless authentication with 24-hour expiry", "decision", 40, 0.8),
    mem("ci", "CI runs on GitHub Actions with a matrix of node 18 and 20", "note", 2),
]


@pytest.fixture(scope="module")
def minilm():
    from memofs.signals.embedders.local import LocalEmbedder

    return LocalEmbedder()


def test_seed_scenario_d1_ranks_first_full_pipeline(minilm):
    r = Recaller(embedder=minilm)
    r.add(SEED)
    res = r.recall("What database driver did we pick for tenant metadata?", now=NOW, explain=True)
    assert res[0].id == "d1"
    ex = res[0].explain
    assert ex["weights"]["dynamic"] == "default split" and ex["signals"]["cosine"] is not None
    assert ex["pools"] == {"vector": True, "lexical": True}
    # the same query lexical-only still finds D1 first (BM25's exact-token strength)
    assert Recaller().recall("What database driver did we pick for tenant metadata?", now=NOW) == []
    lex = Recaller()
    lex.add(SEED)
    assert lex.recall("What database driver did we pick for tenant metadata?", now=NOW)[0].id == "d1"


def test_pgbouncer_note_reached_only_through_vectors(minilm):
    # the spec: BM25 misses the pooling note for a "database connection limits" question
    q = "database connection limits"
    lex = Recaller()
    lex.add(SEED)
    lex_frame = lex.signals(q, now=NOW)
    assert lex_frame.bm25[lex_frame.ids.index("pg")] > 0  # "connection", "limits" are shared tokens
    hybrid = Recaller(embedder=minilm)
    hybrid.add(SEED)
    top = [x.id for x in hybrid.recall(q, k=2, now=NOW)]
    assert "pg" in top


def test_spec_rewrite_example_feeds_the_pipeline():
    r = Recaller()
    r.add(SEED)
    rq, _ = r.query_text("login failure", "debug")
    assert rq.text == "Recent errors and bug-fix context login failure authentication auth exception crash stack trace debug issue"
    res = r.recall("login failure", task_type="debug", now=NOW, explain=True)
    assert res[0].id == "jwt"  # "authentication" came from the lexicon, not the user
    assert res[0].explain["query"] == rq.text
    plain = r.recall("login failure", now=NOW, config=RecallConfig(use_rewrite=False, use_lexicon=False))
    assert all(x.id != "jwt" for x in plain)


class FlakyEmbedder:
    """Works while memories are written, then fails at query time."""

    name, dim = "flaky", 4

    def __init__(self):
        self.fail = False

    def encode(self, texts):
        if self.fail:
            raise RuntimeError("model crashed")
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 4)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_embedder_failure_mid_query_falls_back_to_lexical(caplog):
    emb = FlakyEmbedder()
    r = Recaller(embedder=emb)
    r.add(SEED)
    emb.fail = True
    with caplog.at_level(logging.WARNING):
        res = r.recall("tenant metadata", now=NOW, explain=True)
    assert res and res[0].id == "d1"
    assert res[0].explain["weights"]["w_vec"] == 0.0 and res[0].explain["weights"]["w_lex"] == 1.0
    assert sum("lexical-only" in rec.message for rec in caplog.records) == 1


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_anchor_drift_on_real_files(tmp_path):
    (tmp_path / "src").mkdir()
    db = tmp_path / "src" / "db.py"
    db.write_bytes(b"POOL = 10\n")
    gone = tmp_path / "src" / "old.py"
    gone.write_bytes(b"x = 1\n")
    ms = [
        mem("a", "pool size is 10 in src/db.py", "decision", 400, 1.0, anchors=(Anchor("src/db.py", _sha(b"POOL = 10\n")),)),
        mem("b", "pool size lives in the old module", "decision", 400, 1.0, anchors=(Anchor("src/old.py", _sha(b"x = 1\n")),)),
        mem("c", "pool size of the worker is fixed", "decision", 400, 1.0),
    ]
    r = Recaller(anchor_root=tmp_path)
    r.add(ms)
    before = {x.id: x for x in r.recall("pool size", now=NOW, explain=True)}
    assert not any(p["name"] == "stale_anchor" for x in before.values() for p in x.explain["penalties"])
    reads = r.anchors.reads
    r.recall("pool size", now=NOW)
    assert r.anchors.reads == reads  # unchanged files are not re-read
    db.write_bytes(b"POOL = 50\n")
    gone.unlink()
    after = {x.id: x for x in r.recall("pool size", now=NOW, explain=True)}
    for mid, change in (("a", "modified"), ("b", "deleted")):
        pen = [p for p in after[mid].explain["penalties"] if p["name"] == "stale_anchor"]
        assert pen and change in pen[0]["reason"] and pen[0]["factor"] == 0.5
        # 400-day decision anchored to a rewritten file: x 0.5 x 0.6 = x 0.3
        assert after[mid].explain["components"]["penalty_factor"] == pytest.approx(0.3)
    assert after["c"].explain["components"]["penalty_factor"] == pytest.approx(0.6)


def test_anchor_paths_confined(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "proj" / "link").symlink_to(tmp_path / "outside.txt")
    for bad in ("../outside.txt", "/etc/passwd", "link"):
        with pytest.raises(AnchorPathError):
            confine(tmp_path / "proj", bad)


def test_entity_graph_boost_and_retired_nodes():
    g = EntityGraph(
        nodes=[
            GraphNode("concept:oauth", "OAuth", aliases=("oidc",)),
            GraphNode("concept:jwt", "JWT", status="retired"),
            GraphNode("concept:api", "api"),
        ],
        edges=[GraphEdge("concept:api", "concept:oauth", "uses"), GraphEdge("concept:oauth", "concept:jwt", "supersedes")],
    )
    r = Recaller(graph=g)
    r.add(SEED + [mem("oa", "Sign-in goes through the identity provider with OIDC since March", "decision", 20, 0.9)])
    frame = r.signals("oauth", now=NOW)
    assert "graph:concept:oauth" in frame.ids and "graph:concept:jwt" not in frame.ids  # retired: not indexed
    assert [e.node_id for e in frame.entities] == ["concept:oauth"]
    assert "oidc" in frame.query_text  # the entity's alias feeds back into the query
    assert r.recall("oauth", now=NOW)[0].id == "oa"
    assert r.recall("oauth", now=NOW, config=RecallConfig(use_entity_boost=False, use_lexicon=False)) == []
    assert "currently: supersedes JWT" in EntityGraph.render(frame.entities) or "supersedes" in g.entity_state("concept:oauth")


def test_entity_match_switch_reaches_the_query():
    # issue 19: "for" is the only word the D1 question shares with this entity's label
    g = EntityGraph(nodes=[GraphNode("concept:frontend", "Frontend"),
                           GraphNode("concept:rq", "React Query for server state")],
                    edges=[GraphEdge("concept:frontend", "concept:rq", "uses")])
    r = Recaller(graph=g)
    r.add(SEED + [mem("fe", "Frontend uses React Query for server state")])
    q = "What database driver did we pick for tenant metadata?"
    ours = r.signals(q, now=NOW)
    assert ours.entities == () and ours.query_text == q + " db postgres sqlite"
    up = r.signals(q, now=NOW, config=RecallConfig(entity_match="upstream"))
    assert [e.node_id for e in up.entities] == ["concept:rq"] and up.entities[0].matched_term == "for"
    assert up.query_text == q + " db postgres sqlite react query server state"


def test_now_is_injected_never_read():
    r = Recaller()
    r.add(SEED)
    with pytest.raises(ValueError, match="now"):
        r.recall("d1")
    clocked = Recaller(clock=lambda: NOW)
    clocked.add(SEED)
    assert [x.score for x in clocked.recall("tenant")] == [x.score for x in r.recall("tenant", now=NOW)]


def test_determinism_and_add_remove_equal_fresh():
    a = Recaller()
    a.add(SEED + [mem("tmp", "temporary tenant note")])
    a.remove(["tmp"])
    b = Recaller()
    b.add(SEED)
    qa = [(x.id, x.score) for x in a.recall("tenant metadata database", now=NOW)]
    assert qa == [(x.id, x.score) for x in b.recall("tenant metadata database", now=NOW)]


class BrokenReranker:
    name, scores_corpus = "broken", False

    def score(self, query, texts):
        raise RuntimeError("rerank service down")


def test_failing_reranker_never_breaks_recall():
    r = Recaller(reranker=BrokenReranker())
    r.add(SEED)
    res = r.recall("tenant metadata", now=NOW, explain=True)
    assert res[0].id == "d1" and res[0].explain["weights"]["rerank_blend"] == 0.0


def test_cross_encoder_reranker_on_local_weights(minilm):
    # No pretrained cross-encoder ships offline; a CrossEncoder built on the local MiniLM
    # encoder (fresh, seeded head) exercises the real class end to end. Its scores carry no
    # relevance, so only the plumbing is asserted.
    import torch

    torch.manual_seed(0)
    ce = CrossEncoderReranker(str(minilm.model_path()))
    s = ce.score("tenant metadata", ["Use D1 for tenant metadata", "CI on GitHub Actions"])
    assert s.shape == (2,) and np.all((s > 0) & (s < 1))
    r = Recaller(reranker=ce)
    r.add(SEED)
    res = r.recall("tenant metadata", now=NOW, explain=True)
    assert res and res[0].explain["weights"]["rerank_blend"] == 0.5 and res[0].explain["signals"]["rerank"] is not None


def test_signals_match_their_definitions_with_graph_documents_present():
    """Every per-document signal is aligned with its id, whatever order the indexes hold."""
    from memofs.signals.bm25 import BM25Index
    from memofs.signals.rerank import DeterministicFallbackReranker

    g = EntityGraph(nodes=[GraphNode("concept:d1", "D1", aliases=("cloudflare d1",)), GraphNode("concept:pg", "PostgreSQL")])
    r = Recaller(graph=g)  # graph documents are indexed before any memory
    r.add(SEED)
    r.add([mem("late", "tenant metadata moved to a new D1 database", "note", 1)])
    r.remove(["ci"])
    q = "database driver for tenant metadata"
    frame = r.signals(q, now=NOW, config=RecallConfig(use_rewrite=False, use_lexicon=False, use_entity_boost=False))
    texts = {**{m.id: m.text for m in r.memories.values()}, **dict(g.bm25_documents())}
    want_rr = DeterministicFallbackReranker().score(q, [texts[i] for i in frame.ids])
    np.testing.assert_allclose(frame.rerank, want_rr, atol=1e-12)
    fresh = BM25Index()
    fresh.add_many((i, texts[i]) for i in sorted(texts))
    s = fresh.score(q)
    ref = dict(zip(s.ids, s.bm25))
    np.testing.assert_allclose(frame.bm25, [ref[i] for i in frame.ids], atol=1e-12)


def _corpus_with_anchors(tmp_path, n: int = 60) -> tuple[Recaller, list[str]]:
    """A corpus where every fourth memory is anchored (half of those to a changed file),
    a third have no vector, and a graph adds documents: every branch of the pool path."""
    import random

    rng = random.Random(7)
    words = "pool size cache token auth database tenant metadata worker queue retry limit index query latency".split()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_bytes(b"A = 1\n")
    (tmp_path / "src" / "b.py").write_bytes(b"B = 1\n")
    ms = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9)))
        anchors = ()
        if i % 4 == 0:
            name = "a.py" if i % 8 == 0 else "b.py"
            anchors = (Anchor(f"src/{name}", _sha(b"A = 1\n" if name == "a.py" else b"B = 1\n")),)
        ms.append(mem(f"m{i:03d}", text, rng.choice(["note", "decision", "preference"]), rng.randint(0, 500),
                      rng.choice([None, 0.3, 0.9]), anchors=anchors))
    g = EntityGraph(nodes=[GraphNode("concept:cache", "cache"), GraphNode("concept:tenant", "tenant metadata")])
    emb = HashEmbedder(dim=16)
    r = Recaller(graph=g, anchor_root=tmp_path, embedder=emb)
    r.add([m for i, m in enumerate(ms) if i % 3])
    emb.fail = True  # a third of the memories are stored without a vector
    r.add([m for i, m in enumerate(ms) if not i % 3])
    emb.fail = False
    (tmp_path / "src" / "a.py").write_bytes(b"A = 2\n")  # half of the anchors drift
    queries = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(25)] + ["", "zzz unknown"]
    return r, queries


@pytest.mark.parametrize("changes", [{}, {"use_reranker": False}, {"w_vec": 0.0}, {"vector_pool_multiplier": 5.0, "lexical_pool_multiplier": 5.0}])
def test_online_pool_path_equals_fusing_the_full_signal_frame(tmp_path, changes):
    """recall() scores the rerank overlap and the anchor drift for its pool only; the
    harness fuses full frames from signals(). Both must give the same ranking and scores."""
    from memofs.ranking.fusion import fuse

    r, queries = _corpus_with_anchors(tmp_path)
    cfg = RecallConfig(**changes)
    for q in queries:
        online = r.recall(q, k=7, now=NOW, config=cfg)
        frame = r.signals(q, now=NOW, config=cfg)
        full = fuse(frame, cfg, 7)
        assert [x.id for x in online] == full.ids(frame), q
        assert [x.score for x in online] == full.scores.tolist(), q
    assert any(frame.stale) and np.isfinite(frame.rerank).all()


@pytest.mark.parametrize("pattern", ["all", "block after graph", "holes", "permuted", "none"])
def test_cosine_column_aligned_by_id_for_every_layout(pattern):
    """The vector-index scores land on the right documents whether the vector rows form one
    block (block copy) or not (gather)."""
    from memofs.ranking.recall import _CorpusColumns

    rng = np.random.default_rng(3)
    n = 12
    ids = tuple(f"d{i:02d}" for i in range(n))
    rows = {
        "all": np.arange(n), "block after graph": np.r_[[-1, -1, -1], np.arange(n - 3)],
        "holes": np.array([0, -1, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8]), "permuted": rng.permutation(n),
        "none": np.full(n, -1),
    }[pattern].astype(np.int64)
    cols = _CorpusColumns(ids, np.arange(n), np.zeros(n), np.zeros(n), np.zeros(n, np.int64), np.zeros(n, bool), rows, np.zeros(n, bool))
    scores = rng.random(n).astype(np.float32)
    got = cols.cosines(scores)
    want = [float(scores[r]) if r >= 0 else None for r in rows.tolist()]
    assert [None if np.isnan(x) else x for x in got.tolist()] == want


def test_rerank_column_aligned_for_every_lexical_index():
    """Indexes of different (k1, b) can order the same documents differently (an index
    updated in place appends a re-added memory; one built later follows the corpus order):
    the full-frame rerank overlap must follow each frame's own ids."""
    from memofs.signals.rerank import DeterministicFallbackReranker

    g = EntityGraph(nodes=[GraphNode("concept:d1", "D1", aliases=("cloudflare d1",)), GraphNode("concept:pg", "PostgreSQL")])
    r = Recaller(graph=g)
    r.add(SEED)
    q = "tenant metadata database pooling"
    base = RecallConfig(use_rewrite=False, use_lexicon=False, use_entity_boost=False)
    r.signals(q, now=NOW, config=base)  # builds the default index
    r.remove(["d1"])
    r.add([SEED[0]])  # appended to that index; first among the memories for a new one
    texts = {**{m.id: m.text for m in r.memories.values()}, **dict(g.bm25_documents())}
    frames = [r.signals(q, now=NOW, config=base), r.signals(q, now=NOW, config=base.replace(k1=1.5))]
    assert frames[0].ids != frames[1].ids and sorted(frames[0].ids) == sorted(frames[1].ids)
    for f in frames:
        want = DeterministicFallbackReranker().score(q, [texts[i] for i in f.ids])
        assert f.rerank.tolist() == want.tolist()


def test_stemming_reads_snowball_stems_on_both_sides():
    """RecallConfig.stem (issue 46): BM25 over Porter2 stems, checked against a BM25 index fed
    the hand-stemmed texts (stems from the Snowball English definition, written out here)."""
    from memofs.signals.bm25 import BM25Index

    docs = {"a": "Connections pooled by pgBouncer", "b": "connection limit reached", "c": "authentication tokens expire"}
    hand = {"a": ["connect", "pool", "pgbouncer"], "b": ["connect", "limit", "reach"], "c": ["authent", "token", "expir"]}
    q, q_hand = "connecting limits", ["connect", "limit"]
    r = Recaller(RecallConfig(stem=True, use_rewrite=False, use_lexicon=False, use_entity_boost=False))
    r.add([mem(i, t) for i, t in docs.items()])
    frame = r.signals(q, now=NOW)
    ref = BM25Index(tokenizer=lambda text: text.split())
    ref.add_many((i, " ".join(hand[i])) for i in sorted(hand))
    s = ref.score(" ".join(q_hand))
    want = dict(zip(s.ids, s.bm25))
    np.testing.assert_allclose(frame.bm25, [want[i] for i in frame.ids], atol=1e-12)
    # unstemmed, "connecting" matches nothing and "limits" only fuzzily
    plain = Recaller(RecallConfig(use_rewrite=False, use_lexicon=False, use_entity_boost=False))
    plain.add([mem(i, t) for i, t in docs.items()])
    assert plain.signals(q, now=NOW).bm25.max() == 0.0 < frame.bm25.max()
    # a memory added later is stemmed too (the incremental path)
    r.add([mem("d", "limits connected")])
    assert r.recall(q, now=NOW)[0].id == "d"
    assert RecallConfig(stem=True).config_hash() != RecallConfig().config_hash()
    assert RecallConfig().signal_key() == RecallConfig(w_vec=0.1).signal_key() != RecallConfig(stem=True).signal_key()
