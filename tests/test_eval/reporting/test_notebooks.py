"""Notebooks: committed without outputs, executed headless by ``memofs_eval.reporting.notebooks``,
and the helpers they call (``memofs_eval.reporting.notebook_api``) checked against independent truth:
the harness's own report, hand-computed exact p-values, the pipeline's final scores."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from nbformat.v4 import new_code_cell, new_notebook  # noqa: E402

import memofs_eval._env  # noqa: F401,E402
from memofs_eval.reporting import notebook_api as nb  # noqa: E402
from memofs_eval.reporting import notebooks as runner  # noqa: E402
from memofs.ranking.fusion import fuse  # noqa: E402
from support import REPO_ROOT

REPO = REPO_ROOT
NOTEBOOKS = REPO / "notebooks"
QUICK = REPO / "eval" / "specs" / "quick.toml"
EXPECTED = ("01_signal_ablation.ipynb", "02_fusion_weights.ipynb", "03_time_and_trust.ipynb",
            "04_failure_analysis.ipynb", "05_locomo.ipynb", "06_systems_tradeoff.ipynb")


# --------------------------------------------------------------------------- committed files


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_notebook_is_valid_and_stripped(name):
    """Policy (notebooks/README.md): committed notebooks carry no outputs."""
    path = NOTEBOOKS / name
    nbk = nbformat.read(path, as_version=4)
    nbformat.validate(nbk)
    assert nbk.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nbk.cells if c.cell_type == "code"]
    assert code, f"{name}: no code cells"
    for i, c in enumerate(code):
        assert c.outputs == [], f"{name}: code cell {i} has outputs (strip them before committing)"
        assert c.execution_count is None, f"{name}: code cell {i} has execution_count {c.execution_count}"
    # figures are named after the notebook so the README links stay unambiguous
    prefix = "nb" + name[:2] + "_"
    names = set(re.findall(r'"(nb\d\d_[a-z0-9_.-]+\.png)"', "".join(c.source for c in code)))
    assert names and all(n.startswith(prefix) for n in names), (name, names)


def test_readme_links_every_figure_the_notebooks_save():
    text = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    saved = set()
    for name in EXPECTED:
        src = "".join(c.source for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells if c.cell_type == "code")
        saved |= set(re.findall(r'"(nb\d\d_[a-z0-9_.-]+\.png)"', src))
    linked = set(re.findall(r"\(\.\./reports/figures/(nb\d\d_[a-z0-9_.-]+\.png)\)", text))
    assert saved == linked
    assert "stripped" in text.lower()


# --------------------------------------------------------------------------- runner pieces


def test_select_by_prefix(tmp_path):
    for n in ("01_a.ipynb", "02_b.ipynb", "10_c.ipynb", "notes.txt"):
        (tmp_path / n).write_text("{}")
    assert [p.name for p in runner.select(tmp_path, None)] == ["01_a.ipynb", "02_b.ipynb", "10_c.ipynb"]
    assert [p.name for p in runner.select(tmp_path, ["01", "10_c"])] == ["01_a.ipynb", "10_c.ipynb"]
    assert runner.select(tmp_path, ["03"]) == []


def test_kernel_is_this_interpreter():
    """Nothing is registered at run time: the python3 spec must launch sys.executable."""
    km = runner.kernel_manager()
    if km is None:
        from jupyter_client.kernelspec import KernelSpecManager

        argv0 = KernelSpecManager().get_kernel_spec("python3").argv[0]
        assert argv0 in {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}", sys.executable}
    else:
        assert km.kernel_spec.argv[0] == sys.executable


def _write(folder: Path, name: str, sources: list[str]) -> None:
    nbk = new_notebook(cells=[new_code_cell(s) for s in sources])
    nbk.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nbk, folder / name)


@pytest.mark.slow  # three Jupyter kernels, one waited out to its timeout
def test_runner_fails_on_a_cell_error_and_on_timeout(tmp_path, capsys):
    src, out = tmp_path / "nbs", tmp_path / "out"
    src.mkdir()
    _write(src, "01_ok.ipynb", ["x = 6 * 7", "print(x)"])
    _write(src, "02_raises.ipynb", ["print('before')", "raise ValueError('boom in cell 2')", "print('never')"])
    _write(src, "03_slow.ipynb", ["import time\ntime.sleep(60)"])
    rc = runner.main(["--notebooks", str(src), "--out", str(out), "--timeout", "8", "--figures", str(tmp_path / "fig")])
    assert rc == 1
    text = capsys.readouterr().out
    assert re.search(r"01_ok\.ipynb\s+ok", text)
    assert re.search(r"02_raises\.ipynb\s+error", text) and "boom in cell 2" in text
    assert re.search(r"03_slow\.ipynb\s+timeout", text)
    assert "FAILED: 02_raises.ipynb, 03_slow.ipynb" in text
    ok = nbformat.read(out / "01_ok.ipynb", as_version=4)
    assert ok.cells[1].outputs[0]["text"] == "42\n"
    bad = nbformat.read(out / "02_raises.ipynb", as_version=4)  # written even when it fails
    assert bad.cells[1].outputs[0]["ename"] == "ValueError" and bad.cells[2].outputs == []
    assert runner.main(["--notebooks", str(src), "--out", str(out), "--only", "01"]) == 0
    assert runner.main(["--notebooks", str(src), "--only", "99"]) == 2


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def quick_report(quick_spec_runs) -> Path:
    """The harness's quick spec on datasets/tiny, written by the CLI as `make eval` would (the
    run test_harness checks; its gate fails on purpose, which leaves the report as it is)."""
    return quick_spec_runs[1][0]


@pytest.mark.slow  # executes a notebook in a Jupyter kernel
def test_notebook_01_end_to_end_on_the_quick_spec(quick_report, tmp_path, capsys):
    committed = (NOTEBOOKS / "01_signal_ablation.ipynb").read_bytes()
    fig, out = tmp_path / "figures", tmp_path / "executed"
    rc = runner.main(["--only", "01", "--spec", str(QUICK), "--dataset", "tiny", "--report", str(quick_report),
                      "--figures", str(fig), "--out", str(out), "--timeout", "400"])
    assert rc == 0, capsys.readouterr().out
    assert (NOTEBOOKS / "01_signal_ablation.ipynb").read_bytes() == committed  # never written back
    for name in ("nb01_ablation.png", "nb01_categories.png"):
        assert (fig / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    executed = nbformat.read(out / "01_signal_ablation.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    # the notebook's re-run must equal the harness's report (results.parquet) for tiny/heldout
    res = pd.read_parquet(quick_report / "results.parquet")
    want = res[(res.dataset == "tiny") & (res.method == "default") & (res.subset == "heldout")
               & (res.category == "all") & (res.metric == "ndcg@10")].score.iloc[0]
    got = float(re.search(r"re-run default ndcg@10: ([0-9.]+)", printed).group(1))
    assert got == pytest.approx(want, abs=1e-4)


def test_locomo_notebook_skips_cleanly_without_the_data(tmp_path, monkeypatch):
    monkeypatch.setenv(nb.LOCOMO_ENV, str(tmp_path / "no-such-locomo"))
    out = tmp_path / "executed"
    assert runner.main(["--only", "05", "--out", str(out), "--figures", str(tmp_path / "fig"), "--timeout", "120"]) == 0
    executed = nbformat.read(out / "05_locomo.ipynb", as_version=4)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert "LoCoMo not found" in code[0].outputs[0]["text"]
    assert all(c.outputs == [] for c in code[1:])
    assert not (tmp_path / "fig").exists() or not list((tmp_path / "fig").glob("*.png"))


def test_systems_notebook_runs_without_the_systems_reports(tmp_path, monkeypatch):
    """Without any systems report (e.g. a checkout that never ran the study) notebook 06 still
    runs: every panel is named as skipped and no figure is written."""
    monkeypatch.setenv(nb.SYSTEMS_ENV, str(tmp_path / "no-such-reports"))
    out, fig = tmp_path / "executed", tmp_path / "fig"
    assert runner.main(["--only", "06", "--out", str(out), "--figures", str(fig), "--timeout", "120"]) == 0
    code = [c for c in nbformat.read(out / "06_systems_tradeoff.ipynb", as_version=4).cells if c.cell_type == "code"]
    printed = "".join(o.get("text", "") for o in code[0].outputs)
    assert printed.count("panel skipped") == 3 and "no figure" in printed
    assert not fig.exists() or not list(fig.glob("*.png"))


# --------------------------------------------------------------------------- notebook_api


@pytest.fixture(scope="module")
def tiny():
    s = nb.spec(QUICK)
    return s, nb.dataset(s, "tiny")


def test_evaluate_variants_matches_the_harness_report(quick_report, tiny):
    """Independent truth: the report the CLI wrote for the same spec."""
    s, data = tiny
    variants = nb.only_axes(s, toggles=s.toggles, sweeps={"w_vec": (0.0, s.default_config().w_vec)}).variants()
    subset, qids = nb.headline_subset(data)
    pq = nb.evaluate_variants(data, variants, qids, metrics=["ndcg@10", "recall@5"])
    res = pd.read_parquet(quick_report / "results.parquet")
    for name in ("default", "-vector", "only:bm25", "w_vec=0"):
        r = res[(res.dataset == "tiny") & (res.method == name) & (res.subset == subset) & (res.category == "all")]
        for metric in ("ndcg@10", "recall@5"):
            assert pq[name][metric].mean() == pytest.approx(float(r[r.metric == metric].score.iloc[0]), abs=1e-9), (name, metric)
    # a sweep value equal to the default is the default's run, computed once
    same = f"w_vec={s.default_config().w_vec:g}"
    assert pq[same].equals(pq["default"])


def test_explain_parts_add_up_to_the_pipeline_score(tiny):
    """final = round((vec + lex + rerank + recency + confidence) * penalty, 4), and the
    ranking is the pipeline's own fuse."""
    s, data = tiny
    cfg = s.default_config()
    frames = nb.frames(data, cfg, s.embedder)
    checked = 0
    for qid, frame in frames.items():
        ex = nb.explain(frame, cfg, k=10)
        fused = fuse(frame, cfg, 10)
        truth = list(zip(fused.ids(frame), fused.scores.tolist(), strict=True))
        assert list(ex.id) == [d for d, _ in truth]
        parts = ex[["part_vec", "part_lex", "part_rerank", "part_recency", "part_confidence"]].sum(axis=1)
        np.testing.assert_allclose(np.round(parts * ex.penalty_factor, 4), [sc for _, sc in truth], atol=1.5e-4)
        checked += len(ex)
    assert checked > 0


