"""MCP systems under test (memofs_eval.studies.systems.mcp_client, memofs_store): memofs served over
stdio and Streamable HTTP ranks exactly as its library does over the same store; the official
``@modelcontextprotocol/server-memory`` through a declared mapping, against a naive
transcription of its search; the CLI surface."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memofs.store.project import LiveStore, Store, wall_clock
from memofs_datasets.format import bundled_datasets
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.inputs.spec import DatasetRef
from memofs_eval.studies.systems.base import UNSCOPED, Ask
from memofs_eval.studies.systems.config import SystemSpec
from memofs_eval.studies.systems.mcp_client import McpSystem
from memofs_eval.studies.systems.memofs_library import MemofsLibrary
from memofs_eval.studies.systems.memofs_store import MEMOFS, MemofsCli, MemofsMcp, write_store
from memofs_eval.studies.systems.run import run_in_process
from support import REPO_ROOT

REPO = REPO_ROOT
SERVER_MEMORY = REPO / ".cache" / "node" / "node_modules" / ".bin" / "mcp-server-memory"
ENV = {"MEMOFS_EMBEDDER": "none", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def tiny() -> EvalData:
    ref = DatasetRef("tiny", bundled_datasets()["tiny"])
    return EvalData(ref, load(ref))


def scope_of(data: EvalData):
    q = data.queries[0]
    return (UNSCOPED if q.scope is None else q.scope), data.dataset.corpus_for(q), [x for x in data.queries if x.scope == q.scope]


def library_ids(root: Path, text: str, k: int, ids: dict[str, str], now: datetime | None = None,
                task_type: str | None = None) -> list[str]:
    """The library's ranking over the store at ``root`` (at ``now``, default the wall clock)."""
    state = LiveStore(Store.open(root, clock=wall_clock), embedder=None).state()
    return [ids.get(r.id, r.id) for r in state.recaller.recall(text, k, task_type=task_type, now=now or wall_clock())]


def asks(queries):
    now = wall_clock()  # one "now" for them all: a served system starts once at it (--as-of)
    return [Ask(q.id, q.text, q.task_type, now) for q in queries]


