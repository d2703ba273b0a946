"""Query folds, one implementation for every tuned or trained method of the harness
(``memofs-eval run``/``tune``, the ``:tuned`` peers and the learned-fusion study).

A fold is ``(train query ids, test query ids)``. Every scheme is *grouped*: all queries of
one group (a scope: a conversation or project sharing one corpus) fall on the same side,
so a test query's corpus was never fitted on.

* :func:`group_folds`: grouped k-fold, groups shuffled by the seed and dealt to the
  smallest fold;
* :func:`split_folds`: the dataset's fixed split, train on ``tune``, test on ``heldout``
  (the groups of a fixed split are the dataset author's choice);
* :func:`leave_one_group_out`: one fold per group; with a split, train on the other
  groups' ``tune`` queries and test on the group's ``heldout`` ones;
* :func:`evaluation_folds`: what the harness's tuned methods use (the split when the
  dataset has one, else grouped k-fold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Fold = tuple[list[str], list[str]]


def group_folds(qids: Sequence[str], groups: Mapping[str, str], n_folds: int, seed: int) -> list[Fold]:
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


def split_folds(split: Mapping[str, str | None], qids: Sequence[str]) -> list[Fold]:
    """The dataset's fixed split as a single fold: train on ``tune``, test on ``heldout``."""
    train = [q for q in qids if split[q] == "tune"]
    test = [q for q in qids if split[q] == "heldout"]
    if not train or not test:
        raise ValueError(f"the fixed split needs tune and heldout queries: {len(train)} tune, {len(test)} heldout")
    return [(train, test)]


def leave_one_group_out(qids: Sequence[str], groups: Mapping[str, str],
                        split: Mapping[str, str | None] | None = None) -> list[tuple[str, list[str], list[str]]]:
    """``(group, train, test)`` per group, groups sorted. With ``split`` the training side
    keeps only *tune* queries and the test side only *heldout* ones; a group left with an
    empty side is skipped."""
    qids = list(qids)
    names = sorted({groups[q] for q in qids})
    out = []
    for g in names:
        test = [q for q in qids if groups[q] == g]
        train = [q for q in qids if groups[q] != g]
        if split is not None:
            test = [q for q in test if split[q] == "heldout"]
            train = [q for q in train if split[q] == "tune"]
        if test and train:
            out.append((g, train, test))
    if not out:
        raise ValueError(f"no leave-one-group-out fold: {len(qids)} queries in {len(names)} group(s)"
                         + (" with tune and heldout queries" if split is not None else ""))
    return out


def check_grouped(groups: Mapping[str, str], folds: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> None:
    """No group on both sides of any ``(name, train, test)`` fold (raises otherwise)."""
    for name, tr, te in folds:
        both = {groups[q] for q in tr} & {groups[q] for q in te}
        if both:
            raise AssertionError(f"fold {name}: groups in train and test: {sorted(both)}")


def evaluation_folds(data, n_folds: int, seed: int) -> tuple[list[Fold], str]:
    """Folds for tuned methods in a run, and what their test queries are called."""
    qids = [q.id for q in data.queries]
    if data.has_split:
        return split_folds(data.split, qids), "heldout"
    return group_folds(qids, data.group, n_folds, seed), "all"