def test_paired_deltas_against_exact_randomisation_p():
    """Six queries all improved by 1: the exact two-sided sign-flip p is 2 / 2**6; two
    queries with differences (1, 0) give p = 1 (every flip is as extreme)."""
    q = [f"q{i}" for i in range(8)]
    control = pd.DataFrame({"m": [0.0] * 6 + [0.0, 0.5]}, index=q)
    treatment = pd.DataFrame({"m": [1.0] * 6 + [1.0, 0.5]}, index=q)
    groups = {**{x: "a" for x in q[:6]}, "q6": "b", "q7": "b"}
    d = nb.paired_deltas(control, treatment, "m", groups, seed=1, n_boot=200, n_perm=20000).set_index("group")
    assert d.loc["a", "delta"] == 1.0 and d.loc["a", "lo"] == 1.0 and d.loc["a", "hi"] == 1.0
    assert d.loc["a", "p"] == pytest.approx(2 / 64, abs=0.006)
    assert d.loc["b", "delta"] == 0.5 and d.loc["b", "p"] == 1.0
    assert d.loc["all", "n"] == 8 and d.loc["all", "delta"] == pytest.approx(7 / 8)


def test_peer_scores_restricted_to_a_query_subset_equal_the_full_run(tiny):
    """Restricting the queries must not change any query's baseline scores."""
    s, data = tiny
    qids = [q.id for q in data.queries]
    full = nb.peer_scores(data, s)
    part = nb.peer_scores(data, s, qids[:5])
    assert set(part.bm25) == set(qids[:5])
    for q in qids[:5]:
        assert part.bm25[q] == full.bm25[q] and part.dense[q] == full.dense[q]
    rrf_full = full.run("rrf")
    assert part.run("rrf") == {q: rrf_full[q] for q in qids[:5]}  # RRF and min-max are per query
    w = full.wsum(1.0)  # dense weight 1: the dense order (ranx min-max keeps it)
    dense = full.run("dense")
    assert all(w[q][:3] == dense[q][:3] for q in qids if len(dense[q]) >= 3 and len(set(full.dense[q].values())) == len(full.dense[q]))


