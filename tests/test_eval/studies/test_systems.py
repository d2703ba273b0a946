"""Memory systems under test (memofs_eval.studies.systems, issue 40): the runner, its guards, the
spec's errors, the run-file adapter and the memofs library adapter against the harness."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from memofs_datasets.format import bundled_datasets
from memofs_eval.scoring import measures as MS
from memofs_eval.scoring import stats as S
from memofs_eval.inputs.data import EvalData, load
from memofs_eval.runs.runner import fused_run
from memofs_eval.runs.signals_cache import SignalCache
from memofs_eval.inputs.spec import DatasetRef, SpecError, load_spec
from memofs_eval.studies.systems.base import Recalled, System
from memofs_eval.studies.systems.compare import compare
from memofs_eval.studies.systems.config import SystemSpec, load_systems_spec
from memofs_eval.studies.systems.run import run_in_process, run_system
from support import REPO_ROOT

REPO = REPO_ROOT
QUICK = REPO / "eval" / "specs" / "quick.toml"


@pytest.fixture(scope="module")
def tiny() -> EvalData:
    ref = DatasetRef("tiny", bundled_datasets()["tiny"])
    return EvalData(ref, load(ref))


def lexical(k: int, tiny: EvalData):
    return run_in_process(SystemSpec("memofs-lex", "memofs", {"embedder": "none"}), [tiny], k, 60)[0]


class Scripted(System):
    """A system whose every query answers from a script: an id list, an exception or a hang."""

    def __init__(self, name, script, default):
        self.name, self.script, self.default = name, script, default

    def ingest(self, scope, memories):
        self.corpus = [m.id for m in memories]

    def recall(self, scope, ask, k):
        what = self.script.get(ask.id, self.default)
        if what == "crash":
            raise RuntimeError("boom\nsecond line")
        if what == "hang":
            time.sleep(30)
        if what == "corpus":
            return Recalled(tuple(self.corpus[:k]))
        return Recalled(tuple(what))


def test_library_ranks_as_the_harness_default(tiny, tmp_path):
    """The library adapter (Recaller.recall per scope) gives exactly the harness's `default`
    ranking (cached frames recombined by fuse), query by query."""
    spec = load_spec(QUICK)
    cfg = spec.default_config()
    frames = SignalCache(tmp_path, progress=False).frames(tiny, cfg, "none").frames
    harness = fused_run(frames, cfg, spec.k)
    run = lexical(spec.k, tiny)
    assert run.failures == {}
    assert run.ranked == harness
    assert len(run.recall_s) == len(tiny.queries) and run.n_memories > 0


def test_crash_hang_and_unknown_ids_are_recorded_per_query(tiny):
    qs = [q.id for q in tiny.queries]
    crash, hang, liar = qs[0], qs[1], qs[2]
    known = next(iter(tiny.qrels[liar]))
    script = {crash: "crash", hang: "hang", liar: ["nope-1", known, "nope-2"]}
    t0 = time.perf_counter()
    run = run_system(Scripted("flaky", script, "corpus"), tiny, 5, timeout=0.5)
    assert time.perf_counter() - t0 < 25  # the hang was abandoned, not waited for
    assert run.failures[crash] == "RuntimeError: boom second line"
    assert run.failures[hang].startswith("CallTimeout")
    assert run.failures[liar] == "2 unknown id(s), e.g. 'nope-1'"
    assert run.ranked[crash] == [] and run.ranked[hang] == [] and run.ranked[liar] == [known]
    assert set(run.failures) == {crash, hang, liar}
    assert all(len(run.ranked[q]) == 5 for q in qs if q not in run.failures)
    spec = load_spec(QUICK)
    cmp = compare(spec, [tiny], {"ok": [run_system(Scripted("ok", {}, "corpus"), tiny, 5)], "flaky": [run]}, "ok")
    assert cmp.failures["query"].tolist() == sorted([crash, hang, liar])
    pq = cmp.per_query[("tiny", "flaky")]
    assert pq.loc[crash, "ndcg@10"] == 0.0 and pq.loc[hang, "ndcg@10"] == 0.0  # scored, not dropped


def test_ingest_failure_fails_its_scope_only(tiny):
    class BadIngest(Scripted):
        def ingest(self, scope, memories):
            raise OSError("disk full")

    run = run_system(BadIngest("bad", {}, "corpus"), tiny, 5)
    assert set(run.failures) == {q.id for q in tiny.queries}
    assert all("ingest of scope" in r and "OSError: disk full" in r for r in run.failures.values())


def test_comparison_statistics_are_the_harness_functions(tiny):
    """A system identical to the reference: p = 1, delta 0; CIs equal stats.bootstrap_ci of
    the per-query values; Holm is applied over every comparison."""
    spec = load_spec(QUICK)
    a = lexical(spec.k, tiny)
    worse = run_system(Scripted("rev", {}, "corpus"), tiny, spec.k)
    twin = run_system(Scripted("twin", {}, "corpus"), tiny, spec.k)
    cmp = compare(spec, [tiny], {"ref": [a], "rev": [worse], "twin": [twin]}, "ref")
    same = cmp.significance[(cmp.significance.a == "rev") & (cmp.significance.b == "twin")]
    assert (same["p"] == 1.0).all() and (same["delta"] == 0.0).all()
    for test in spec.stats.tests:
        sub = cmp.significance[cmp.significance.test == test]
        assert sub["p_holm"].tolist() == pytest.approx(S.holm(sub["p"].tolist()))
    assert len(cmp.significance) == 3 * len(spec.stats.tests) * len(spec.stats.metrics)
    pq = cmp.per_query[("tiny", "ref")].loc[tiny.subsets()[tiny.headline_subset]]
    row = cmp.results[(cmp.results.system == "ref") & (cmp.results.metric == "ndcg@10")].iloc[0]
    assert (row["lo"], row["hi"]) == S.bootstrap_ci(pq["ndcg@10"].to_numpy(), spec.stats.bootstrap, spec.seed)
    assert row["mean"] == pytest.approx(np.mean(pq["ndcg@10"]))
    trivial = cmp.trivial.set_index("metric")["n_trivial"]
    facts = MS.build_facts(tiny.dataset, spec.default_config().kind_expiry_days, [q.id for q in tiny.queries])
    assert trivial["recall@20"] == len(MS.trivial_queries(facts, "recall@20", list(pq.index)))
    eff = cmp.efficiency.set_index("system")
    assert 0.0 <= eff.loc["ref", "tie_rate@10"] <= 1.0 and np.isnan(eff.loc["rev", "tie_rate@10"])


def write_trec(path: Path, ranked: dict[str, list[str]], rename=lambda d: d) -> None:
    lines = [f"{q} Q0 {rename(d)} {r + 1} {len(ds) - r} ext" for q, ds in ranked.items() for r, d in enumerate(ds)]
    path.write_text("\n".join(lines) + "\n")


def test_run_file_reproduces_a_run_through_an_id_map(tiny, tmp_path):
    """A TREC run of the library's ranking, written under foreign ids with an id map, scores
    exactly as the library's own run (same per-query metrics)."""
    spec = load_spec(QUICK)
    ref = lexical(spec.k, tiny)
    write_trec(tmp_path / "run.trec", ref.ranked, rename=lambda d: f"ext-{d}")
    all_ids = {m.id for m in tiny.dataset.memories} | {d for ds in ref.ranked.values() for d in ds}
    (tmp_path / "ids.tsv").write_text("".join(f"ext-{d}\t{d}\n" for d in sorted(all_ids)))
    rf = run_in_process(SystemSpec("rf", "run-file", {"path": "run.trec", "id_map": "ids.tsv"}, tmp_path), [tiny], spec.k, 60)[0]
    assert rf.failures == {} and rf.ranked == ref.ranked
    cmp = compare(spec, [tiny], {"lib": [ref], "rf": [rf]}, "lib")
    assert cmp.per_query[("tiny", "lib")].equals(cmp.per_query[("tiny", "rf")])


