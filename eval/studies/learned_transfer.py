"""``python -m memofs_eval.studies.learned_transfer [--out reports/learned/lodo] [--models DIR] [--longmemeval-embedder E]``

The learned-fusion headline: leave-one-dataset-out (LODO) with nested selection, grouped CV
within each dataset, Holm-corrected paired tests against every peer, and the shipped ``-v3``
models and ``robust`` profile (:mod:`memofs_eval.studies.learned_lodo` does the work; this module
runs it and writes ``report.md``, ``summary.json``, ``results.csv`` and ``per-query-<dataset>.csv``).
Every figure in the report is computed by the run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx / torch)
import pandas as pd

from memofs.ranking.learned import Model, feature_set
from memofs.ranking.profiles import MODELS_DIR, profile_file
from memofs_eval._env import REPO
from memofs_eval.provenance.stamp import MODEL_FILES, stamp
from memofs_eval.reporting.report import render_md
from memofs_eval.runs.runner import Ranked, fused_run
from memofs_eval.scoring.stats import holm, paired_pvalues
from memofs_eval.studies import learned_lodo as LD
from memofs_eval.studies.learned_bench import Bench, ndcg
from memofs_eval.studies.learned_peers import peer_runs, pipeline_configs
from memofs_eval.studies.learned_training import LGBM_PARAMS, LGBM_ROUNDS

#: pipeline variants run as peers (the spec grammar of :func:`memofs_eval.studies.learned_peers.pipeline_configs`)
PIPELINE_PEERS = ("default", "only:bm25", "only:vector", "-recency,-decay")
#: the peers of the target max(BM25, tuned wsum, RRF), both query texts
TARGET_PEERS = ("only:bm25", "baseline:bm25s@raw", "baseline:bm25s@rewritten", "baseline:wsum:tuned@raw",
                "baseline:wsum:tuned@rewritten", "baseline:rrf@raw", "baseline:rrf@rewritten")
TARGET_GROUPED_LOCOMO = 0.65
TARGET_AGENT_HELDOUT = 0.80


@dataclass
class Held:
    """One dataset's held-out results: every run on its scored queries, and what was chosen."""

    name: str
    qids: list[str]
    runs: dict[str, Ranked] = field(default_factory=dict)
    scores: pd.DataFrame = field(default_factory=pd.DataFrame)
    selected: LD.Candidate | None = None
    inner: dict[str, list[float]] = field(default_factory=dict)  # candidate -> inner fold scores
    training: list[str] = field(default_factory=list)
    picks: dict[str, str] = field(default_factory=dict)  # outer grouped fold -> its nested pick
    oracle: float = float("nan")  # nDCG@10 ceiling of reranking the raw query's reference pools

    @property
    def peers(self) -> list[str]:
        return [n for n in self.runs if n in PIPELINE_PEERS or n.startswith("baseline:")]