def test_report_marks_follow_the_report_rule(tmp_path):
    sig = pd.DataFrame([
        {"dataset": "d", "method": "a", "metric": "ndcg@10", "test": "fisher", "p": 0.001, "delta": -0.1, "p_holm": 0.01, "significant": True},
        {"dataset": "d", "method": "a", "metric": "ndcg@10", "test": "student", "p": 0.001, "delta": -0.1, "p_holm": 0.01, "significant": True},
        {"dataset": "d", "method": "b", "metric": "ndcg@10", "test": "student", "p": 0.2, "delta": 0.1, "p_holm": 0.4, "significant": False},
        {"dataset": "d", "method": "c", "metric": "ndcg@10", "test": "fisher", "p": 0.001, "delta": 0.2, "p_holm": 0.01, "significant": True},
    ])
    rep = nb.Report(tmp_path, pd.DataFrame(), pd.DataFrame(), sig, {})
    assert (rep.marks("d", "a", "ndcg@10"), rep.marks("d", "b", "ndcg@10"), rep.marks("d", "c", "ndcg@10")) == ("*+v", "", "+")


def test_load_report_names_the_missing_file(tmp_path):
    (tmp_path / "results.parquet").write_bytes(b"")
    with pytest.raises(nb.NotebookInputError, match=r"missing confidence_intervals\.csv, significance\.csv, manifest\.json.*make eval"):
        nb.load_report(tmp_path)


