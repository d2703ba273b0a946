"""MemoFS hybrid recall: BM25 + fuzzy overlap + vector similarity, fused and reranked."""

from memofs.signals import blas_threads as _blas_threads

_blas_threads.apply()  # before anything imports numpy: OpenBLAS reads it once, at load
__version__ = "0.1.0"
