"""MemoFS hybrid recall: BM25 + fuzzy overlap + vector similarity, fused and reranked."""

from memofs.signals import numpy_environment as _numpy_environment

_numpy_environment.apply()  # before anything imports numpy: numpy and OpenBLAS read it once, at load
__version__ = "0.1.0"
