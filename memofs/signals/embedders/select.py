"""Zero-key embedder selection (spec "Zero-key mode") and the never-raising wrapper.

Tier 1: ``MEMOFS_EMBEDDER`` names a provider (openai | voyage | cloudflare) whose key is
set -> that provider; otherwise the local MiniLM, automatically, with no key: through ONNX
Runtime (:mod:`memofs.signals.embedders.onnx_minilm`, no torch in the process), or through
sentence-transformers when ``MEMOFS_EMBEDDER=sentence-transformers``, when
``MEMOFS_EMBEDDING_MODEL`` names another model, or when the ONNX path cannot load (same
vectors, same name, so stored embeddings serve both).
Tier 2: the local embedder is not installed or fails to load -> one logged warning and
``None``: the caller recalls lexical-only.
``MEMOFS_EMBEDDER=none`` (or ``MEMOFS_LOCAL_EMBEDDINGS=0|false`` without a provider) disables
vectors. ``MEMOFS_EMBEDDING_MODEL`` overrides the local model (path or name).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from memofs.signals.embedders.base import Embedder, EmbedderError

log = logging.getLogger("memofs.embedders")

PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "voyage": ("VOYAGE_API_KEY",),
    "cloudflare": ("CLOUDFLARE_API_TOKEN", "CLOUDFLARE_ACCOUNT_ID"),
}
DISABLED = {"none", "off", "0", "false", "disabled"}


def _provider(choice: str, env: Mapping[str, str]) -> Embedder:
    from memofs.signals.embedders import providers  # late: an HTTP client only when a provider is chosen

    if choice == "openai":
        return providers.OpenAIEmbedder(env=env)
    if choice == "voyage":
        return providers.VoyageEmbedder(env=env)
    return providers.CloudflareEmbedder(env=env)


def select_embedder(env: Mapping[str, str] = os.environ, *, prewarm: bool = True,
                    background: bool = False) -> Embedder | None:
    """The embedder recall should use, or None for lexical-only (never raises).

    With ``prewarm`` the local model is loaded now, so a broken install is detected here
    (tier 2) instead of at the first query. With ``background`` too, the ONNX MiniLM whose
    model file is in place starts loading on a thread instead (a short CLI process reads
    its store meanwhile); if that load fails, the first encode fails and the caller's
    :class:`SafeEmbedder` recalls lexical-only."""
    choice = env.get("MEMOFS_EMBEDDER", "").strip().lower()
    if choice in DISABLED:
        log.info("vector recall disabled by MEMOFS_EMBEDDER=%s", choice)
        return None
    if choice in PROVIDER_KEYS:
        missing = [var for var in PROVIDER_KEYS[choice] if not env.get(var, "").strip()]
        if not missing:
            try:
                return _provider(choice, env)
            except EmbedderError as exc:
                log.warning("provider embedder %s unavailable (%s); using the local embedder", choice, exc)
        else:
            log.warning("MEMOFS_EMBEDDER=%s but %s not set; using the local embedder", choice, ", ".join(missing))
    elif choice not in ("", "local", "minilm", "static", "sentence-transformers"):
        log.warning("unknown MEMOFS_EMBEDDER=%r; using the local embedder", choice)
    if env.get("MEMOFS_LOCAL_EMBEDDINGS", "").strip().lower() in ("0", "false"):
        log.info("local embeddings disabled by MEMOFS_LOCAL_EMBEDDINGS")
        return None
    model = env.get("MEMOFS_EMBEDDING_MODEL", "").strip() or None
    try:
        if choice == "static":
            from memofs.signals.embedders.static import StaticEmbedder

            embedder: Embedder = StaticEmbedder(model)
            if prewarm:
                embedder.load()
        elif model is None and choice != "sentence-transformers":
            embedder = _onnx_or_torch(env, prewarm, background)
        else:
            embedder = _torch_local(model, prewarm)
    except Exception as exc:  # ImportError, EmbedderError, anything a loader throws
        log.warning("local embedder unavailable (%s); recall continues lexical-only", exc)
        return None
    return embedder


def _torch_local(model: str | None, prewarm: bool) -> Embedder:
    from memofs.signals.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(model)
    if prewarm:
        embedder.load()
        _ = embedder.dim
    return embedder


def _onnx_or_torch(env: Mapping[str, str], prewarm: bool, background: bool = False) -> Embedder:
    """The bundled MiniLM through ONNX Runtime (no torch in the process); when onnxruntime
    is missing (a warning) or the model file cannot be built or read (an error naming the
    file and how to rebuild it), the sentence-transformers path (same vectors, same name),
    which may fail in turn (tier 2: lexical-only)."""
    try:
        from memofs.signals.embedders.onnx_minilm import OnnxMiniLMEmbedder

        embedder = OnnxMiniLMEmbedder(env=env)
        if prewarm and background and _runtime_installed() and embedder.model_file().state() == "ok":
            embedder.load_soon()
        elif prewarm:
            embedder.load()  # exports a missing model file, or names what is wrong with it
        return embedder
    except ImportError as exc:  # onnxruntime or tokenizers not installed
        log.warning("%s; trying the sentence-transformers MiniLM", exc)
    except EmbedderError as exc:
        # a missing (and not exportable) or corrupt model file: logged as an error, so a CLI
        # without --verbose shows this one line naming the file and how to rebuild it
        log.error("%s; trying the sentence-transformers MiniLM", exc)
    return _torch_local(None, prewarm)


def _runtime_installed() -> bool:
    """ONNX Runtime and tokenizers importable (found, not imported: the load imports them)."""
    from importlib.util import find_spec

    try:
        return all(find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))
    except (ImportError, ValueError):  # a module entry set to None (import blocked) or without a spec
        return False


class SafeEmbedder:
    """Wraps an embedder so ``encode`` never raises: a failure returns None and logs one
    warning (the first); later failures log at debug level. Each call retries the inner
    embedder, so a transient failure heals by itself."""

    def __init__(self, inner: Embedder | None) -> None:
        self.inner = inner
        self.failures = 0
        self.last_error: BaseException | None = None

    @property
    def name(self) -> str:
        return self.inner.name if self.inner is not None else "none"

    @property
    def available(self) -> bool:
        return self.inner is not None

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32] | None:
        """The inner vectors, or None (lexical-only) when there is no embedder or it failed."""
        if self.inner is None:
            return None
        try:
            return self.inner.encode(texts)
        except Exception as exc:
            self.failures += 1
            self.last_error = exc
            if self.failures == 1:
                log.warning("embedder %s failed (%s); recall continues lexical-only", self.name, exc)
            else:
                log.debug("embedder %s failed again: %s", self.name, exc)
            return None
