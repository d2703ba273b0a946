"""Honest tuning: grid search scored by k-fold cross-validation over queries.

Folds are fixed by the seed and *grouped*: every query of one scope (a conversation or
project sharing one corpus) falls in the same fold, so a test fold never sees a corpus a
training fold was fitted on. When the dataset fixes a tune/held-out split, selection uses
the tune split only and the held-out numbers are the headline; otherwise the
out-of-fold numbers are. In-sample numbers (best grid point scored on its own training
queries) are reported and labelled as such, never as the headline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


def group_folds(qids: Sequence[str], groups: Mapping[str, str], n_folds: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """``(train, test)`` query lists; groups are shuffled by ``seed`` and dealt greedily to
    the currently smallest fold, so sizes stay balanced and a group is never split.
    With fewer groups than folds there is one fold per group."""
    qids = list(qids)
    names = sorted({groups[q] for q in qids})
    if len(names) < 2:
        raise ValueError("cross-validation needs at least two query groups (scopes)")
    n = min(n_folds, len(names))
    rng = np.random.default_rng(seed)
    size = {g: sum(1 for q in qids if groups[q] == g) for g in names}
    order = [names[i] for i in rng.permutation(len(names))]
    order.sort(key=lambda g: -size[g])  # stable: big groups first, shuffled among equals
    fold_of: dict[str, int] = {}
    load = [0] * n
    for g in order:
        f = int(np.argmin(load))
        fold_of[g] = f
        load[f] += size[g]
    out = []
    for f in range(n):
        test = [q for q in qids if fold_of[groups[q]] == f]
        train = [q for q in qids if fold_of[groups[q]] != f]
        out.append((train, test))
    return out


def split_folds(split: Mapping[str, str | None], qids: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """The dataset's fixed split as a single fold: train on ``tune``, test on ``heldout``."""
    train = [q for q in qids if split[q] == "tune"]
    test = [q for q in qids if split[q] == "heldout"]
    if not train or not test:
        raise ValueError(f"the fixed split needs tune and heldout queries: {len(train)} tune, {len(test)} heldout")
    return [(train, test)]


def evaluation_folds(data, n_folds: int, seed: int) -> tuple[list[tuple[list[str], list[str]]], str]:
    """Folds for tuned methods in a run, and what their test queries are called."""
    qids = [q.id for q in data.queries]
    if data.has_split:
        return split_folds(data.split, qids), "heldout"
    return group_folds(qids, data.group, n_folds, seed), "all"


@dataclass
class TuneResult:
    metric: str
    candidates: list[str]
    mean_by_candidate: dict[str, float]  # in-sample: over every selection query
    folds: list[dict] = field(default_factory=list)  # per fold: chosen candidate, train and test means
    cv_mean: float = float("nan")  # out-of-fold mean over the selection queries
    heldout_candidate: str | None = None
    heldout_mean: float | None = None
    chosen_per_query: dict[str, str] = field(default_factory=dict)  # test query -> candidate used


def select(scores: pd.DataFrame, folds: Sequence[tuple[list[str], list[str]]]) -> tuple[dict[str, str], list[dict]]:
    """For each fold pick the candidate (column) with the best mean on the training queries
    (ties: the earliest column), and assign it to the fold's test queries."""
    chosen: dict[str, str] = {}
    info = []
    for i, (train, test) in enumerate(folds):
        train_means = scores.loc[train].mean(axis=0)
        best = str(train_means.index[int(np.argmax(train_means.to_numpy()))])
        info.append({"fold": i, "chosen": best, "train_mean": float(train_means[best]),
                     "test_mean": float(scores.loc[test, best].mean()) if test else float("nan"), "n_test": len(test)})
        for q in test:
            chosen[q] = best
    return chosen, info


def tune(scores: pd.DataFrame, metric: str, data, n_folds: int, seed: int) -> TuneResult:
    """``scores``: per-query metric values, rows = query ids, columns = candidates."""
    qids = [q.id for q in data.queries]
    selection = [q for q in qids if data.split[q] == "tune"] if data.has_split else qids
    sub = scores.loc[selection]
    folds = group_folds(selection, data.group, n_folds, seed)
    chosen, info = select(sub, folds)
    res = TuneResult(metric=metric, candidates=list(scores.columns),
                     mean_by_candidate={c: float(sub[c].mean()) for c in scores.columns}, folds=info)
    res.cv_mean = float(np.mean([sub.at[q, c] for q, c in chosen.items()]))
    res.chosen_per_query = chosen
    if data.has_split:
        (chosen_h, info_h) = select(scores, split_folds(data.split, qids))
        res.heldout_candidate = info_h[0]["chosen"]
        res.heldout_mean = info_h[0]["test_mean"]
    return res