def test_memofs_mcp_stdio_ranks_as_the_library(tiny):
    scope, corpus, queries = scope_of(tiny)
    sut = MemofsMcp("memofs-mcp", embedder="none")
    try:
        sut.open(tiny.dataset)
        sut.ingest(scope, corpus)
        root, ids = sut._dirs[scope], sut._ids[scope]
        assert sorted(ids.values()) == sorted(m.id for m in corpus)
        for ask in asks(queries):
            served = sut.recall(scope, ask, 10)
            assert list(served.ids) == library_ids(root, ask.text, 10, ids, ask.now, ask.task_type), ask.id
            assert served.scores is not None and list(served.scores) == sorted(served.scores, reverse=True)
    finally:
        sut.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_generic_mcp_over_streamable_http_maps_server_ids(tiny, tmp_path):
    """The generic adapter on memofs' HTTP server: ingest through memofs.remember (the server
    assigns ids, mapped back through ingest_id_path), recall through memofs.recall; the served
    ranking equals the library's over the store the server wrote."""
    scope, corpus, queries = scope_of(tiny)
    Store.init(tmp_path, clock=wall_clock)
    port = _free_port()
    proc = subprocess.Popen([MEMOFS, "--root", str(tmp_path), "mcp", "--http", f"127.0.0.1:{port}"],
                            env={**os.environ, **ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sut = McpSystem("memofs-http", url=f"http://127.0.0.1:{port}/mcp", ingest_tool="memofs.remember",
                    ingest_arguments={"content": "{text}", "kind": "{kind}"}, ingest_id_path="id",
                    recall_tool="memofs.recall", recall_arguments={"query": "{query}", "limit": "{k}"},
                    result_path="items[*].id", score_path="items[*].score")
    try:
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        sut.ingest(scope, corpus[:12])
        ids = sut._ids[scope]
        assert sorted(ids.values()) == sorted(m.id for m in corpus[:12])
        for ask in asks(queries):
            assert list(sut.recall(scope, ask, 5).ids) == library_ids(tmp_path, ask.text, 5, ids)
    finally:
        sut.close()
        proc.terminate()
        proc.wait(10)


def naive_search(corpus, query: str) -> list[str]:
    """server-memory's search_nodes (dist/index.js searchNodes): entities whose name, type or
    an observation contains the query, case-insensitively, in the order created."""
    q = query.lower()
    return [m.id for m in corpus if q in m.id.lower() or q in "memory" or q in m.text.lower()]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(not SERVER_MEMORY.exists(), reason="@modelcontextprotocol/server-memory is not installed under "
                    ".cache/node (npm install --prefix .cache/node @modelcontextprotocol/server-memory)")
def test_official_server_memory_through_a_declared_mapping(tiny):
    scope, corpus, queries = scope_of(tiny)
    spec = SystemSpec("server-memory", "mcp", {
        "command": str(SERVER_MEMORY), "env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"},
        "ingest_tool": "create_entities",
        "ingest_arguments": {"entities": [{"name": "{id}", "entityType": "memory", "observations": ["{text}"]}]},
        "recall_tool": "search_nodes", "recall_arguments": {"query": "{query}"}, "result_path": "entities[*].name"})
    sut = spec.build()
    try:
        sut.ingest(scope, corpus)
        words = [corpus[0].text.split()[1], corpus[3].text.split()[0].upper(), queries[0].text, "memory"]
        for w in words:
            got = sut.recall(scope, Ask("x", w, "general", wall_clock()), 10).ids
            assert list(got) == naive_search(corpus, w)[:10], w
        assert len(sut.recall(scope, Ask("x", words[0], "general", wall_clock()), 10).ids) >= 1
    finally:
        sut.close()
    run = run_in_process(spec, [tiny], 10, 60)[0]  # the whole dataset, every scope its own server
    assert run.failures == {} and run.n_memories == sum(len(tiny.dataset.corpus_for(q)) for q in
                                                         {q.scope: q for q in tiny.queries}.values())
    for q in tiny.queries:
        assert run.ranked[q.id] == naive_search(tiny.dataset.corpus_for(q), q.text)[:10]


def test_memofs_cli_ranks_as_the_library(tiny):
    scope, corpus, queries = scope_of(tiny)
    sut = MemofsCli("memofs-cli", embedder="none")
    try:
        sut.open(tiny.dataset)
        sut.ingest(scope, corpus)
        for ask in asks(queries[:3]):
            got = sut.recall(scope, ask, 10)
            assert list(got.ids) == library_ids(sut._dirs[scope], ask.text, 10, sut._ids[scope], ask.now,
                                               ask.task_type)
    finally:
        sut.close()


def test_write_store_keeps_dates_and_maps_ids(tiny, tmp_path):
    _, corpus, _ = scope_of(tiny)
    ids = write_store(tmp_path, corpus)
    state = LiveStore(Store.open(tmp_path, clock=wall_clock), embedder=None).state()
    by_id = {ids[i]: m for i, m in state.recaller.memories.items()}
    assert sorted(m.id for m in corpus) == sorted(ids.values())
    for m in corpus:
        assert by_id[m.id].created_at == m.created_at and by_id[m.id].text == m.text and by_id[m.id].kind == m.kind


def test_write_store_stores_the_cached_vectors_the_surfaces_load(tiny, tmp_path, monkeypatch):
    """With an embedder the store holds each memory's vector from the harness's cache, under
    the embedder's name, so a served store loads them instead of encoding every memory; the
    harness's `minilm` carries the name the served MiniLM (ONNX or sentence-transformers) uses."""
    import numpy as np

    from memofs.signals.embedders.local import DEFAULT_NAME
    from memofs.signals.embeddings_file import EmbeddingsFile
    from memofs_eval.runs.embed import make_embedder
    from memofs_eval.studies.systems import embedding

    monkeypatch.setenv("MEMOFS_EVAL_CACHE", str(tmp_path / "cache"))
    _, corpus, _ = scope_of(tiny)
    emb = embedding.harness_embedder("lsa", [m.text for m in tiny.dataset.memories])
    emb.warm([m.text for m in corpus])
    before = embedding.cache_stats()
    (tmp_path / "store").mkdir()
    ids = write_store(tmp_path / "store", corpus, emb)
    assert embedding.cache_stats()["misses"] == before["misses"]  # every vector came from the cache
    records, skipped = EmbeddingsFile(tmp_path / "store" / ".memofs" / "indexes" / "embeddings.jsonl").load(emb.name, emb.dim)
    assert not skipped and len(records) == len(corpus)
    by_text = {m.id: m.text for m in corpus}
    for r in records:
        assert np.array_equal(np.asarray(r.vector, dtype=np.float32), emb.encode([by_text[ids[r.id]]])[0])
    assert make_embedder("minilm").name == DEFAULT_NAME


BASIC_MEMORY = REPO / ".cache" / "basic-memory" / "bin" / "basic-memory"


@pytest.mark.slow  # an external client (basic-memory's own Python 3.12 process, ~12 s); the inner loop keeps the declared mapping through server-memory
def test_basic_memory_through_the_declared_mapping(tiny):
    """basic-memory (`make basic-memory`) over stdio with systems.toml's mapping: offline, its
    full-text search finds each note by the note's own text first, and never names an id
    outside the scope."""
    if not BASIC_MEMORY.exists():
        pytest.skip("basic-memory is not installed (make basic-memory: it needs Python >= 3.12)")
    from memofs_eval.studies.systems.config import load_systems_spec

    spec = next(s for s in load_systems_spec(REPO / "eval" / "specs" / "systems.toml").systems if s.name == "basic-memory")
    scope, corpus, queries = scope_of(tiny)
    sut = spec.build()
    try:
        sut.ingest(scope, corpus[:8])
        for m in corpus[:8]:
            got = sut.recall(scope, Ask("x", m.text, "general", wall_clock()), 5)
            assert got.ids and got.ids[0] == m.id, (m.id, got.ids)
            assert set(got.ids) <= {x.id for x in corpus[:8]}
    finally:
        sut.close()


def test_write_store_leaves_out_blank_memories(tiny, tmp_path):
    import dataclasses

    _, corpus, _ = scope_of(tiny)
    blank = dataclasses.replace(corpus[0], id="blank", text="  ")
    ids = write_store(tmp_path, [blank, *corpus[1:3]])
    assert sorted(ids.values()) == sorted(m.id for m in corpus[1:3])



def test_memofs_mcp_ranks_at_the_harness_now_through_as_of(tiny):
    """Issue 46, item 5: the served system ranks at the harness's "now" (the query's, else the
    dataset's, passed as ``--as-of``) with the query's task type: exactly the library's ranking
    over the store it serves at that "now"; a query asked at another "now" restarts the server
    at it. The truth is the store's own Recaller, asked directly."""
    scope, corpus, queries = scope_of(tiny)
    sut = MemofsMcp("memofs-mcp", embedder="none")
    try:
        sut.open(tiny.dataset)
        sut.ingest(scope, corpus)
        root, ids = sut._dirs[scope], sut._ids[scope]
        later = tiny.dataset.as_of + timedelta(days=400)  # ages (recency, expiry) move: the ranking may too
        got: dict[tuple[str, bool], tuple[str, ...]] = {}
        for at_later in (False, True):  # every query at one "now", then at the other: the server restarts once
            for q in queries:
                now = later if at_later else tiny.dataset.now_for(q)
                served = sut.recall(scope, Ask(q.id, q.text, q.task_type, now), 10)
                assert list(served.ids) == library_ids(root, q.text, 10, ids, now, q.task_type), (q.id, now)
                got[q.id, at_later] = served.ids
        # the clock reached the ranking: a server at one fixed "now" would have failed above
        assert any(got[q.id, False] != got[q.id, True] for q in queries)
    finally:
        sut.close()


def served_and_library(data: EvalData, served, profile: str, max_scopes: int | None = None,
                       max_queries: int | None = None):
    """(query id, served (id, score) ranking, library (id, score) ranking) for every query of
    ``data`` (the first ``max_queries`` of the first ``max_scopes`` scopes), each scope
    ingested by both adapters."""
    lib = MemofsLibrary("memofs-lib", embedder="none", profile=profile)
    lib.open(data.dataset)
    served.open(data.dataset)
    by_scope: dict = {}
    for q in data.queries:
        by_scope.setdefault(q.scope, []).append(q)
    out = []
    try:
        for scope_name, qs in list(by_scope.items())[:max_scopes]:
            scope = UNSCOPED if scope_name is None else scope_name
            corpus = data.dataset.corpus_for(qs[0])
            lib.ingest(scope, corpus)
            served.ingest(scope, corpus)
            for q in qs[:max_queries]:
                ask = Ask(q.id, q.text, q.task_type, data.dataset.now_for(q))
                a, b = served.recall(scope, ask, 10), lib.recall(scope, ask, 10)
                out.append((q.id, list(zip(a.ids, a.scores)), list(zip(b.ids, b.scores))))
    finally:
        served.close()
    return out


@pytest.mark.parametrize("profile", ["reference", "robust"])
def test_memofs_mcp_ranks_as_the_library_adapter(tiny, profile):
    """Issue 46, item 5: the served store holds what the library ranks with (the memories
    imported whole with their ids, entities and recorded anchors, the scope's graph with no
    extracted facts, its source tree, the profile), so ``memofs mcp`` returns the library
    adapter's ranking (the harness's ``default`` for the reference), ids and scores, on every
    query of every scope. tiny has anchors that drifted (a modified and a deleted file),
    entity links and a graph, so each of them is exercised."""
    assert any(m.anchors for m in tiny.dataset.memories) and any(m.metadata.get("entities") for m in tiny.dataset.memories)
    got = served_and_library(tiny, MemofsMcp("memofs-mcp", embedder="none", profile=profile), profile)
    assert len(got) == len(tiny.queries)
    for qid, served, library in got:
        assert served == library, qid


def test_memofs_mcp_ranks_as_the_library_adapter_on_agent_memory():
    """The same on the bundled agent-memory dataset (582 memories with anchors, entities, a
    graph). The served store written as before (memories through ``remember``: new ids, its
    own extracted graph, no anchors or entities) differed from the library on all 311 of these
    rankings (ids and scores), and on 21 of tiny's 22."""
    ref = DatasetRef("agent-memory", bundled_datasets()["agent-memory"])
    data = EvalData(ref, load(ref))
    got = served_and_library(data, MemofsMcp("memofs-mcp", embedder="none"), "reference")
    assert len(got) == len(data.queries)
    assert [qid for qid, served, library in got if served != library] == []


def test_memofs_cli_ranks_as_the_library_adapter(tiny):
    got = served_and_library(tiny, MemofsCli("memofs-cli", embedder="none"), "reference", max_scopes=1, max_queries=4)
    assert len(got) == 4
    for qid, served, library in got:
        assert served == library, qid


def test_served_adapters_refuse_an_unknown_profile():
    from memofs_eval.studies.systems.base import AdapterConfigError

    for cls in (MemofsMcp, MemofsCli):
        with pytest.raises(AdapterConfigError, match="options.profile"):
            cls("x", profile="best")
