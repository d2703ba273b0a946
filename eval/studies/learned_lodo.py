"""Learned fusion that transfers: leave-one-dataset-out (LODO) with nested selection, grouped
CV within each dataset, two model families through one feature code.

* Datasets (:data:`DATASETS`): agent-memory (bundled), LoCoMo and the LongMemEval dev
  sample (shared data; whichever is absent is left out and the report says so).
* Candidates (:class:`Candidate`): the query text the signals are extracted from
  (``rewritten``: the reference settings; ``raw``: ``use_rewrite``, ``use_lexicon`` and
  ``use_entity_boost`` off,
  the query as asked) x a feature set (:data:`memofs.ranking.learned.FEATURE_SETS`) x a model
  family (pairwise logistic, :func:`memofs_eval.studies.learned_training.train`; LambdaMART,
  :func:`memofs_eval.studies.learned_training.train_lambdamart`), their hyperparameters fixed
  a priori in that module.
* Nested selection (:meth:`Lab.select`): for a held-out dataset D the candidate is the one
  whose *worst* inner fold is best (maximin nDCG@10 over the inner leave-one-dataset-out
  folds of the training datasets: train on all but one of them, score the one left out;
  with a single training dataset, over grouped 3-fold CV within it), ties broken by the
  inner mean, then by the space's order. D's scores are never read. The worst fold, not the
  mean, because the goal is a fusion that loses on no unseen dataset: a candidate that wins
  one inner fold by a lot and loses the other is what transfers badly. (This rule replaced
  the inner mean after a run with the mean: see the report.)
* In-distribution figure (:meth:`Lab.grouped_cv_nested`): grouped CV within one dataset
  where every outer fold chooses its candidate from the same space by the mean over 3
  grouped inner folds of its own training queries (the usual CV rule: within one
  distribution there is no unseen dataset to guard against), so no held-out fold is read.
* Training weights: every training dataset weighs the same in total (each query
  ``1 / queries(dataset)``), so LoCoMo's 1.5k questions do not drown the others.
* Scoring uses :func:`memofs.ranking.learned.score` and :func:`~memofs.ranking.learned.rank_order`,
  the online scorer, on cached feature matrices of the reference pools; a test checks the
  result equals :func:`~memofs.ranking.learned.fuse_learned` query by query.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import memofs.ranking.learned as L
from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import FeatureParams, Model, feature_set, rank_order, score
from memofs_eval._env import cache_root
from memofs_eval.inputs.folds import group_folds, leave_one_group_out
from memofs_eval.runs.runner import Ranked
from memofs_eval.studies.learned_bench import Bench, dataset_present, ndcg
from memofs_eval.studies.learned_training import C, Block, query_block, train, train_lambdamart

DATASETS = ("agent-memory", "locomo", "longmemeval")
#: signal settings per query text (changes to the dataset spec's default config)
QUERY_MODES: dict[str, dict[str, bool]] = {"rewritten": {}, "raw": {"use_rewrite": False, "use_lexicon": False, "use_entity_boost": False}}
FAMILIES = ("pairwise-logistic", "lambdamart")
SELECT_FEATURE_SETS = ("portable", "portable+time", "portable+time+trust", "portable+time+context", "all", "ranks", "peers")


@dataclass(frozen=True, order=True)
class Candidate:
    """One configuration of the selection space."""

    query: str
    features: str
    family: str

    @property
    def name(self) -> str:
        return f"{self.family} / {self.features} / {self.query} query"


def candidates(families: Sequence[str] = FAMILIES, sets: Sequence[str] = SELECT_FEATURE_SETS,
               queries: Sequence[str] = tuple(QUERY_MODES)) -> list[Candidate]:
    return [Candidate(q, s, f) for q in queries for s in sets for f in families]


def _code_hash() -> str:
    import memofs.ranking.learned_features as features_module
    import memofs.ranking.learned_model as model_module
    import memofs.ranking.query_cues as cues_module

    # learned fusion's code is four modules since issue 35's split: all of them key the cache
    return hashlib.sha256("".join(inspect.getsource(m) for m in (L, features_module, model_module, cues_module))
                          .encode()).hexdigest()[:12]


class Lab:
    """The benches, their cached feature blocks per query mode, and memoised trainings and runs."""

    def __init__(self, benches: dict[str, Bench], cache: Path | None = None, log: Callable[[str], None] = print,
                 modes: dict[str, dict[str, bool]] | None = None) -> None:
        """``modes``: the query modes a :class:`Candidate`'s ``query`` names (default :data:`QUERY_MODES`)."""
        self.benches = benches
        self.modes = dict(QUERY_MODES if modes is None else modes)
        self.cache = cache or (cache_root() / "learned" / "features")
        self.log = log
        self._blocks: dict[tuple[str, str], dict[str, Block]] = {}
        self._frames: dict[tuple[str, str], dict] = {}
        self._models: dict[tuple, Model] = {}
        self._runs: dict[tuple, Ranked] = {}

    @property
    def names(self) -> list[str]:
        return list(self.benches)

    def config(self, dataset: str, query: str) -> RecallConfig:
        b = self.benches[dataset]
        return b.spec.default_config().replace(**self.modes[query])

    def frames(self, dataset: str, query: str) -> dict:
        key = (dataset, query)
        if key not in self._frames:
            self._frames[key] = self.benches[dataset].frames_of(self.config(dataset, query))
        return self._frames[key]

    def test_qids(self, dataset: str) -> list[str]:
        """Scored queries: agent-memory's heldout split, every query elsewhere."""
        b = self.benches[dataset]
        return [q for q in b.qids if b.split.get(q) in (None, "heldout")]

    def blocks(self, dataset: str, query: str) -> dict[str, Block]:
        """Every query's reference-pool block at ``query``'s signals (cached on disk by
        dataset, signal settings, embedder and the feature code)."""
        key = (dataset, query)
        if key in self._blocks:
            return self._blocks[key]
        b, cfg = self.benches[dataset], self.config(dataset, query)
        tag = hashlib.sha256(repr((dataset, cfg.signal_key(), cfg.config_hash(), b.embedder, L.FEATURES, _code_hash(),
                                   len(b.qids))).encode()).hexdigest()[:16]
        path = self.cache / f"{dataset}-{query}-{tag}.npz"
        frames = self.frames(dataset, query)
        if path.is_file():
            with np.load(path, allow_pickle=False) as z:
                # each ``z[name]`` decompresses the whole array again: read every array once,
                # and copy each block's slices, so a block does not keep the whole array alive
                cols = {name: z[name] for name in ("qids", "bounds", "rows", "vec", "lex", "X", "y")}
            qids = [str(q) for q in cols["qids"]]
            bounds = cols["bounds"]
            out = {}
            for i, q in enumerate(qids):
                s, e = bounds[i], bounds[i + 1]
                member = {"vector_pool": cols["vec"][s:e].copy(), "lexical_pool": cols["lex"][s:e].copy()}
                out[q] = Block(q, cols["rows"][s:e].copy(), member, cols["X"][s:e].copy(), cols["y"][s:e].copy())
        else:
            params = FeatureParams.from_config(cfg)
            out = {q: query_block(q, frames[q], b.qrels.get(q, {}), cfg, params) for q in b.qids}
            qs = list(out)
            bounds = np.cumsum([0] + [len(out[q].y) for q in qs])
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(path, qids=np.array(qs), bounds=bounds, rows=np.concatenate([out[q].rows for q in qs]),
                                vec=np.concatenate([out[q].member["vector_pool"] for q in qs]),
                                lex=np.concatenate([out[q].member["lexical_pool"] for q in qs]),
                                X=np.concatenate([out[q].X for q in qs]), y=np.concatenate([out[q].y for q in qs]))
        self._blocks[key] = out
        return out

    def train(self, cand: Candidate, parts: Sequence[tuple[str, tuple[str, ...]]]) -> Model:
        """A model of ``cand`` trained on ``parts``: (dataset, its training query ids), every
        dataset weighing the same in total."""
        key = (cand, tuple(parts))
        if key in self._models:
            return self._models[key]
        blocks_, weights = [], []
        for ds, qids in parts:
            bl = self.blocks(ds, cand.query)
            blocks_ += [bl[q] for q in qids]
            weights += [1.0 / len(qids)] * len(qids)
        cfg = self.config(parts[0][0], cand.query)
        params = FeatureParams.from_config(cfg)
        names = feature_set(cand.features)
        meta = {"datasets": {ds: len(q) for ds, q in parts}, "query": cand.query, "feature_set": cand.features,
                "query_settings": self.modes[cand.query]}
        if cand.family == "lambdamart":
            m: Model = train_lambdamart(blocks_, names, params, weights, meta)
        else:
            m = train(blocks_, names, C, params, meta=meta, query_weight=weights)
        self._models[key] = m
        return m

    def run(self, model: Model, cand: Candidate, dataset: str, qids: Sequence[str]) -> Ranked:
        """``dataset``'s queries ranked by ``model``: the online scorer on the cached blocks."""
        bl, frames = self.blocks(dataset, cand.query), self.frames(dataset, cand.query)
        cfg = self.config(dataset, cand.query)
        out: Ranked = {}
        for q in qids:
            b, f = bl[q], frames[q]
            order = rank_order(score(model, b.X, cfg).final, f.order_key[b.rows], cfg.top_k)
            out[q] = [f.ids[r] for r in b.rows[order].tolist()]
        return out

    def all_parts(self, datasets: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((d, tuple(self.benches[d].qids)) for d in datasets)

    def transfer(self, cand: Candidate, train_on: Sequence[str], test_on: str, all_queries: bool) -> pd.Series:
        """Per-query nDCG@10 on ``test_on`` of ``cand`` trained on every query of ``train_on``."""
        key = (cand, tuple(train_on), test_on, all_queries)
        if key not in self._runs:
            m = self.train(cand, self.all_parts(train_on))
            qids = self.benches[test_on].qids if all_queries else self.test_qids(test_on)
            self._runs[key] = self.run(m, cand, test_on, qids)
        return ndcg(self.benches[test_on], self._runs[key])

    def inner_folds(self, cand: Candidate, training: Sequence[str]) -> list[float]:
        """The candidate's nDCG@10 on each inner fold of ``training`` datasets only (see the
        module docstring): one per training dataset left out, or 3 grouped folds of one."""
        if len(training) >= 2:
            return [float(self.transfer(cand, [d for d in training if d != t], t, True).mean()) for t in training]
        (d,) = training
        b = self.benches[d]
        scores = []
        for tr, te in group_folds(b.qids, b.group, 3, 42):
            m = self.train(cand, ((d, tuple(tr)),))
            scores.append(float(ndcg(b, self.run(m, cand, d, te)).mean()))
        return scores

    def select(self, training: Sequence[str], space: Sequence[Candidate]) -> tuple[Candidate, dict[str, list[float]]]:
        """The candidate whose worst inner fold is best; ties: the better inner mean, then the
        first in ``space``'s order. Returns it and every candidate's inner fold scores."""
        folds = {c.name: self.inner_folds(c, training) for c in space}
        order = {c.name: i for i, c in enumerate(space)}
        best = max(space, key=lambda c: (min(folds[c.name]), float(np.mean(folds[c.name])), -order[c.name]))
        return best, folds

    def pool_oracle(self, dataset: str, query: str) -> pd.Series:
        """Per-query nDCG@10 of the reference pools' candidates in the ideal order (label
        descending, ties by position): the ceiling of any fusion that reranks those pools,
        learned or not. Relevant memories outside the pools count against it."""
        bl, frames = self.blocks(dataset, query), self.frames(dataset, query)
        k = self.config(dataset, query).top_k
        out: Ranked = {}
        for q in self.test_qids(dataset):
            b = bl[q]
            order = np.lexsort((np.arange(len(b.y)), -b.y))[:k]
            out[q] = [frames[q].ids[r] for r in b.rows[order].tolist()]
        return ndcg(self.benches[dataset], out)

    def grouped_folds(self, dataset: str) -> list[tuple[str, list[str], list[str]]]:
        """Within-dataset folds: leave one group out (agent-memory: by project, tune -> heldout;
        LoCoMo: by conversation); LongMemEval, one group per question: grouped 5-fold."""
        b = self.benches[dataset]
        if dataset == "longmemeval":
            return [(f"fold{i}", tr, te) for i, (tr, te) in enumerate(group_folds(b.qids, b.group, 5, 42))]
        has_split = any(v is not None for v in b.split.values())
        return leave_one_group_out(b.qids, b.group, b.split if has_split else None)

    def select_within(self, dataset: str, qids: Sequence[str], space: Sequence[Candidate],
                      n_folds: int = 3) -> tuple[Candidate, dict[str, float]]:
        """In-distribution selection on ``qids`` of ``dataset`` alone: the candidate with the best
        mean nDCG@10 over ``n_folds`` grouped folds of those queries (train on the others,
        score the fold; ties: the space's order). Only ``qids`` are read, so an outer test
        fold left out of them stays unseen. Returns it and every candidate's mean."""
        b = self.benches[dataset]
        folds = group_folds(list(qids), b.group, n_folds, 42)
        means: dict[str, float] = {}
        for c in space:
            means[c.name] = float(np.mean([ndcg(b, self.run(self.train(c, ((dataset, tuple(tr)),)), c, dataset, te)).mean()
                                           for tr, te in folds]))
        order = {c.name: i for i, c in enumerate(space)}
        return max(space, key=lambda c: (means[c.name], -order[c.name])), means

    def grouped_cv_nested(self, dataset: str, space: Sequence[Candidate]) -> tuple[Ranked, dict[str, str]]:
        """Out-of-fold runs on ``dataset`` where each outer fold picks its own candidate by
        :meth:`select_within` on its training queries only (selection nested in the grouped
        CV: the in-distribution figure). Returns the runs and each fold's pick."""
        ranked: Ranked = {}
        picks: dict[str, str] = {}
        for g, tr, te in self.grouped_folds(dataset):
            cand, _ = self.select_within(dataset, tr, space)
            picks[g] = cand.name
            ranked.update(self.run(self.train(cand, ((dataset, tuple(tr)),)), cand, dataset, te))
        return ranked, picks

    def grouped_cv(self, cand: Candidate, dataset: str, others: Sequence[str] = ()) -> Ranked:
        """Out-of-fold runs of ``cand`` on ``dataset`` (``others``: whole datasets added to training)."""
        ranked: Ranked = {}
        for _g, tr, te in self.grouped_folds(dataset):
            m = self.train(cand, ((dataset, tuple(tr)), *self.all_parts(others)))
            ranked.update(self.run(m, cand, dataset, te))
        return ranked


def available(names: Sequence[str] = DATASETS) -> tuple[list[str], list[str]]:
    """(present, absent) datasets."""
    present = [n for n in names if dataset_present(n)]
    return present, [n for n in names if n not in present]