def test_save_figure_is_byte_stable_and_checks_the_name(tmp_path, monkeypatch):
    monkeypatch.setenv(nb.FIGURES_ENV, str(tmp_path))

    def draw():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        ax.set_title("t")
        return fig

    a = nb.save_figure(draw(), "nb09_test.png").read_bytes()
    b = nb.save_figure(draw(), "nb09_test.png").read_bytes()
    assert a == b and a[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="nbNN_"):
        nb.save_figure(draw(), "figure.png")
    plt.close("all")


def test_locomo_path_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(nb.LOCOMO_ENV, str(tmp_path))
    assert nb.locomo_path() == tmp_path.resolve()
    monkeypatch.setenv(nb.LOCOMO_ENV, str(tmp_path / "missing"))
    assert nb.locomo_path() is None


def test_environment_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv(nb.SPEC_ENV, str(QUICK))
    monkeypatch.setenv(nb.DATASET_ENV, "tiny")
    monkeypatch.setenv(nb.REPORT_ENV, str(tmp_path))
    s = nb.spec()
    assert s.name == "quick" and nb.dataset(s).name == "tiny" and nb.report_dir() == tmp_path.resolve()
    monkeypatch.setenv(nb.DATASET_ENV, "nope")
    with pytest.raises(nb.NotebookInputError, match=r"quick\.toml: no dataset 'nope'"):
        nb.dataset(s)
