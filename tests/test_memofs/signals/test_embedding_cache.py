"""EmbeddingCache: never encodes a text twice, survives restarts, shared by processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embedders import EmbedderError, LSAEmbedder
from memofs.signals.embedding_cache import EmbeddingCache
from support import REPO_ROOT

REPO = REPO_ROOT
CORPUS = ["red apple pie", "green apple tart", "blue sky today", "grey sky rain", "apple orchard in spring"]


class Counting:
    def __init__(self, name_suffix: str = "") -> None:
        self.inner = LSAEmbedder(dim=3).fit(CORPUS)
        self.name, self.dim = self.inner.name + name_suffix, self.inner.dim
        self.seen: list[str] = []

    def encode(self, texts):
        self.seen.extend(texts)
        return self.inner.encode(texts)


def test_hits_misses_and_values(tmp_path):
    emb = Counting()
    cache = EmbeddingCache(tmp_path)
    texts = CORPUS[:3] + [CORPUS[0]]
    out = cache.encode(emb, texts)
    np.testing.assert_array_equal(out, emb.inner.encode(texts))
    assert emb.seen == CORPUS[:3] and (cache.misses, cache.hits) == (3, 1)
    out2 = cache.encode(emb, CORPUS[1:])
    np.testing.assert_array_equal(out2, emb.inner.encode(CORPUS[1:]))
    assert emb.seen == CORPUS[:3] + CORPUS[3:] and (cache.misses, cache.hits) == (5, 3)
    assert cache.encode(emb, []).shape == (0, emb.dim)


def test_survives_restart_and_keys_by_embedder(tmp_path):
    a = Counting()
    EmbeddingCache(tmp_path).encode(a, CORPUS)
    again = Counting()
    cache = EmbeddingCache(tmp_path)
    cache.encode(again, CORPUS)
    assert again.seen == [] and cache.hits == len(CORPUS)
    other = Counting(name_suffix="-other")
    EmbeddingCache(tmp_path).encode(other, CORPUS[:2])
    assert other.seen == CORPUS[:2]  # a different embedder name never reuses vectors


def test_dimension_clash_is_an_error(tmp_path):
    emb = Counting()
    EmbeddingCache(tmp_path).encode(emb, CORPUS[:1])

    class Liar:
        name, dim = emb.name, emb.dim + 1

        def encode(self, texts):
            return np.zeros((len(texts), self.dim), dtype=np.float32)

    with pytest.raises(EmbedderError, match="meta.json"):
        EmbeddingCache(tmp_path).encode(Liar(), ["x"])


CHILD = """
import sys
from memofs.signals.embedders import LSAEmbedder
from memofs.signals.embedding_cache import EmbeddingCache
corpus = {corpus!r}
emb = LSAEmbedder(dim=3).fit(corpus)
cache = EmbeddingCache(sys.argv[1])
for i in range(30):
    cache.encode(emb, [f"{{sys.argv[2]}} text {{i}}", "shared text"])
print(cache.misses, cache.hits)
"""


def test_two_processes_share_one_cache(tmp_path):
    code = CHILD.format(corpus=CORPUS)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), tag], stdout=subprocess.PIPE, text=True, env=env)
             for tag in ("p", "q")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    emb = Counting()
    cache = EmbeddingCache(tmp_path)
    texts = [f"{t} text {i}" for t in "pq" for i in range(30)] + ["shared text"]
    np.testing.assert_array_equal(cache.encode(emb, texts), emb.inner.encode(texts))
    assert emb.seen == [] and cache.hits == len(texts)


def test_interrupted_warm_up_resumes_from_the_last_stored_chunk(tmp_path):
    texts = [f"{w} apple number {i}" for i, w in enumerate(["red", "green", "blue", "grey", "tart", "pie", "sky"])]

    class DiesOnThirdCall(Counting):
        calls = 0

        def encode(self, batch):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("killed mid warm-up")
            return super().encode(batch)

    first = DiesOnThirdCall()
    seen_chunks: list[int] = []
    with pytest.raises(RuntimeError):
        EmbeddingCache(tmp_path).encode(first, texts, chunk=3, on_chunk=seen_chunks.append)
    assert seen_chunks == [3, 3] and first.seen == texts[:6]  # two chunks stored before the failure
    again = Counting()
    cache = EmbeddingCache(tmp_path)
    out = cache.encode(again, texts, chunk=3)
    assert again.seen == texts[6:] and (cache.misses, cache.hits) == (1, 6)  # only the unfinished text
    np.testing.assert_allclose(out, again.inner.encode(texts), rtol=0, atol=1e-6)
