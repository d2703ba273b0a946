"""Embedders for the vector signal: local MiniLM, LSA, static distilled MiniLM, providers."""

from memofs.signals.embedders.base import Embedder, EmbedderError, l2_normalise
from memofs.signals.embedders.local import LocalEmbedder
from memofs.signals.embedders.lsa import LSAEmbedder
from memofs.signals.embedders.providers import CloudflareEmbedder, OpenAIEmbedder, RetryPolicy, VoyageEmbedder
from memofs.signals.embedders.select import SafeEmbedder, select_embedder
from memofs.signals.embedders.static import StaticEmbedder

__all__ = [
    "CloudflareEmbedder",
    "Embedder",
    "EmbedderError",
    "LSAEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "RetryPolicy",
    "SafeEmbedder",
    "StaticEmbedder",
    "VoyageEmbedder",
    "l2_normalise",
    "select_embedder",
]
