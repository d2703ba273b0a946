"""A local cross-encoder reranker without torch (issue 46; the spec's reranker fold, and the
write-up's Limitation 3: "a cross-encoder reranker would improve precision ... planned, not shipped").

    enc   = WordPiece([CLS] query [SEP] text [SEP])[:max_length]   (tokenizers, longest-first truncation)
    z     = Head(Encoder(enc))                                     (ONNX Runtime on CPU, one logit)
    score = sigmoid(z) = 1 / (1 + exp(-z))                         (in [0, 1], as the fold's clamp01 wants)

This is what sentence-transformers' ``CrossEncoder.predict`` computes for a one-logit model
(its default activation is the sigmoid), with ONNX Runtime in place of torch: same tokenizer,
same pair truncation (``truncation=True`` is longest-first), same head.

The model is a Hugging Face cross-encoder directory (``config.json``, ``tokenizer.json`` and
either an ONNX graph it ships, ``onnx/model.onnx`` or ``model.onnx``, or ``model.safetensors``).
A directory with only safetensors is exported once, with no network, by the MiniLM path's
exporter (:func:`memofs.signals.embedders.onnx_minilm.export_onnx`, ``head="logits"``) into the
same model cache, under the same lock and digest record.

No PyPI package ships trained cross-encoder weights (issue 46's search of the registry, stated in
its note), so no model is bundled: ``RecallConfig.reranker_model`` or ``$MEMOFS_RERANKER_MODEL``
names the directory. Without one, or with one that cannot load, :meth:`score` raises a one-line
:class:`RerankerError` and recall skips the fold with a warning (upstream: a throwing reranker
skips the fold for every candidate), never failing the recall.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

MODEL_ENV = "MEMOFS_RERANKER_MODEL"
DEFAULT_MAX_LENGTH = 512
"""ms-marco cross-encoders' ``model_max_length``; capped by the model's position embeddings."""


class RerankerError(RuntimeError):
    """A model reranker that cannot score: one line naming the file and what to do."""


def model_dir(configured: str | None, env: Mapping[str, str] = os.environ) -> Path | None:
    """The cross-encoder directory: ``configured`` (``RecallConfig.reranker_model``), else
    ``$MEMOFS_RERANKER_MODEL``, else None."""
    raw = configured if configured else env.get(MODEL_ENV, "").strip()
    return Path(raw).expanduser() if raw else None


def shipped_graph(directory: Path) -> Path | None:
    """The ONNX graph a cross-encoder directory ships, if any (Hugging Face's layout first)."""
    for rel in ("onnx/model.onnx", "model.onnx"):
        if (directory / rel).is_file():
            return directory / rel
    return None


def sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """``1 / (1 + exp(-z))``, written so that neither tail overflows."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


class OnnxCrossEncoder:
    """A cross-encoder (query, text) -> sigmoid(logit) through ONNX Runtime, loaded at the
    first :meth:`score` (a recall that never reranks never loads it).

    ``model``: the model directory (None: ``$MEMOFS_RERANKER_MODEL``). ``max_length``: the
    pair's word-piece budget (default 512, capped by the model's ``max_position_embeddings``).
    Pairs are scored in batches of ``batch_size``, sorted by length (less padding)."""

    scores_corpus = False

    def __init__(self, model: str | Path | None = None, *, max_length: int | None = None, batch_size: int = 32,
                 env: Mapping[str, str] = os.environ) -> None:
        self.directory = model_dir(str(model) if model is not None else None, env)
        self.name = f"cross-encoder:{self.directory.name if self.directory else 'none'}"
        self.requested_max_length = max_length
        self.batch_size = batch_size
        self.env = env
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def _fail(self, why: str) -> RerankerError:
        where = f" {self.directory}" if self.directory is not None else ""
        return RerankerError(f"cross-encoder reranker{where}: {why}")

    def load(self) -> Any:
        """Tokenizer and session, once; raises a one-line :class:`RerankerError`."""
        with self._lock:
            if self._session is None:
                self._load_now()
            return self._session

    def check(self) -> int:
        """The model directory's position-embedding count, after checking its layout without
        loading anything (a store start reports a misconfigured reranker this way, cheaply);
        raises a one-line :class:`RerankerError`."""
        d = self.directory
        if d is None:
            raise self._fail(f"no model: set RecallConfig.reranker_model or ${MODEL_ENV} to a cross-encoder "
                             "directory (no PyPI package ships one)")
        if not d.is_dir():
            raise self._fail("not a directory")
        try:
            config = json.loads((d / "config.json").read_text(encoding="utf-8"))
            positions = int(config.get("max_position_embeddings", DEFAULT_MAX_LENGTH))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise self._fail(f"config.json: {exc}") from exc
        if not (d / "tokenizer.json").is_file():
            raise self._fail("no tokenizer.json")
        if shipped_graph(d) is None and not (d / "model.safetensors").is_file():
            raise self._fail("neither onnx/model.onnx, model.onnx nor model.safetensors")
        return positions

    def _load_now(self) -> None:
        from memofs.signals.embedders.base import EmbedderError
        from memofs.signals.embedders.onnx_minilm import ModelFile, _session

        positions = self.check()
        d = self.directory
        assert d is not None  # check() refuses a missing one
        graph = shipped_graph(d)
        try:
            if graph is None:
                mf = ModelFile.for_source(d, self.env, stem=f"cross-encoder-{d.name}", head="logits")
                graph = mf.ensure()
            session = _session(graph, "cross-encoder")
        except EmbedderError as exc:
            raise self._fail(str(exc)) from exc
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(d / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001 - a foreign or truncated tokenizer file
            raise self._fail(f"tokenizer.json cannot be read ({type(exc).__name__})") from exc
        max_length = min(self.requested_max_length or DEFAULT_MAX_LENGTH, positions)
        tok.enable_truncation(max_length=max_length, strategy="longest_first")
        pad = tok.token_to_id("[PAD]")
        tok.enable_padding(pad_id=pad if pad is not None else 0, pad_token="[PAD]")
        self.max_length = max_length
        self._inputs = tuple(i.name for i in session.get_inputs())
        self._tokenizer, self._session = tok, session

    def logits(self, query: str, texts: Sequence[str]) -> NDArray[np.float64]:
        """The head's logit of each (query, text) pair (the last one of a multi-logit head)."""
        if not texts:
            return np.zeros(0)
        session = self.load()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros(len(texts), dtype=np.float64)
        try:
            for start in range(0, len(texts), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tokenizer.encode_batch([(query, texts[i]) for i in idx])
                cols = {"input_ids": [e.ids for e in enc], "attention_mask": [e.attention_mask for e in enc],
                        "token_type_ids": [e.type_ids for e in enc]}
                feed = {name: np.array(cols[name], dtype=np.int64) for name in self._inputs}
                z = np.asarray(session.run(None, feed)[0], dtype=np.float64)
                out[idx] = z.reshape(len(idx), -1)[:, -1]
        except Exception as exc:  # noqa: BLE001 - a session that fails mid-run
            raise self._fail(f"scoring failed ({type(exc).__name__}: {exc})") from exc
        return out

    def score(self, query: str, texts: Sequence[str]) -> NDArray[np.float64]:
        """``sigmoid(logit)`` of each (query, text) pair, in [0, 1]."""
        return sigmoid(self.logits(query, [str(t) for t in texts]))
