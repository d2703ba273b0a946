"""``python -m memofs_eval.studies.learned [--out reports/learned] [--models DIR] [--C 1.0]``

The learned-fusion study end to end: :mod:`memofs_eval.studies.learned_study` (data, training,
leave-one-group-out CV, the harness's peers), transfer between the datasets, the shipped
model files under ``memofs/ranking/models/`` and :mod:`memofs_eval.studies.learned_report`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import memofs_eval._env  # noqa: F401  (cache and offline variables before ranx / torch)
import pandas as pd

from memofs.ranking.learned import FEATURES, FeatureParams
from memofs.ranking.profiles import MODELS_DIR
from memofs_eval._env import REPO
from memofs_eval.studies import learned_report as R
from memofs_eval.studies import learned_study as S
from memofs_eval.runs.runner import fused_run



def run(args: argparse.Namespace, t0: float) -> int:
    log = lambda m: print(f"[{time.time() - t0:6.0f}s] {m}", flush=True)  # noqa: E731
    loco = S.Bench.load("locomo")
    agent = S.Bench.load("agent-memory")
    log("frames loaded")
    cfg = loco.spec.default_config()
    params = FeatureParams.from_config(cfg)
    loco_blocks = S.blocks(loco, loco.qids, cfg, params)
    agent_tune = [q for q in agent.qids if agent.split[q] == "tune"]
    agent_heldout = [q for q in agent.qids if agent.split[q] == "heldout"]
    agent_tune_blocks = S.blocks(agent, agent_tune, cfg, params)
    st_l = S.study(loco, False, args.C, extra=agent_tune_blocks, log=log)
    st_a = S.study(agent, True, args.C, extra=loco_blocks, log=log)

    # transfer: train on one dataset whole (agent-memory: its tune split), test on the other
    loco_all = f"locomo (all {len(loco.qids)} questions)"
    m_l = S.train(loco_blocks, FEATURES, args.C, params, meta={"datasets": [loco_all]})
    m_a = S.train(agent_tune_blocks, FEATURES, args.C, params, meta={"datasets": ["agent-memory (tune split)"]})
    m_mix = S.train(loco_blocks + agent_tune_blocks, FEATURES, args.C, params, meta={"datasets": [loco_all, "agent-memory (tune split)"]})
    rows = {}
    for name, model in (("trained on LoCoMo", m_l), ("trained on agent-memory tune", m_a), ("trained on both", m_mix)):
        rows[name] = {"agent-memory heldout": float(S.ndcg(agent, S.run_model(agent, agent_heldout, model, cfg)).mean()),
                      "LoCoMo (all)": float(S.ndcg(loco, S.run_model(loco, loco.qids, model, cfg)).mean())}
    rows["reference pipeline"] = {
        "agent-memory heldout": float(S.ndcg(agent, fused_run({q: agent.frames[q] for q in agent_heldout}, cfg, cfg.top_k)).mean()),
        "LoCoMo (all)": float(S.ndcg(loco, fused_run(loco.frames, cfg, cfg.top_k)).mean())}
    transfer = R.Transfer(pd.DataFrame(rows).T, len(agent_tune))
    log("transfer done")

    cv = R.summary(st_l, st_a, transfer)
    args.models.mkdir(parents=True, exist_ok=True)
    m_l.cv = {**cv, "this_model": "locomo"}
    m_mix.cv = {**cv, "this_model": "mixed"}
    paths = [m_l.save(args.models / "learned-locomo-v2.json"), m_mix.save(args.models / "learned-mixed-v2.json")]
    log(f"models saved: {', '.join(map(str, paths))}")
    md = R.write(args.out, st_l, st_a, transfer, {"locomo": m_l, "mixed": m_mix}, paths, args.C)
    log(f"wrote {md}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memofs_eval.studies.learned", description="Learned fusion: grouped CV, peers, transfer, report.")
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "learned")
    ap.add_argument("--models", type=Path, default=MODELS_DIR, help="where the shipped model files are written")
    ap.add_argument("--C", type=float, default=S.C_DEFAULT)
    args = ap.parse_args(argv)
    return run(args, time.time())


if __name__ == "__main__":
    raise SystemExit(main())
