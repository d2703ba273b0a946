"""MemoFS hybrid recall: BM25 + fuzzy overlap + vector similarity, fused and reranked."""
__version__ = "0.1.0"
