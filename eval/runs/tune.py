"""Honest tuning: grid search scored by k-fold cross-validation over queries.

Folds come from :mod:`memofs_eval.inputs.folds` (fixed by the seed and *grouped*: every query of
one scope falls in the same fold, so a test fold never sees a corpus a training fold was
fitted on). When the dataset fixes a tune/held-out split, selection uses
the tune split only and the held-out numbers are the headline; otherwise the
out-of-fold numbers are. In-sample numbers (best grid point scored on its own training
queries) are reported and labelled as such, never as the headline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from memofs_eval.inputs.folds import group_folds, split_folds


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
