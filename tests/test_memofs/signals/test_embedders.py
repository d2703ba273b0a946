"""Embedders against independent truth: sentence-transformers itself, model2vec's
StaticModel, scikit-learn's pipeline, hand computations; and the zero-key tiers."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memofs.signals.embedders import EmbedderError, LocalEmbedder, LSAEmbedder, SafeEmbedder, StaticEmbedder, select_embedder
from memofs.signals.embedders.base import l2_normalise
from memofs.signals.embedders.local import default_model_path
from support import REPO_ROOT

SENTENCES = [
    "We decided to use D1 for tenant metadata because of edge latency.",
    "PgBouncer keeps PostgreSQL connection limits under control.",
    "JWT tokens are used for stateless authentication with 24-hour expiry.",
    "How do we handle user sessions?",
    "The quarterly report is due on Friday.",
    "Café owners in Zürich prefer oat milk.",
]


@pytest.fixture(scope="module")
def reference_st():
    """An independent SentenceTransformer instance on the bundled weights."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(default_model_path()), device="cpu")


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.mark.slow  # loads the real MiniLM twice (ours and sentence-transformers)
def test_minilm_matches_sentence_transformers(local, reference_st, real_sentences):
    texts = SENTENCES + real_sentences[:58]
    ours = local.encode(texts)
    ref = reference_st.encode(texts, normalize_embeddings=True, batch_size=32)
    assert ours.dtype == np.float32 and ours.shape == (len(texts), 384)
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert local.name == "sentence-transformers/all-MiniLM-L6-v2" and local.dim == 384


@pytest.mark.slow  # the real MiniLM
def test_minilm_is_mean_pooling_of_token_states(local, reference_st):
    """Recompute pooling by hand from the transformer's token outputs."""
    import torch

    text = SENTENCES[2]
    tok = reference_st.tokenizer(text, return_tensors="pt", truncation=True, max_length=256)
    with torch.inference_mode():
        hidden = reference_st[0].auto_model(**tok).last_hidden_state[0].numpy()
    mean = hidden.mean(axis=0)
    np.testing.assert_allclose(local.encode([text])[0], mean / np.linalg.norm(mean), atol=1e-5)


@pytest.mark.slow  # the real MiniLM
def test_minilm_semantics_and_empty_input(local):
    v = local.encode(SENTENCES)
    sims = v @ v[3]  # "How do we handle user sessions?"
    assert int(np.argmax(np.delete(sims, 3))) == 2  # the JWT/authentication memory
    assert local.encode([]).shape == (0, 384)


@pytest.mark.slow  # the real MiniLM
def test_model_loaded_once_per_process(local):
    assert local.load() is LocalEmbedder().load()


def test_missing_model_path_raises_embedder_error(tmp_path):
    with pytest.raises(EmbedderError, match="Failed to initialize the local embedder"):
        LocalEmbedder(str(tmp_path / "no-such-model")).encode(["x"])


def test_lsa_matches_sklearn_pipeline(real_sentences):
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    corpus = real_sentences[:300]
    lsa = LSAEmbedder(dim=32, seed=0).fit(corpus)
    ref = make_pipeline(TfidfVectorizer(sublinear_tf=True, dtype=np.float32), TruncatedSVD(32, random_state=0)).fit(corpus)
    raw = ref.transform(corpus[:20])
    expected = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    np.testing.assert_allclose(lsa.encode(corpus[:20]), expected, atol=1e-5)
    assert lsa.dim == 32 and lsa.name.startswith("lsa-32-")


def test_lsa_name_hashes_fitted_state(real_sentences):
    a = LSAEmbedder(dim=16).fit(real_sentences[:100])
    b = LSAEmbedder(dim=16).fit(real_sentences[:100])
    c = LSAEmbedder(dim=16).fit(real_sentences[100:200])
    assert a.name == b.name != c.name
    with pytest.raises(EmbedderError):
        LSAEmbedder().encode(["not fitted"])


def test_lsa_unknown_words_give_zero_row(real_sentences):
    lsa = LSAEmbedder(dim=8).fit(real_sentences[:50])
    assert not lsa.encode(["zzqxv qqqzzx"]).any()


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    # model2vec's distillation of the local MiniLM (one to three minutes on 2 cores the first
    # time) is kept in the ignored .cache/
    cache = REPO_ROOT / ".cache" / "memofs" / "static"
    emb = StaticEmbedder(cache_dir=cache)
    emb.load()
    return emb


def test_static_is_model2vec_distill_of_minilm(static):
    from model2vec import StaticModel

    model = static.load()
    assert isinstance(model, StaticModel) and static.dim == 256
    reloaded = StaticModel.from_pretrained(str(static.folder()))  # this build's folder, not an older build's
    ref = reloaded.encode(SENTENCES, normalize=False)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(static.encode(SENTENCES), ref, atol=1e-5)


