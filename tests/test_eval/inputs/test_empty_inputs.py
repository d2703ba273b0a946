"""Generators of corpora, queries and folds fail with a clear error on empty input; none loops."""

from __future__ import annotations

import pytest

from memofs_datasets import shared
from memofs_datasets.texts import bundled_texts
from memofs_eval.bench import corpus as bench_corpus
from memofs_eval.inputs.folds import group_folds, split_folds


def test_corpus_of_nothing_is_an_error_not_a_hang(monkeypatch) -> None:
    monkeypatch.setattr(bench_corpus, "base_texts", lambda: ([], "no source"))
    with pytest.raises(ValueError, match="no source gave no text"):
        bench_corpus.corpus(10)
    assert bench_corpus.corpus(0) == []


def test_queries_need_a_document_with_enough_terms() -> None:
    with pytest.raises(ValueError, match="none of the 2 documents has 3 terms"):
        bench_corpus.queries(["the a", "of"], 5)
    with pytest.raises(ValueError):
        bench_corpus.queries([], 1)
    got = bench_corpus.queries(["alpha beta gamma", "the"], 4)
    assert len(got) == 4 and all(sorted(q) == ["alpha", "beta", "gamma"] for q in got)


def test_folds_of_nothing_are_errors() -> None:
    with pytest.raises(ValueError, match="at least two query groups"):
        group_folds([], {}, 5, 0)
    with pytest.raises(ValueError, match="0 tune, 1 heldout"):
        split_folds({"q1": "heldout"}, ["q1"])
    with pytest.raises(ValueError, match="1 tune, 0 heldout"):
        split_folds({"q1": "tune", "q2": None}, ["q1", "q2"])


def test_learned_folds_of_one_group_are_an_error() -> None:
    from types import SimpleNamespace

    from memofs_eval.studies.learned_lodo import Lab

    bench = SimpleNamespace(qids=["a", "b"], group={"a": "g", "b": "g"}, split={"a": None, "b": None})
    with pytest.raises(ValueError, match="2 queries in 1 group"):
        Lab({"d": bench}).grouped_folds("d")


def test_without_shared_data_the_bench_corpus_uses_bundled_texts(monkeypatch) -> None:
    monkeypatch.setenv(shared.ENV, "off")
    texts, source = bench_corpus.base_texts()
    assert source == "bundled dataset texts" and texts == bundled_texts()
    docs = bench_corpus.corpus(len(texts) + 25, seed=3)
    assert docs[: len(texts)] == texts and len(docs) == len(texts) + 25
    assert all(d.split() and d not in texts for d in docs[len(texts):])  # perturbed copies


def test_shared_resolver_honours_the_switch(monkeypatch, tmp_path) -> None:
    for off in ("off", "none", "0", ""):
        monkeypatch.setenv(shared.ENV, off)
        assert shared.shared_root() is None and shared.locomo_path() is None
    monkeypatch.setenv(shared.ENV, str(tmp_path))
    assert shared.shared_root() == tmp_path.resolve() and shared.locomo_path() is None
    (tmp_path / "datasets" / "locomo").mkdir(parents=True)
    assert shared.locomo_path() == tmp_path / "datasets" / "locomo"
    monkeypatch.setenv(shared.ENV, str(tmp_path / "missing"))
    assert shared.shared_root() is None


def test_bundled_texts_are_the_datasets_own(tmp_path) -> None:
    import json

    from memofs_datasets.format import bundled_datasets

    texts = bundled_texts()
    first = bundled_datasets()["agent-memory"] / "memories.jsonl"
    line = json.loads(first.read_text(encoding="utf-8").splitlines()[0])["text"]
    assert line in texts and len(texts) == len(set(texts)) and all(len(t.split()) >= 4 for t in texts)
