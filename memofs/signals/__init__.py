"""Signals: everything measured per (query, memory) before combination: BM25, fuzzy token
overlap, embedders and vector similarity, the reranker's overlap, code-anchor drift, and the
:class:`~memofs.signals.frame.SignalFrame` that carries them to ranking."""