def test_static_is_mean_of_token_rows(static):
    model = static.load()
    ids = model.tokenize(["oat milk"])[0]
    table = np.asarray(model.embedding, dtype=np.float64)
    mean = table[ids].mean(axis=0)
    np.testing.assert_allclose(static.encode(["oat milk"])[0], mean / np.linalg.norm(mean), atol=1e-3)


def test_static_ranks_like_minilm_on_an_easy_pair(static):
    v = static.encode(["the cat sat on the mat", "a cat is sitting on a mat", "quarterly revenue report"])
    assert v[0] @ v[1] > v[0] @ v[2]


def test_l2_normalise_keeps_zero_rows():
    x = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(x, [[0.6, 0.8], [0.0, 0.0]])


# -- zero-key tiers ------------------------------------------------------------------


def test_tier1_no_keys_gives_local_embedder():
    from memofs.signals.embedders.onnx_minilm import OnnxMiniLMEmbedder

    emb = select_embedder({}, prewarm=False)  # the bundled MiniLM, through ONNX Runtime (issue 38)
    assert isinstance(emb, OnnxMiniLMEmbedder) and emb.name == "sentence-transformers/all-MiniLM-L6-v2"
    emb = select_embedder({"MEMOFS_EMBEDDER": "sentence-transformers"}, prewarm=False)
    assert isinstance(emb, LocalEmbedder) and emb.name == "sentence-transformers/all-MiniLM-L6-v2"


def test_tier1_provider_only_when_asked_and_keyed():
    from memofs.signals.embedders.providers import OpenAIEmbedder, VoyageEmbedder

    local = ("sentence-transformers/all-MiniLM-L6-v2", 384)
    assert (lambda e: (e.name, e.dim))(select_embedder({"OPENAI_API_KEY": "k"}, prewarm=False)) == local
    assert isinstance(select_embedder({"MEMOFS_EMBEDDER": "openai", "OPENAI_API_KEY": "k"}), OpenAIEmbedder)
    assert isinstance(select_embedder({"MEMOFS_EMBEDDER": "voyage", "VOYAGE_API_KEY": "k"}), VoyageEmbedder)
    # asked for cloudflare without an account id -> local
    emb = select_embedder({"MEMOFS_EMBEDDER": "cloudflare", "CLOUDFLARE_API_TOKEN": "t"}, prewarm=False)
    assert (emb.name, emb.dim) == local


def test_disabled_returns_none():
    assert select_embedder({"MEMOFS_EMBEDDER": "none"}) is None
    assert select_embedder({"MEMOFS_LOCAL_EMBEDDINGS": "false"}) is None


def test_tier2_missing_model_gives_none_and_one_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    env = {"MEMOFS_EMBEDDING_MODEL": str(tmp_path / "missing-model")}
    assert select_embedder(env) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "lexical-only" in warnings[0].getMessage()


def test_tier2_broken_weights_give_none(tmp_path, caplog):
    """A model directory whose weights are garbage: the loader really fails."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(default_model_path(), broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    assert select_embedder({"MEMOFS_EMBEDDING_MODEL": str(broken)}) is None
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1


def test_tier2_sentence_transformers_not_installed():
    """In a child process where importing sentence_transformers fails for real."""
    code = (
        "import sys, logging; sys.modules['sentence_transformers'] = None\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from memofs.signals.embedders import select_embedder\n"
        "print('RESULT', select_embedder({'MEMOFS_EMBEDDER': 'sentence-transformers'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RESULT None" in out.stdout, out.stderr
    assert out.stderr.count("WARNING") == 1


class _Failing:
    name, dim = "failing", 3

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        raise EmbedderError("provider is down")


def test_safe_embedder_never_raises_and_warns_once(caplog):
    caplog.set_level(logging.WARNING, logger="memofs.embedders")
    inner = _Failing()
    safe = SafeEmbedder(inner)
    assert safe.encode(["a"]) is None and safe.encode(["b"]) is None
    assert inner.calls == 2 and safe.failures == 2
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert SafeEmbedder(None).encode(["a"]) is None


def test_safe_embedder_passes_vectors_through(tmp_path, caplog):
    lsa = LSAEmbedder(dim=2).fit(["red apple", "green apple", "blue sky"])
    np.testing.assert_array_equal(SafeEmbedder(lsa).encode(["red apple"]), lsa.encode(["red apple"]))
    broken = SafeEmbedder(LocalEmbedder(str(tmp_path / "gone")))
    assert broken.encode(["x"]) is None