def peer_block(lab: LD.Lab, name: str, qids: Sequence[str]) -> dict[str, Ranked]:
    """The harness's peers on ``qids``: pipeline variants and every baseline on both query texts."""
    b = lab.benches[name]
    runs: dict[str, Ranked] = {}
    for pname, c in pipeline_configs(b.spec, PIPELINE_PEERS).items():
        group = b.frames_of(c)
        runs[pname] = fused_run({q: group[q] for q in qids}, c, b.spec.k)
    pr, _ = peer_runs(b)
    runs.update({n: {q: r[q] for q in qids} for n, r in pr.items() if all(q in r for q in qids)})
    return runs


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    log = lambda m: print(f"[{time.time() - t0:6.0f}s] {m}", flush=True)  # noqa: E731
    present, absent = LD.available(args.datasets)
    if not present:
        raise SystemExit("learned transfer study: no dataset present")
    emb = {"longmemeval": args.longmemeval_embedder} if args.longmemeval_embedder else {}
    benches = {n: Bench.load(n, embedder=emb.get(n)) for n in present}
    lab = LD.Lab(benches, log=log)
    for n in present:
        for q in LD.QUERY_MODES:
            lab.blocks(n, q)
    log(f"frames and features of {', '.join(present)}")
    space = LD.candidates(sets=args.feature_sets)
    held: dict[str, Held] = {}
    lodo_all: dict[str, dict[str, float]] = {}
    for d in present:
        h = Held(d, lab.test_qids(d), training=[x for x in present if x != d])
        h.runs.update(peer_block(lab, d, h.qids))
        if h.training:
            h.selected, h.inner = lab.select(h.training, space)
            m = lab.train(h.selected, lab.all_parts(h.training))
            h.runs["learned:lodo"] = lab.run(m, h.selected, d, h.qids)
            # every candidate's LODO figure (not a result: the shipped profile's choice reads them)
            lodo_all[d] = {c.name: float(lab.transfer(c, h.training, d, False).mean()) for c in space}
            h.runs["learned:grouped"] = lab.grouped_cv(h.selected, d)
            h.runs["learned:grouped+others"] = lab.grouped_cv(h.selected, d, h.training)
        else:
            h.runs["learned:grouped"] = lab.grouped_cv(space[0], d)
        h.runs["learned:grouped-nested"], h.picks = lab.grouped_cv_nested(d, space)
        h.oracle = float(lab.pool_oracle(d, "raw").mean())
        h.scores = pd.DataFrame({n: ndcg(benches[d], r) for n, r in h.runs.items()})
        held[d] = h
        log(f"{d}: selected {h.selected.name if h.selected else '-'}; runs done")
    # the shipped profile: the candidate with the best mean LODO nDCG@10 over the datasets,
    # retrained on all of them (its choice reads every dataset: the nested figures above are the results)
    if lodo_all:
        mean_lodo = {c.name: sum(lodo_all[d][c.name] for d in lodo_all) / len(lodo_all) for c in space}
        robust = max(space, key=lambda c: mean_lodo[c.name])
    else:
        mean_lodo, robust = {}, space[0]
    models = ship(lab, robust, present, args.models, held, mean_lodo)
    log(f"models: {', '.join(str(p) for p in models)}")
    md = write(args.out, lab, held, absent, space, lodo_all, mean_lodo, robust, models, emb)
    log(f"wrote {md}")
    return 0


def ship(lab: LD.Lab, robust: LD.Candidate, present: Sequence[str], out: Path, held: dict[str, Held],
         mean_lodo: dict[str, float]) -> list[Path]:
    """``learned-robust-v3.json`` (the profile's model, every dataset), the other family on the
    same features as ``learned-<family>-v3.json``, and ``profile-robust.json``."""
    out.mkdir(parents=True, exist_ok=True)
    parts = lab.all_parts(present)
    lodo = {d: float(h.scores["learned:lodo"].mean()) for d, h in held.items() if "learned:lodo" in h.scores}
    paths = []
    for fam in LD.FAMILIES:
        cand = LD.Candidate(robust.query, robust.features, fam)
        m: Model = lab.train(cand, parts)
        m.cv = {"candidate": cand.name, "mean_lodo_ndcg@10": mean_lodo.get(cand.name), "nested_lodo_ndcg@10": lodo,
                "check": check_figure(lab, m, cand)}
        paths.append(m.save(out / f"learned-{'robust' if cand == robust else fam}-v3.json"))
    settings = {"fusion": "learned", "learned_model": "learned-robust-v3.json", **LD.QUERY_MODES[robust.query]}
    doc = {"profile": "robust", "candidate": robust.name, "settings": settings,
           "trained_on": {d: len(q) for d, q in parts}, "mean_lodo_ndcg@10": mean_lodo.get(robust.name)}
    target = out / profile_file("robust").name
    target.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return [*paths, target]


CHECK_DATASET, CHECK_QUERIES = "agent-memory", 20


def check_figure(lab: LD.Lab, model: Model, cand: LD.Candidate) -> dict:
    """The model's nDCG@10 on a fixed small subset (agent-memory's first heldout queries, the
    bundled data), recorded in the file so a test can reproduce it through the online path."""
    if CHECK_DATASET not in lab.benches:
        return {}
    qids = lab.test_qids(CHECK_DATASET)[:CHECK_QUERIES]
    score = float(ndcg(lab.benches[CHECK_DATASET], lab.run(model, cand, CHECK_DATASET, qids)).mean())
    return {"dataset": CHECK_DATASET, "queries": qids, "embedder": lab.benches[CHECK_DATASET].embedder,
            "settings": lab.modes[cand.query], "ndcg@10": score}