def test_run_file_defects_are_reported_per_query(tiny, tmp_path):
    q0, q1 = [q.id for q in tiny.queries][:2]
    (tmp_path / "run.trec").write_text(f"{q0} Q0 {next(iter(tiny.qrels[q0]))} 1 2.0 x\n")
    rf = run_in_process(SystemSpec("rf", "run-file", {"path": "run.trec"}, tmp_path), [tiny], 10, 60)[0]
    assert q0 not in rf.failures and rf.failures[q1] == f"KeyError: \"query '{q1}' is not in run.trec\""
    (tmp_path / "bad.trec").write_text(f"{q0} Q0 d1 1 2.0 x\n{q0} Q0 d2 2 high x\n")
    bad = run_in_process(SystemSpec("rf", "run-file", {"path": "bad.trec"}, tmp_path), [tiny], 10, 60)[0]
    assert set(bad.failures.values()) == {f"could not open: ValueError: {tmp_path / 'bad.trec'}:2: score: not a number: 'high'"}


@pytest.mark.parametrize("body, message", [
    ('[[systems]]\nname = "a"\nadapter = "memofs"\noptions = { profil = "robust" }\n',
     "systems.toml:5: systems[0].options.profil: unknown option (allowed: profile, embedder, config, heldout)"),
    ('[[systems]]\nname = "a"\nadapter = "memofs"\n\n[[systems]]\nname = "b"\nadapter = "run-file"\noptions = { path = 3 }\n',
     "systems.toml:9: systems[1].options.path: expected str, got int 3"),
    ('[[systems]]\nname = "a"\nadapter = "run-file"\n', "systems.toml: systems[0].options.path: required option is missing"),
    ('[[systems]]\nname = "a"\nadapter = "nosuch"\n', "systems.toml:4: systems[0].adapter: expected one of"),
    ('reference = "zz"\n[[systems]]\nname = "a"\nadapter = "memofs"\n', "systems.toml: reference: 'zz' is not one of the systems"),
    ('timeout_s = -1\n[[systems]]\nname = "a"\nadapter = "memofs"\n', "systems.toml: timeout_s: expected a positive number"),
    ('[[systems]]\nname = "a"\nadapter = "memofs"\nscopes = 0\n', "systems.toml:5: systems[0].scopes: expected a positive whole number"),
    ('headline = ["ndcg@11"]\n[[systems]]\nname = "a"\nadapter = "memofs"\n',
     "systems.toml: headline: expected a non-empty list of the harness spec's metrics"),
    ('report = "../x"\n[[systems]]\nname = "a"\nadapter = "memofs"\n', "systems.toml: report: expected a folder name"),
])
def test_malformed_systems_spec_fails_with_one_line_naming_the_field(tmp_path, body, message):
    path = tmp_path / "systems.toml"
    path.write_text(f'harness = "{QUICK}"\n' + body)
    with pytest.raises(SpecError) as err:
        load_systems_spec(path)
    text = str(err.value)  # file, line of the field (when the field is written), field, why
    assert "\n" not in text and text.startswith(message.replace("systems.toml", str(path)))


