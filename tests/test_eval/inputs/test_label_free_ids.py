"""Label-free ids (issue 22): renaming every source id (LongMemEval session ids, LoCoMo
dia_ids, BEIR/TREC document ids) leaves every figure of a harness run unchanged.

Rankings break ties by memory id, so a loader that builds ids from source ids lets a
benchmark's labels (LongMemEval names answer sessions ``answer_...``) reach the ranking.
Each fixture, written here, holds a relevant memory and a distractor with the *same text*,
so their order is decided by the tie-break alone: with source-derived ids, a renaming that
reverses their id order changes nDCG and the test fails (checked against the previous loaders).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from memofs_datasets.locomo import evidence_ids
from memofs_eval.experiments.experiment import results_table, run_experiment
from memofs_eval.inputs.spec import load_spec

SEEDS = (0, 2)  # between them, every tie of the fixtures is reversed by one renaming


def _rename(seed: int) -> Callable[[str], str]:
    """A seeded injective renaming to neutral hex names (no ``D<s>:<t>`` shape, no ``answer_``)."""
    salt = random.Random(seed).getrandbits(64)
    return lambda old: "x" + hashlib.sha256(f"{salt}:{old}".encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- fixtures


def _lme(rename: Callable[[str], str] | None) -> list[dict]:
    r = rename or (lambda s: s)

    def turn(role: str, content: str, has: bool | None = None) -> dict:
        return {"role": role, "content": content, **({} if has is None else {"has_answer": has})}

    same = [turn("user", "I drive a blue Civic to work"), turn("assistant", "nice car")]
    items = []
    for n, (distractor, answer) in enumerate((("s_000", "answer_zz1"), ("zz_999", "answer_aa2"))):
        sids = [distractor, answer, f"filler_{n}"]
        items.append({
            "question_id": f"q{n}", "question_type": "single-session-user", "question": "What car do I drive to work?",
            "answer": "a blue Civic", "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_session_ids": [r(s) for s in sids],
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 3,  # same date: recency cannot separate them
            "haystack_sessions": [same, [turn("user", "I drive a blue Civic to work", True), turn("assistant", "nice car")],
                                  [turn("user", "the weather is grey"), turn("assistant", "bring a coat")]],
            "answer_session_ids": [r(answer)]})
    return items


def _locomo(rename: Callable[[str], str] | None) -> list[dict]:
    r = rename or (lambda s: s)
    turns1 = [("Ana", "D1:1", "I adopted a cat named Miso."), ("Ben", "D1:2", "I adopted a cat named Miso."),
              ("Ana", "D1:3", "The weather is grey today.")]
    turns2 = [("Ben", "D2:1", "I start a pottery class on Friday."), ("Ana", "D2:2", "I start a pottery class on Friday.")]

    def ev(entries: list[str]) -> list[str]:
        # every D<s>:<t> inside an entry renamed; an id no turn has stays as it is (still unmatched)
        known = {d for _, d, _ in turns1 + turns2}
        return [r(d) if d in known else d for e in entries for d in (evidence_ids(e) or [e])]

    conv = {"speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": r(d), "text": t} for s, d, t in turns1],
            "session_2": [{"speaker": s, "dia_id": r(d), "text": t} for s, d, t in turns2]}
    qa = [{"question": "What cat did someone adopt?", "answer": "Miso", "evidence": ev(["D1:2"]), "category": 1},
          {"question": "When is the pottery class?", "answer": "Friday", "evidence": ev(["D2:1"]), "category": 2},
          {"question": "Who adopted a cat and takes pottery?", "answer": "?", "evidence": ev(["D1:1; D2:2", "D9:9"]),
           "category": 3}]
    # two conversations: the harness's grouped folds need two scopes
    return [{"sample_id": f"conv-{n}", "conversation": conv, "qa": qa, "observation": {}, "session_summary": {},
             "event_summary": {}} for n in (1, 2)]


def _docs(rename: Callable[[str], str] | None) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, int]]]:
    """Corpus (id, text) and judgements (qid, doc, grade) shared by the BEIR and TREC fixtures."""
    r = rename or (lambda s: s)
    docs = [("zeta", "Cats purr when content."), ("alpha", "Cats purr when content."), ("mid", "Dogs bark at night."),
            ("beta", "Dogs bark at night."), ("gamma", "Fish swim in schools.")]
    qrels = [("1", "alpha", 1), ("2", "mid", 2), ("2", "gamma", 1)]
    return [(r(d), t) for d, t in docs], [(q, r(d), g) for q, d, g in qrels]


def _write(kind: str, root: Path, rename: Callable[[str], str] | None) -> tuple[Path, str]:
    root.mkdir(parents=True)
    if kind == "longmemeval":
        (root / "longmemeval_s.json").write_text(json.dumps(_lme(rename)))
        return root / "longmemeval_s.json", 'options = { granularity = "turn" }'
    if kind == "longmemeval-session":
        (root / "longmemeval_s.json").write_text(json.dumps(_lme(rename)))
        return root / "longmemeval_s.json", ""
    if kind == "locomo":
        (root / "locomo10.json").write_text(json.dumps(_locomo(rename)))
        return root, ""
    docs, qrels = _docs(rename)
    queries = [("1", "why do cats purr"), ("2", "do dogs bark at night")]
    if kind == "beir":
        (root / "qrels").mkdir()
        (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs))
        (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries))
        (root / "qrels" / "test.tsv").write_text("".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
        return root, ""
    (root / "corpus").write_text("".join(json.dumps({"docno": d, "text": t}) + "\n" for d, t in docs))
    (root / "topics").write_text("".join(f"{q}\t{t}\n" for q, t in queries))
    (root / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))
    return root, ""


def _results(kind: str, root: Path, rename: Callable[[str], str] | None) -> pd.DataFrame:
    path, extra = _write(kind, root / "data", rename)
    loader = "longmemeval" if kind.startswith("longmemeval") else kind
    spec = root / "spec.toml"
    spec.write_text(f"""
name = "rename"
seed = 3
k = 10
embedder = "none"
workers = 1
metrics = ["ndcg@10", "mrr@10", "recall@1", "precision@1"]
headline = ["ndcg@10"]

[[datasets]]
name = "d"
path = "{path.as_posix()}"
loader = "{loader}"
{extra}

[baselines]
methods = ["bm25s"]

[ablations]
toggles = ["fuzzy"]

[stats]
n_permutations = 20
bootstrap = 20
""")
    exp = run_experiment(load_spec(spec), progress=False, cache_root=root / "cache")
    res = results_table(exp)
    return res.drop(columns=["config_hash"]).sort_values(list(res.columns.drop(["score", "config_hash"]))).reset_index(drop=True)


@pytest.mark.parametrize("kind", ["longmemeval", "longmemeval-session", "locomo", "beir", "trec"])
def test_renaming_source_ids_changes_no_metric(kind: str, tmp_path: Path) -> None:
    plain = _results(kind, tmp_path / "plain", None)
    assert len(plain) and plain["n_queries"].min() >= 1
    for seed in SEEDS:
        renamed = _results(kind, tmp_path / f"renamed{seed}", _rename(seed))
        pd.testing.assert_frame_equal(plain, renamed, obj=f"{kind} renamed with seed {seed}")


def test_fixture_ties_are_decided_by_the_id_order() -> None:
    """The property test bites only if a renaming can reverse the tie: across the seeds, the
    relevant twin's renamed id sorts both before and after its distractor's (LongMemEval)."""
    orders = set()
    for seed in SEEDS:
        r = _rename(seed)
        orders.add(r("answer_zz1") < r("s_000"))
    assert orders == {True, False}
