"""The recommended-profile study (issue 46, item 4): its pre-registered decision rule by hand,
its space, a whole run on two copies of the bundled tiny dataset checked against the online
scorer and scipy, and the shipped files' held-out promise."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from scipy import stats

from memofs.ranking.config import RecallConfig
from memofs.ranking.learned import fuse_learned, load_model
from memofs.ranking.profiles import MODELS_DIR, profile_file


def _s(*values: float) -> pd.Series:
    return pd.Series(values, dtype=float)


@pytest.mark.parametrize(("rec", "rob", "p", "replaces", "below"), [
    # higher on two of three, the loss not significant: replaces
    ({"a": (0.6, 0.8), "b": (0.5, 0.5), "c": (0.2, 0.2)}, {"a": (0.5, 0.7), "b": (0.4, 0.5), "c": (0.3, 0.2)},
     {"a": 0.01, "b": 0.3, "c": 0.20}, True, []),
    # the same means, but the loss on c is significant after Holm: does not replace
    ({"a": (0.6, 0.8), "b": (0.5, 0.5), "c": (0.2, 0.2)}, {"a": (0.5, 0.7), "b": (0.4, 0.5), "c": (0.3, 0.2)},
     {"a": 0.01, "b": 0.3, "c": 0.049}, False, ["c"]),
    # higher on one only (a tie is not higher): does not replace
    ({"a": (0.6,), "b": (0.5,), "c": (0.2,)}, {"a": (0.5,), "b": (0.5,), "c": (0.3,)},
     {"a": 0.5, "b": 1.0, "c": 0.5}, False, []),
    # a significant *win* is no obstacle
    ({"a": (0.9,), "b": (0.6,), "c": (0.1,)}, {"a": (0.5,), "b": (0.5,), "c": (0.2,)},
     {"a": 0.001, "b": 0.002, "c": 0.06}, True, []),
])
def test_decision_is_the_pre_registered_rule(rec, rob, p, replaces, below):
    from memofs_eval.studies.recommended import decision

    got = decision({d: _s(*v) for d, v in rec.items()}, {d: _s(*v) for d, v in rob.items()}, p)
    assert got["replaces_robust"] is replaces
    assert got["significantly_below_on"] == below
    assert got["delta"]["a"] == pytest.approx(sum(rec["a"]) / len(rec["a"]) - sum(rob["a"]) / len(rob["a"]))


def test_space_is_the_lodo_space_with_two_stemmed_query_modes_added():
    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies.recommended import MODES, space

    lodo = LD.candidates()  # 2 families x 7 feature sets x the 2 query modes of the LODO study
    assert len(space()) == 2 * len(lodo) == 2 * 7 * 4 == 56
    assert set(lodo) <= set(space())
    assert MODES["raw+stem"] == {**LD.QUERY_MODES["raw"], "stem": True} and MODES["rewritten+stem"] == {"stem": True}


@pytest.fixture(scope="module")
def two_tiny(tmp_path_factory):
    """Two copies of the bundled tiny dataset ("a" and "b"), lexical signals only, and a Lab over them."""
    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies.learned_bench import Bench
    from memofs_eval.studies.recommended import MODES

    root = tmp_path_factory.mktemp("rec")
    tiny = Bench.load("tiny", embedder="none", root=root / "sig")
    benches = {n: dataclasses.replace(tiny, name=n) for n in ("a", "b")}
    return LD.Lab(benches, cache=root / "feat", log=lambda m: None, modes=MODES), root


def test_stemmed_modes_change_the_signals(two_tiny):
    lab, _ = two_tiny
    cfgs = {q: lab.config("a", q) for q in ("raw", "raw+stem", "rewritten", "rewritten+stem")}
    assert cfgs["raw+stem"].stem and not cfgs["raw"].stem and not cfgs["raw+stem"].use_rewrite
    assert len({c.signal_key() for c in cfgs.values()}) == 4


def test_study_holds_each_dataset_out_and_ships_what_it_scored(two_tiny):
    from memofs_eval.studies import learned_lodo as LD
    from memofs_eval.studies.recommended import MODES, heldout_file, ship, study

    lab, root = two_tiny
    cands = [LD.Candidate(q, "portable", "pairwise-logistic") for q in ("raw", "raw+stem")]
    robust = LD.Candidate("raw", "peers", "pairwise-logistic")
    r = study(lab, robust, cands)
    out = root / "models"
    ship(lab, r, out)
    doc = json.loads((out / profile_file("recommended").name).read_text())
    assert doc["candidate"] == r.final.name and doc["settings"]["learned_model"] == "learned-recommended-v1.json"
    for d, other in (("a", "b"), ("b", "a")):
        entry = doc["heldout_models"][d]
        assert entry["model"] == heldout_file(d) and entry["settings"] == {"fusion": "learned", **MODES[r.picks[d].query]}
        model = load_model(out / entry["model"])
        assert set(model.training["datasets"]) == {other}  # never trained on the dataset it is scored on
        # the shipped held-out model, through the online path, ranks exactly as the study scored it
        cfg = RecallConfig.from_dict({**entry["settings"], "learned_model": str(out / entry["model"])})
        frames = lab.frames(d, r.picks[d].query)
        online = {q: fuse_learned(frames[q], cfg, cfg.top_k, model=model).ids(frames[q]) for q in r.runs[d]["recommended"]}
        assert online == r.runs[d]["recommended"]
        # the paired test is Student's paired t on the per-query nDCG@10 (scipy as the independent side)
        s = r.scores[d]
        if (s["recommended"] != s["robust"]).any():
            assert r.p_raw[d] == pytest.approx(stats.ttest_rel(s["recommended"], s["robust"]).pvalue, rel=1e-6)


def test_shipped_heldout_models_never_saw_their_dataset():
    from memofs_eval.studies.systems.base import AdapterConfigError
    from memofs_eval.studies.systems.memofs_library import MemofsLibrary

    if not profile_file("recommended").is_file():
        pytest.skip("recommended profile not shipped in this checkout")
    doc = json.loads(profile_file("recommended").read_text())
    system = MemofsLibrary("rec", profile="recommended", heldout=True)
    for d, entry in doc["heldout_models"].items():
        model = load_model(MODELS_DIR / entry["model"])
        assert d not in model.training["datasets"] and d in doc["trained_on"]
        name = "longmemeval-longmemeval_dev" if d == "longmemeval" else d  # the loader's dataset name
        cfg = system.heldout_config(name)
        assert cfg.learned_model == str(MODELS_DIR / entry["model"]) and cfg.fusion == "learned"
    with pytest.raises(AdapterConfigError, match="no held-out model for dataset 'beir'"):
        system.heldout_config("beir")
    with pytest.raises(AdapterConfigError, match="lists no heldout_models"):
        MemofsLibrary("rob", profile="robust", heldout=True)


def test_readme_table_reads_the_summary(tmp_path):
    from memofs_eval.reporting.readme_tables import recommended_table

    assert "studies.recommended" in recommended_table(tmp_path)
    d = tmp_path / "reports" / "learned" / "recommended"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({
        "embedders": {"locomo": "minilm"}, "absent": ["longmemeval"], "robust": "pairwise-logistic / peers / raw query",
        "shipped": "lambdamart / all / raw+stem query",
        "heldout": {"locomo": {"recommended pick": "lambdamart / all / raw+stem query", "recommended": 0.5032,
                               "robust candidate": 0.4591, "difference": 0.0441, "p (Holm)": 0.00012}},
        "decision": {"replaces_robust": False, "higher_on": ["locomo"], "significantly_below_on": []}}))
    t = recommended_table(tmp_path)
    assert "| locomo (minilm) | lambdamart / all / raw+stem query | 0.503 | 0.459 | +0.044 | 0.00012 |" in t
    assert "does not replace `robust`" in t and "higher on 1 of 1" in t and "Absent when generated: longmemeval" in t
