"""Ranking: the typed recall config, candidate pools, fixed-weight and learned fusion, and
the :class:`~memofs.ranking.recall.Recaller` that runs the whole pipeline for one query."""