def inner_table(h: Held) -> pd.DataFrame:
    """Every candidate's inner fold scores, worst and mean, best worst fold first."""
    cols = h.training if len(h.training) >= 2 else [f"fold {i}" for i in range(len(next(iter(h.inner.values()))))]
    t = pd.DataFrame([{"candidate": c, **dict(zip(cols, f, strict=True)), "worst": min(f), "mean": sum(f) / len(f)}
                      for c, f in h.inner.items()])
    return t.sort_values(["worst", "mean"], ascending=False)


def mean_rule_table(held: dict[str, Held], lodo_all: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Per held-out dataset: the maximin pick and the inner-mean pick, with their LODO nDCG@10."""
    rows = []
    for d, h in held.items():
        if not h.inner or d not in lodo_all:
            continue
        by_mean = max(h.inner, key=lambda c: sum(h.inner[c]) / len(h.inner[c]))  # dicts keep the space's order: first wins ties
        rows.append({"held-out dataset": d, "maximin pick": h.selected.name, "its LODO": lodo_all[d][h.selected.name],
                     "inner-mean pick": by_mean, "its LODO ": lodo_all[d][by_mean]})
    return pd.DataFrame(rows)


def _label(n: str) -> str:
    return {"learned:lodo": "learned, leave one dataset out (nested selection)", "learned:grouped": "learned, grouped CV within the dataset (the LODO pick)",
            "learned:grouped-nested": "learned, grouped CV within the dataset, selection nested in it (in-distribution)",
            "learned:grouped+others": "learned, grouped CV + the other datasets in training",
            "default": "reference pipeline (spec defaults)", "only:bm25": "BM25 signal alone (pipeline)",
            "only:vector": "vector signal alone (pipeline)", "-recency,-decay": "reference, recency and kind decay off"}.get(n, f"`{n}`")


def paired_table(qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, list[str]]], scores: pd.DataFrame,
                 qids: Sequence[str], treatment: str, peers: Sequence[str], metric: str = "ndcg@10",
                 name: Callable[[str], str] = _label) -> pd.DataFrame:
    """ranx paired Student's t of ``treatment`` vs each of ``peers`` on ``qids``, Holm over the peers."""
    judged = {q: qrels[q] for q in qids}
    sub = {n: {q: runs[n][q] for q in qids} for n in (treatment, *peers)}
    raw = [paired_pvalues(judged, sub[p], sub[treatment], [metric], "student")[metric] for p in peers]
    return pd.DataFrame({"peer": [name(p) for p in peers], "peer nDCG@10": [float(scores[p].mean()) for p in peers],
                         f"{treatment} - peer": [float((scores[treatment] - scores[p]).mean()) for p in peers],
                         "p_raw": raw, "p_holm": holm(raw)})


def targets(held: dict[str, Held]) -> pd.DataFrame:
    rows = []
    for d, h in held.items():
        s = h.scores.mean()
        peers = [p for p in TARGET_PEERS if p in s]
        best = max(peers, key=lambda p: s[p])
        if "learned:lodo" in s:
            rows.append({"dataset": d, "target": f"LODO >= max(BM25, tuned wsum, RRF) = `{best}`", "needed": float(s[best]),
                         "got": float(s["learned:lodo"]), "met": bool(s["learned:lodo"] >= s[best])})
        # the in-distribution targets read one run fixed in advance, the nested grouped CV
        # (not the best of several learned runs, which would be a choice made on held-out scores)
        got = float(s.get("learned:grouped-nested", float("nan")))
        if d == "locomo":
            rows.append({"dataset": d, "target": "grouped CV (nested selection) >= 0.65", "needed": TARGET_GROUPED_LOCOMO,
                         "got": got, "met": bool(got >= TARGET_GROUPED_LOCOMO)})
        if d == "agent-memory":
            rows.append({"dataset": d, "target": "held out by project (grouped CV, nested selection) >= 0.80",
                         "needed": TARGET_AGENT_HELDOUT, "got": got, "met": bool(got >= TARGET_AGENT_HELDOUT)})
    return pd.DataFrame(rows)


def picks_table(held: dict[str, Held]) -> pd.DataFrame:
    rows = []
    for d, h in held.items():
        for name in dict.fromkeys(h.picks.values()):
            folds = [g for g, p in h.picks.items() if p == name]
            rows.append({"dataset": d, "candidate": name, "outer folds": len(folds), "of": len(h.picks)})
    return pd.DataFrame(rows)


def why(held: dict[str, Held], lodo_all: dict[str, dict[str, float]], tg: pd.DataFrame) -> str:
    """One bullet per missed target, its reason in this run's numbers: for LODO, which inner
    fold decided the pick and where the space's best candidate on the held-out dataset (read
    only here, after the fact) stood in the inner ranking; for the in-distribution rows, the
    ceiling that reranking the pools allows."""
    out, lodo_missed = [], False
    for r in tg.to_dict(orient="records"):
        if r["met"]:
            continue
        h = held[r["dataset"]]
        s = h.scores.mean()
        if r["target"].startswith("LODO") and h.selected is not None and r["dataset"] in lodo_all:
            inner = {c: (min(v), float(sum(v) / len(v))) for c, v in h.inner.items()}
            ranked = sorted(inner, key=lambda c: inner[c], reverse=True)
            worst = h.training[int(min(range(len(h.training)), key=lambda i: h.inner[h.selected.name][i]))]
            best_c = max(lodo_all[r["dataset"]], key=lambda c: lodo_all[r["dataset"]][c])
            out.append(f"* **{r['dataset']}, LODO {r['got']:.4f} < {r['needed']:.4f}.** The pick ({h.selected.name}) won the inner "
                       f"maximin on its worst inner fold, {worst} ({inner[h.selected.name][0]:.4f}). The candidate of the space that "
                       f"does best on {r['dataset']} held out, {best_c} ({lodo_all[r['dataset']][best_c]:.4f}), ranks "
                       f"{ranked.index(best_c) + 1} of {len(ranked)} in that inner ordering (this reads the held-out scores, after the "
                       f"fact), so the rule, reading the training datasets only, does not reach it.")
            lodo_missed = True
        else:
            out.append(f"* **{r['dataset']}, {r['target'].split(' >=')[0]} {r['got']:.4f} < {r['needed']:.4f}.** Reranking the "
                       f"raw query's candidate pools can reach at most {h.oracle:.4f} here (the pools' candidates in the ideal order); the "
                       f"target asks for {r['needed'] / h.oracle:.0%} of that ceiling and the nested run reaches "
                       f"{r['got'] / h.oracle:.0%}. The best peer is {float(max(s[p] for p in h.peers)):.4f}; the nested run is "
                       f"{r['got'] - float(max(s[p] for p in h.peers)):+.4f} above it.")
    if lodo_missed:
        bal = "; ".join(f"{d} {held[d].scores['only:bm25'].mean():.4f} / {held[d].scores['only:vector'].mean():.4f}"
                        for d in held if "only:bm25" in held[d].scores and "only:vector" in held[d].scores)
        out.append(f"* **Behind every LODO miss:** the datasets want different balances of the two signals (nDCG@10 of "
                   f"BM25 alone / the vector signal alone: {bal}), so a model fitted on datasets where one signal wins "
                   "carries that balance to a dataset where the other does, and the inner folds, each a pair of training "
                   "datasets, cannot say which balance the unseen one wants.")
    return "\n".join(out) or "Every target is met."


def write(out: Path, lab: LD.Lab, held: dict[str, Held], absent: Sequence[str], space: Sequence[LD.Candidate],
          lodo_all: dict[str, dict[str, float]], mean_lodo: dict[str, float], robust: LD.Candidate, models: Sequence[Path],
          emb: dict[str, str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for d, h in held.items():
        h.scores.to_csv(out / f"per-query-{d}.csv", index_label="query")
        for n in h.scores:
            rows.append({"dataset": d, "run": n, "n": len(h.qids), "ndcg@10": float(h.scores[n].mean())})
    pd.DataFrame(rows).to_csv(out / "results.csv", index=False)
    head = pd.DataFrame([{"held-out dataset": d, "queries": len(h.qids), "trained on": " + ".join(h.training) or "-",
                          "selected (inner LODO, maximin)": h.selected.name if h.selected else "-",
                          "reference": float(h.scores["default"].mean()),
                          "best peer": float(max(h.scores[p].mean() for p in h.peers)),
                          "best peer is": max(h.peers, key=lambda p: h.scores[p].mean()),
                          "learned LODO": float(h.scores["learned:lodo"].mean()) if "learned:lodo" in h.scores else float("nan"),
                          "learned grouped CV": float(h.scores["learned:grouped"].mean()),
                          "grouped CV + others": float(h.scores["learned:grouped+others"].mean()) if "learned:grouped+others" in h.scores else float("nan"),
                          "grouped CV, nested selection": float(h.scores["learned:grouped-nested"].mean())}
                         for d, h in held.items()])
    tg = targets(held)
    blocks: list[tuple[str, object]] = [
        ("h1", "Learned fusion that transfers: leave one dataset out"),
        ("p", "Generated by `python -m memofs_eval.studies.learned_transfer`. nDCG@10 (ranx), K = 10, ties broken by id. "
              "Every learned figure is held out: LODO trains on the other datasets only; grouped CV never trains on the scored "
              "query's conversation / project / question haystack."),
        ("p", "Datasets: " + ", ".join(f"{d} ({len(h.qids)} scored queries, embedder {lab.benches[d].embedder})" for d, h in held.items())
              + (f". Absent here (shared data missing), so left out: {', '.join(absent)}." if absent else ".")
              + (" LongMemEval runs with the LSA embedder here (its MiniLM embeddings were not cached when this report was "
                 "generated); the features are ranks and min-max scores within the query, so the models transfer across embedders."
                 if emb.get("longmemeval") else "")),
        ("h2", "How the configuration is chosen (nested)"),
        ("p", f"The selection space is {len(space)} candidates: query text (`rewritten`: the reference settings; `raw`: rewriting, "
              "lexicon and entity expansion off) x feature set ("
              + ", ".join(f"`{s}` ({len(feature_set(s))} features)" for s in dict.fromkeys(c.features for c in space))
              + ") x model family (pairwise logistic regression, C = 1; LightGBM LambdaMART `lambdarank`, "
              f"{LGBM_ROUNDS} rounds, {LGBM_PARAMS['num_leaves']} leaves, learning rate {LGBM_PARAMS['learning_rate']}, "
              "deterministic, 1 thread). The hyperparameters are fixed in the code, not tuned. For a held-out dataset D the "
              "candidate is the one whose worst inner fold is best (maximin nDCG@10 over the inner leave-one-dataset-out folds of "
              "the *training* datasets: train on one, score the other; ties by the inner mean); D's scores are never read. Each "
              "training dataset weighs the same in total."),
        ("p", "Disclosure: the rule was the inner *mean* until the previous run of this study, in which it picked LambdaMART for "
              "every held-out dataset and LambdaMART transferred worse than the pairwise logistic model; the maximin rule was "
              "adopted after seeing that run, so these nested figures are not free of that one look. A second look: the `ranks` "
              "and `peers` feature sets (low-capacity subsets of `portable`) joined the space after an exploration that read "
              "their leave-one-dataset-out figures on all three datasets, beside sets that were tried there and not added (query-level "
              "clarity features: each signal's top-two gap and mean over the candidates, the two signals' top-10 overlap, and "
              "their products with each signal; with either family, no set with them was better on all three datasets than "
              "the same set without them). What the mean rule picks in "
              "this run, and its LODO figure, for comparison:"),
        ("table", mean_rule_table(held, lodo_all)),
        ("h2", "1. Leave one dataset out (headline)"),
        ("table", head),
        ("h2", "2. Targets"),
        ("table", tg),
        ("p", "Every target row that says `False` is missed by the margin shown; nothing here is rounded in the learned model's favour. "
              "The two in-distribution rows read the nested grouped CV, a run fixed before its figures were seen (until this "
              "run they read the best of the grouped-CV runs that used the LODO pick)."),
        ("h2", "2a. Why the missed targets are missed (computed by this run)"),
        ("p", why(held, lodo_all, tg)),
        ("h2", "2b. In-distribution: grouped CV with the selection nested inside it"),
        ("p", "Each outer fold (agent-memory: one project out, trained on the other projects' tune queries; LoCoMo: one "
              "conversation out; LongMemEval: grouped 5-fold) chooses its candidate from the same space by the best mean "
              "nDCG@10 over 3 grouped inner folds of its own training queries, then trains on all of them. The picks:"),
        ("table", picks_table(held)),
    ]
    for d, h in held.items():
        blocks.append(("h2", f"3. {d}: every run, and paired tests"))
        blocks.append(("table", pd.DataFrame({"run": [_label(n) for n in h.scores], "nDCG@10": h.scores.mean().to_numpy()})))
        for t in ("learned:lodo", "learned:grouped-nested"):
            if t in h.runs:
                blocks.append(("p", f"{_label(t)} vs every peer: paired Student's t (ranx), Holm over the {len(h.peers)} peers."))
                blocks.append(("table", paired_table(lab.benches[d].qrels, h.runs, h.scores, h.qids, t, h.peers)))
        if h.inner:
            blocks.append(("p", f"Inner selection scores (training datasets {', '.join(h.training)} only; one column per inner "
                                "held-out dataset):"))
            blocks.append(("table", inner_table(h)))
    if lodo_all:
        t = pd.DataFrame(lodo_all)
        t["mean"] = t.mean(axis=1)
        blocks += [("h2", "4. Every candidate left one dataset out (model families and feature sets compared)"),
                   ("p", "Not a result (choosing the best row reads the held-out datasets): it compares the two families and the "
                         "feature sets through the same feature code, and its best mean row is the shipped `robust` profile."),
                   ("table", t.sort_values("mean", ascending=False).rename_axis("candidate").reset_index())]
    blocks += [("h2", "5. Shipped"),
               ("p", f"* `robust` profile: {robust.name} (best mean LODO nDCG@10 {mean_lodo.get(robust.name, float('nan')):.3f}), "
                     "retrained on every present dataset. `RecallConfig.from_dict({\"profile\": \"robust\"})` or `\"profile\": \"robust\"` "
                     "in `.memofs/config.json`; the reference stays the default.\n"
                     + "\n".join(f"* `{p.relative_to(p.parents[3]) if len(p.parents) > 3 else p}`" for p in models)
                     + "\n\nSafe fallback: each model file records its training distribution (1st-99th percentile of every feature); when "
                       "more than `learned_ood_threshold` (default 0.25) of a query's candidate feature values fall outside it (widened "
                       "by a quarter of the range), recall ranks by RRF instead (`learned_fallback`, default `rrf`) and explain says so.")]
    (out / "summary.json").write_text(json.dumps({
        **stamp(("memofs_eval.studies.learned_transfer",), (MODEL_FILES, "eval/specs/*.toml"),
                 outputs=("memofs/ranking/models/*-v3.json", "memofs/ranking/models/profile-robust.json")), "metric": "ndcg@10", "datasets": list(held), "absent": list(absent), "embedders": {d: lab.benches[d].embedder for d in held},
        "lodo": {d: {"selected": h.selected.name if h.selected else None, "learned": float(h.scores["learned:lodo"].mean()) if "learned:lodo" in h.scores else None,
                     "grouped": float(h.scores["learned:grouped"].mean()),
                     "grouped_plus_others": float(h.scores["learned:grouped+others"].mean()) if "learned:grouped+others" in h.scores else None,
                     "grouped_nested": float(h.scores["learned:grouped-nested"].mean()), "grouped_nested_picks": h.picks,
                     "pool_oracle": h.oracle,
                     "reference": float(h.scores["default"].mean()),
                     "peers": {p: float(h.scores[p].mean()) for p in h.peers}, "queries": len(h.qids)} for d, h in held.items()},
        "robust": {"candidate": robust.name, "mean_lodo": mean_lodo.get(robust.name),
                   "lodo": {d: lodo_all[d][robust.name] for d in lodo_all}},
        "targets": tg.to_dict(orient="records"), "candidates_lodo": lodo_all}, indent=1, default=str) + "\n")
    md = out / "report.md"
    md.write_text(render_md(blocks, out), encoding="utf-8")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.studies.learned_transfer", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "learned" / "lodo")
    ap.add_argument("--models", type=Path, default=MODELS_DIR)
    ap.add_argument("--datasets", nargs="+", default=list(LD.DATASETS))
    ap.add_argument("--feature-sets", nargs="+", default=list(LD.SELECT_FEATURE_SETS))
    ap.add_argument("--longmemeval-embedder", default=None, help="override LongMemEval's embedder (e.g. lsa while MiniLM is not cached)")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