def test_entry_point_writes_the_report(tmp_path, capsys):
    from memofs_eval.provenance.stamp import recorded
    from memofs_eval.studies.systems.__main__ import main

    spec = tmp_path / "systems.toml"
    spec.write_text(f'harness = "{QUICK}"\ndatasets = ["tiny"]\nisolate = false\n'
                    '[[systems]]\nname = "lex"\nadapter = "memofs"\noptions = { embedder = "none" }\n'
                    '[[systems]]\nname = "gone"\nadapter = "run-file"\noptions = { path = "missing.trec" }\nnote = "a run file that is not there"\n')
    # a system that answered no query is refused: one line naming it, nothing written
    assert main([str(spec), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: gone failed every one of its 22 queries on tiny (e.g. could not open: FileNotFoundError")
    assert err.endswith("no report written (--allow-failed writes it)") and not (tmp_path / "out").exists()
    assert main([str(spec), "--out", str(tmp_path / "out"), "--allow-failed"]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "--allow-failed" in md  # the command that wrote it says so
    assert recorded(md) is not None and "## tiny" in md and "| lex |" in md and "| gone |" in md
    assert "`gone`: 22 queries; e.g." in md and "could not open: FileNotFoundError" in md
    assert "Trivial cutoff:** `recall@20`" in md  # tiny's scopes hold at most 20 memories
    res = __import__("pandas").read_csv(tmp_path / "out" / "results.csv")
    gone = res[(res.system == "gone") & res.metric.isin(["ndcg@10", "recall@5", "mrr@10"])]
    assert set(res["system"]) == {"lex", "gone"} and len(gone) == 3 and (gone["mean"] == 0).all()
    spec.write_text(f'harness = "{QUICK}"\n[[systems]]\nname = "x"\nadapter = "memofs"\noptions = {{ embedder = 3 }}\n')
    assert main([str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"error: {spec}:5: systems[0].options.embedder: expected str, got int 3"


class DyingSpec(SystemSpec):
    """A system whose process dies outright (as a native crash would) when it starts."""

    def build(self):
        import os

        os._exit(9)


def test_an_isolated_system_whose_process_dies_fails_its_queries_only(tiny):
    from memofs_eval.studies.systems.run import run_isolated

    (run,) = run_isolated(DyingSpec("dies", "memofs", {}), [tiny], 5, 30)
    assert set(run.failures) == {q.id for q in tiny.queries} and not any(run.ranked.values())
    assert all(r.startswith("system process died: BrokenProcessPool") for r in run.failures.values())


def test_a_sampled_system_runs_its_seeded_scopes_only_and_is_paired_on_them(tiny):
    """``scopes = 1``: the same seeded scope every time; the system is asked that scope's
    queries only (its ranking of them is the full run's: a scope is ranked on its own corpus),
    its cells cover those queries, and the paired test against the full run is on them alone."""
    from memofs_eval.studies.systems.run import sample_scopes

    spec = load_spec(QUICK)
    full = lexical(spec.k, tiny)
    part = run_in_process(SystemSpec("part", "memofs", {"embedder": "none"}, scopes=1), [tiny], spec.k, 60, seed=spec.seed)[0]
    chosen = sample_scopes(tiny, 1, spec.seed)
    assert chosen == sample_scopes(tiny, 1, spec.seed) and len(chosen) == 1
    assert sample_scopes(tiny, 5, spec.seed) == sorted({q.scope for q in tiny.queries}, key=lambda s: (s is not None, s or ""))
    asked = [q.id for q in tiny.queries if q.scope == chosen[0]]
    assert part.asked == tuple(asked) and set(part.ranked) == set(asked) and part.scopes == f"1 of 3 scopes (seed {spec.seed})"
    assert part.ranked == {q: full.ranked[q] for q in asked}
    cmp = compare(spec, [tiny], {"full": [full], "part": [part]}, "full")
    mine = [q for q in tiny.subsets()[tiny.headline_subset] if q in set(asked)]
    row = cmp.results[(cmp.results.system == "part") & (cmp.results.metric == "ndcg@10")].iloc[0]
    assert row["n_queries"] == len(mine) and row["scopes"] == part.scopes
    assert row["mean"] == pytest.approx(cmp.per_query[("tiny", "full")].loc[mine, "ndcg@10"].mean())
    sig = cmp.significance
    assert (sig["n_paired"] == len(mine)).all() and (sig["delta"] == 0.0).all() and (sig["p"] == 1.0).all()


def test_embedding_cache_hits_are_counted_per_run(tiny, tmp_path, monkeypatch):
    """A run on a cold cache encodes every text it embeds (all misses); the same run again
    reads them all from the cache (hit rate 1), through the harness's on-disk cache."""
    monkeypatch.setenv("MEMOFS_EVAL_CACHE", str(tmp_path))
    sut = SystemSpec("lsa", "memofs", {"embedder": "lsa"})
    cold = run_in_process(sut, [tiny], 10, 60)[0]
    warm = run_in_process(sut, [tiny], 10, 60)[0]
    assert cold.embed_hits == 0 and cold.embed_misses >= len(tiny.dataset.memories)
    assert warm.embed_misses == 0 and warm.embed_hits == cold.embed_misses
    assert warm.efficiency()["embed_cache_hit_rate"] == 1.0 and cold.efficiency()["embed_cache_hit_rate"] == 0.0
    assert warm.ranked == cold.ranked and any((tmp_path / "embeddings").rglob("*.npy"))


def test_a_spec_reuses_another_specs_systems_with_exclusions_and_samples(tmp_path):
    (tmp_path / "base.toml").write_text(f'harness = "{QUICK}"\n[[systems]]\nname = "a"\nadapter = "memofs"\n'
                                        '[[systems]]\nname = "b"\nadapter = "memofs"\noptions = { profile = "robust" }\n'
                                        '[[systems]]\nname = "c"\nadapter = "run-file"\noptions = { path = "x.trec" }\n')
    (tmp_path / "sub").mkdir()
    spec = tmp_path / "sub" / "more.toml"
    spec.write_text(f'harness = "{QUICK}"\nsystems_from = "../base.toml"\nexclude = ["c"]\nreport = "more"\n'
                    'headline = ["ndcg@10"]\nstats_metrics = ["mrr@10"]\n[scopes]\nb = 2\n')
    s = load_systems_spec(spec)
    assert [(x.name, x.scopes, x.options) for x in s.systems] == [("a", None, {}), ("b", 2, {"profile": "robust"})]
    assert s.systems[0].base == tmp_path  # option paths resolve against the spec that wrote them
    assert s.report == "more" and s.harness.headline == ("ndcg@10",) and s.harness.stats.metrics == ("mrr@10",)
    assert s.reference == "a"
    spec.write_text(f'harness = "{QUICK}"\nsystems_from = "../base.toml"\n[scopes]\nzz = 2\n')
    with pytest.raises(SpecError, match=r"more.toml: scopes.zz: not one of the systems \(a, b, c\)$"):
        load_systems_spec(spec)
    spec.write_text(f'harness = "{QUICK}"\nsystems_from = "../base.toml"\nexclude = ["a", "b", "c"]\n')
    with pytest.raises(SpecError, match=r"more.toml: exclude: leaves no system to run$"):
        load_systems_spec(spec)


def test_the_committed_systems_specs_load():
    """systems.toml and its LoCoMo / LongMemEval specs: every system of the first in the others
    (less the agent-memory run file), the upstream profile among them, samples declared."""
    specs = {p.stem: load_systems_spec(p) for p in (REPO / "eval" / "specs").glob("systems*.toml")}
    names = [s.name for s in specs["systems"].systems]
    assert "memofs-upstream" in names and specs["systems"].report == ""
    for stem, folder in (("systems-locomo", "locomo"), ("systems-longmemeval", "longmemeval")):
        s = specs[stem]
        assert s.report == folder and [x.name for x in s.systems] == [n for n in names if n != "harness-default-runfile"]
        assert {x.name for x in s.systems if x.scopes} >= {"mem0"}


def test_memofs_library_config_option_overrides_the_profile_and_names_a_bad_field():
    from memofs.ranking.config import RecallConfig
    from memofs_eval.studies.systems.base import AdapterConfigError
    from memofs_eval.studies.systems.memofs_library import MemofsLibrary

    sys_ = MemofsLibrary("robust-stem", profile="robust", config={"stem": True})
    assert sys_.config == RecallConfig.from_dict({"profile": "robust"}).replace(stem=True)
    with pytest.raises(AdapterConfigError) as err:
        MemofsLibrary("bad", config={"stemm": True})
    assert "options.config" in str(err.value) and "stemm" in str(err.value) and "\n" not in str(err.value)
