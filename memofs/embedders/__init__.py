"""Embedders for the vector signal: local MiniLM, LSA, static distilled MiniLM, providers."""

from memofs.embedders.base import Embedder, EmbedderError, l2_normalise
from memofs.embedders.local import LocalEmbedder
from memofs.embedders.lsa import LSAEmbedder
from memofs.embedders.providers import CloudflareEmbedder, OpenAIEmbedder, RetryPolicy, VoyageEmbedder
from memofs.embedders.select import SafeEmbedder, select_embedder
from memofs.embedders.static import StaticEmbedder

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
