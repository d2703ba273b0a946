"""Fusion against hand computation and its own switch semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.ranking.config import RecallConfig
from memofs.ranking.fusion import fuse
from memofs.ranking.rounding import round_half_up
from memofs.ranking.terms import recency
from memofs.signals.frame import SignalFrame
from support import frame

NAN = float("nan")


def test_recency_seed_numbers():
    assert recency(np.array([30.0]), 30)[0] == pytest.approx(0.5)
    assert recency(np.array([60.0]), 30)[0] == pytest.approx(0.25)
    assert recency(np.array([1.0]), 30)[0] == pytest.approx(0.977, abs=5e-4)
    assert recency(np.array([NAN]), 30)[0] == 0.5  # no timestamp: neutral (upstream)
    assert recency(np.array([-5.0]), 30)[0] == 1.0  # future dates clamp to age 0
    assert recency(np.array([10.0]), 0)[0] == 1.0


def test_final_score_by_hand():
    f = frame([
        {"id": "a", "cos": 0.8, "bm25": 2.0, "fuzzy": 0.5, "rerank": 0.4, "age": 30, "conf": 0.9, "kind": "decision"},
        {"id": "b", "cos": 0.1, "bm25": 0.0, "fuzzy": 0.0, "rerank": 0.0, "age": 1, "kind": "decision"},
    ])
    out = fuse(f, RecallConfig())
    got = dict(zip(out.ids(f), out.scores))
    lex = 2.0 + 0.15 * 0.5
    base = 0.5 * (0.6 * 0.8 + 0.4 * lex / (lex + 2)) + 0.5 * 0.4
    assert got["a"] == round(0.7 * base + 0.2 * 0.5 + 0.1 * 0.9, 4)
    base_b = 0.5 * (0.6 * 0.1) + 0.5 * 0.0
    assert got["b"] == round(0.7 * base_b + 0.2 * 0.5 ** (1 / 30) + 0.1 * 0.5, 4)  # default confidence 0.5
    assert out.weights.w_vec == 0.6 and out.weights.w_lex == pytest.approx(0.4)


def test_penalties_compound_to_point_three():
    row = {"id": "old", "cos": 0.7, "bm25": 1.0, "rerank": 0.5, "age": 400.0, "conf": 1.0, "kind": "decision"}
    clean = fuse(frame([row]), RecallConfig(use_drift=False, use_decay=False, round_decimals=12)).scores[0]
    both = fuse(frame([{**row, "stale": True}]), RecallConfig(round_decimals=12)).scores[0]
    assert both == pytest.approx(0.3 * clean, abs=1e-12)
    # a 400-day note would be past its floor too; a 300-day decision is not
    young = fuse(frame([{**row, "age": 300.0}]), RecallConfig(use_drift=False, round_decimals=12)).scores[0]
    young_ref = fuse(frame([{**row, "age": 300.0}]), RecallConfig(use_drift=False, use_decay=False, round_decimals=12)).scores[0]
    assert young == young_ref


def test_dynamic_weights():
    rows = [{"id": "a", "cos": 0.9, "bm25": 0.0}, {"id": "b", "cos": 0.2, "bm25": 3.0}]
    assert fuse(frame(rows, vector_ok=False), RecallConfig()).weights.w_vec == 0.0  # embedder failed
    no_lex = [{"id": "a", "cos": 0.9}, {"id": "b", "cos": 0.2}]
    w = fuse(frame(no_lex), RecallConfig()).weights
    assert (w.w_vec, w.w_lex) == (1.0, 0.0)  # pure semantic query: vectors take over
    # vector path empty: no document has a vector -> lexical only
    w = fuse(frame([{"id": "a", "bm25": 1.0}, {"id": "b"}]), RecallConfig()).weights
    assert (w.w_vec, w.w_lex) == (0.0, 1.0)
    # both paths empty -> no candidates at all
    empty = fuse(frame([{"id": "a"}, {"id": "b"}], vector_ok=False), RecallConfig())
    assert empty.rows.size == 0 and "no candidates" in empty.weights.reason


def test_pools_bound_candidates_and_ties_by_id():
    rows = [{"id": f"m{i:02d}", "cos": 0.5, "bm25": 0.0} for i in range(20)]
    out = fuse(frame(rows), RecallConfig(top_k=2, vector_pool_multiplier=3))
    assert out.rows.size == 2
    assert out.ids(frame(rows)) == ["m00", "m01"]  # every score equal: id ascending


def test_graph_documents_excluded_unless_asked():
    rows = [{"id": "graph:concept:d1", "bm25": 5.0, "graph": True}, {"id": "m1", "bm25": 1.0}]
    assert fuse(frame(rows, vector_ok=False), RecallConfig()).ids(frame(rows, vector_ok=False)) == ["m1"]
    f = frame(rows, vector_ok=False)
    assert fuse(f, RecallConfig(include_graph_docs=True)).ids(f)[0] == "graph:concept:d1"


unit = st.floats(0, 1)
row_st = st.fixed_dictionaries({
    "cos": st.one_of(unit, st.just(NAN)), "bm25": st.floats(0, 8), "fuzzy": unit, "rerank": unit,
    "age": st.one_of(st.floats(0, 900), st.just(NAN)), "conf": st.one_of(unit, st.just(NAN)),
    "kind": st.sampled_from(["decision", "note", "preference", "constraint", "summary"]), "stale": st.booleans(),
})
TWINS = [
    ({"use_recency": False}, {"w_recency": 0.0}),
    ({"use_confidence": False}, {"w_confidence": 0.0}),
    ({"use_reranker": False}, {"rerank_blend": 0.0}),
    ({"use_drift": False}, {"stale_penalty": 1.0}),
    ({"use_decay": False}, {"unverified_penalty": 1.0}),
    ({"use_fuzzy": False}, {"fuzzy_boost": 0.0}),
    ({"use_vector": False}, {"w_vec": 0.0}),
]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(row_st, min_size=1, max_size=25), k=st.integers(1, 12), vec=st.booleans())
def test_switch_off_equals_zero_weight(rows, k, vec):
    f = frame([{"id": f"d{i}", **r} for i, r in enumerate(rows)], vector_ok=vec)
    for off, zero in TWINS:
        a = fuse(f, RecallConfig(**off), k)
        b = fuse(f, RecallConfig(**zero), k)
        assert a.ids(f) == b.ids(f), off
        np.testing.assert_array_equal(a.scores, b.scores)
    # and fusion is a pure function of its inputs
    np.testing.assert_array_equal(fuse(f, RecallConfig(), k).scores, fuse(f, RecallConfig(), k).scores)


def test_switch_really_removes_influence():
    base = {"id": "a", "cos": 0.5, "bm25": 1.0, "rerank": 0.5, "conf": 0.5, "age": 10.0, "kind": "reference"}
    other = {"id": "b", "cos": 0.5, "bm25": 1.0, "rerank": 0.5, "conf": 0.5, "age": 500.0, "kind": "reference"}
    f = frame([base, other])
    on = dict(zip(fuse(f, RecallConfig()).ids(f), fuse(f, RecallConfig()).scores))
    off = dict(zip(fuse(f, RecallConfig(use_recency=False)).ids(f), fuse(f, RecallConfig(use_recency=False)).scores))
    assert on["a"] > on["b"] and off["a"] == off["b"]


def test_scores_round_half_up_like_upstream():
    # 1/32 = 0.03125 is exact in binary and x * 1e4 = 312.5: upstream's Math.round gives
    # 0.0313, numpy's half-even np.round gives 0.0312; 7/32 = 0.21875 rounds up in both
    x = np.array([1 / 32, 7 / 32, 0.12344, 0.0])
    assert round_half_up(x, 4).tolist() == [0.0313, 0.2188, 0.1234, 0.0]
    assert np.round(x, 4).tolist()[0] == 0.0312  # the rule this replaces


def test_config_validation():
    with pytest.raises(ValueError, match="w_vec"):
        RecallConfig(w_vec=1.5)
    with pytest.raises(ValueError, match="must be in \\(0, 1\\]"):
        RecallConfig(w_recency=0.5)
    with pytest.raises(ValueError, match="task_type"):
        RecallConfig(task_type="deploy")
    with pytest.raises(ValueError, match=">= 0"):
        RecallConfig(k1=-1)
    with pytest.raises(ValueError, match="unknown RecallConfig field"):
        RecallConfig().replace(w_vector=0.5)
    assert RecallConfig.from_dict(RecallConfig().to_dict()) == RecallConfig()


def naive_fuse(rows: list[dict], cfg: RecallConfig, k: int, vector_ok: bool, rerank_ok: bool) -> list[tuple[str, float]]:
    """Spec "Fusion" steps 1-8 one document at a time, in plain Python (no numpy), for
    the dynamic-weights default: the independent reference the vectorised fuse must equal."""
    floors = cfg.kind_expiry_days
    docs = [r for r in rows if cfg.include_graph_docs or not r.get("graph", False)]

    def lexical(r):
        return (r.get("bm25", 0.0) if cfg.use_bm25 else 0.0) + (cfg.fuzzy_boost * r.get("fuzzy", 0.0) if cfg.use_fuzzy else 0.0)

    def finite(x):
        return x == x and x not in (float("inf"), float("-inf"))

    has_cos = [r for r in docs if finite(r.get("cos", NAN))]
    vec_usable = cfg.use_vector and vector_ok and cfg.w_vec > 0 and bool(has_cos)
    lex_usable = (cfg.use_bm25 or (cfg.use_fuzzy and cfg.fuzzy_boost > 0)) and cfg.w_vec < 1
    lex_hits = [r for r in docs if lexical(r) > 0] if lex_usable else []
    if not vec_usable and not lex_hits:
        return []
    wv, wl = (0.0, 1.0) if not vec_usable else (1.0, 0.0) if not lex_hits else (cfg.w_vec, 1 - cfg.w_vec)

    def top(cands, key, n):
        return [r["id"] for r in sorted(cands, key=lambda r: (-key(r), r["id"]))[:n]]

    pool = set()
    if wv > 0:
        pool |= set(top(has_cos, lambda r: r["cos"], math.ceil(k * cfg.vector_pool_multiplier)))
    if wl > 0:
        pool |= set(top(lex_hits, lexical, math.ceil(k * cfg.lexical_pool_multiplier)))

    def clamp(x):
        return min(1.0, max(0.0, x)) if finite(x) else 0.0

    out = []
    for r in docs:
        if r["id"] not in pool:
            continue
        lex = lexical(r)
        sat = lex / (lex + cfg.saturation_c) if lex > 0 else 0.0
        base = wv * clamp(r.get("cos", NAN)) + wl * clamp(sat)
        if cfg.use_reranker and rerank_ok:
            base = (1 - cfg.rerank_blend) * base + cfg.rerank_blend * clamp(r.get("rerank", NAN))
        age = r.get("age", NAN)
        rec = 0.5 if age != age else 0.5 ** (max(age, 0.0) / cfg.half_life_days)
        conf = r.get("conf", NAN)
        conf = clamp(cfg.default_confidence if conf != conf else conf)
        final = cfg.w_relevance * base + (cfg.w_recency * rec if cfg.use_recency else 0.0) + (cfg.w_confidence * conf if cfg.use_confidence else 0.0)
        stale = cfg.stale_penalty if cfg.use_drift and r.get("stale", False) else 1.0
        unverified = cfg.unverified_penalty if cfg.use_decay and age == age and age > floors.get(r.get("kind", "note"), float("inf")) else 1.0
        final *= stale * unverified
        scale = 10**cfg.round_decimals  # upstream Math.round(x * 1e4) / 1e4: halves go up
        out.append((r["id"], math.floor(final * scale + 0.5) / scale))
    return sorted(out, key=lambda t: (-t[1], t[0]))[:k]


# coarse values make ties in every signal, so the id tie-breaks are exercised
coarse = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
naive_row = st.fixed_dictionaries({
    "cos": st.one_of(coarse, st.just(NAN)), "bm25": st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0]), "fuzzy": coarse,
    "rerank": coarse, "age": st.one_of(st.sampled_from([0.0, 10.0, 30.0, 31.0, 90.0, 100.0, 365.0, 400.0]), st.just(NAN)),
    "conf": st.one_of(coarse, st.just(NAN)), "graph": st.sampled_from([False, False, False, True]),
    "kind": st.sampled_from(["decision", "note", "preference", "constraint", "reference"]), "stale": st.booleans(),
})
naive_cfg = st.fixed_dictionaries({
    "w_vec": st.sampled_from([0.0, 0.3, 0.6, 1.0]), "saturation_c": st.sampled_from([0.5, 2.0, 8.0]),
    "vector_pool_multiplier": st.sampled_from([1.0, 3.0]), "lexical_pool_multiplier": st.sampled_from([0.5, 2.0]),
    "use_recency": st.booleans(), "use_decay": st.booleans(), "use_reranker": st.booleans(), "use_fuzzy": st.booleans(),
    "include_graph_docs": st.booleans(),
})


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(naive_row, min_size=1, max_size=40), k=st.integers(1, 12), vec=st.booleans(), rr=st.booleans(), changes=naive_cfg)
def test_fuse_equals_a_naive_per_document_reference(rows, k, vec, rr, changes):
    docs = [{"id": f"d{i:02d}" if not r["graph"] else f"graph:n{i:02d}", **r} for i, r in enumerate(rows)]
    cfg = RecallConfig(**changes)
    f = frame(docs, vector_ok=vec, rerank_ok=rr)
    got = fuse(f, cfg, k)
    assert list(zip(got.ids(f), got.scores.tolist(), strict=True)) == naive_fuse(docs, cfg, k, vec, rr)


def _reference_pools(f: SignalFrame, cfg: RecallConfig, k: int):
    """The numpy ``pools`` the compiled one replaced, kept as its reference:
    (rows, (w_vec, w_lex, reason), lexical of every row, in_vec[rows], in_lex[rows])."""
    if cfg.use_bm25 and cfg.use_fuzzy:
        lex = f.bm25 + cfg.fuzzy_boost * f.fuzzy
    elif cfg.use_bm25:
        lex = f.bm25.astype(np.float64, copy=True)
    elif cfg.use_fuzzy:
        lex = cfg.fuzzy_boost * f.fuzzy
    else:
        lex = np.zeros(len(f))
    eligible = np.ones(len(f), dtype=bool) if cfg.include_graph_docs else ~f.is_graph
    vec_ok = eligible & np.isfinite(f.cosine)
    lex_ok = eligible & (lex > 0)
    vector_usable = cfg.use_vector and f.vector_ok and cfg.w_vec > 0 and bool(vec_ok.any())
    lexical_usable = (cfg.use_bm25 or (cfg.use_fuzzy and cfg.fuzzy_boost > 0)) and cfg.w_vec < 1
    lexical_hits = lexical_usable and bool(lex_ok.any())
    if not cfg.dynamic_weights:
        wv, wl, reason = (cfg.w_vec if vector_usable else 0.0), ((1.0 - cfg.w_vec) if lexical_usable else 0.0), "fixed"
    elif not vector_usable and not lexical_hits:
        wv, wl, reason = 0.0, 0.0, "no vector path and no lexical hit: no candidates"
    elif not vector_usable:
        wv, wl, reason = 0.0, 1.0, "vector path unavailable: lexical only"
    elif not lexical_hits:
        wv, wl, reason = 1.0, 0.0, "no lexical hit: vectors only"
    else:
        wv, wl, reason = cfg.w_vec, 1.0 - cfg.w_vec, "default split"

    def top(values, mask, n):
        rows = np.flatnonzero(mask)
        if rows.size == 0 or n <= 0:
            return rows[:0]
        return rows[np.lexsort((f.order_key[rows], -values[rows]))][:n]

    in_vec = np.zeros(len(f), dtype=bool)
    in_lex = np.zeros(len(f), dtype=bool)
    if wv > 0:
        in_vec[top(f.cosine, vec_ok, math.ceil(k * cfg.vector_pool_multiplier))] = True
    if wl > 0:
        in_lex[top(lex, lex_ok, math.ceil(k * cfg.lexical_pool_multiplier))] = True
    rows = np.flatnonzero(in_vec | in_lex)
    return rows, (wv, wl, reason), lex, in_vec[rows], in_lex[rows]


def _random_frame(rng: np.random.Generator, n: int) -> SignalFrame:
    coarse = rng.random() < 0.5  # few distinct values: ties at every pool boundary
    if coarse:
        cos = rng.choice([-0.25, -0.0, 0.0, 0.25, 0.5, 0.75], n)
        bm25 = rng.choice([0.0, 0.0, 0.0, 0.5, 1.0, 3.0], n)
        fuzzy = rng.choice([0.0, 0.0, 0.5, 1.0], n)
    else:
        cos = rng.uniform(-0.2, 0.8, n)
        bm25 = np.where(rng.random(n) < 0.7, 0.0, rng.exponential(3.0, n))
        fuzzy = np.where(rng.random(n) < 0.6, 0.0, rng.random(n))
    cos[rng.random(n) < rng.choice([0.0, 0.1, 0.5, 1.0])] = np.nan
    if n and rng.random() < 0.2:
        cos[rng.integers(n)] = rng.choice([np.inf, -np.inf])
    if n and rng.random() < 0.2:
        bm25[rng.integers(n)] = np.nan
    return SignalFrame(
        ids=tuple(f"m{i}" for i in range(n)), order_key=rng.permutation(n).astype(np.int64), bm25=bm25, fuzzy=fuzzy,
        cosine=cos, rerank=np.full(n, NAN), age_days=np.full(n, NAN), confidence=np.full(n, NAN),
        kind=np.zeros(n, dtype=np.int64), stale=np.zeros(n, dtype=bool), is_graph=rng.random(n) < rng.choice([0.0, 0.05, 0.5]),
        vector_ok=bool(rng.random() < 0.85), rerank_ok=False,
    )


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("seed", range(4))
def test_compiled_pools_equal_the_numpy_reference(seed, backend, monkeypatch):
    """Both kernels (memofs.signals.kernels) against the naive reference, and the compiled
    scan's ordered pools against top_rows."""
    from memofs.ranking.pool_kernel import scan as _scan
    from memofs.ranking.pools import _lex_mode, pools, top_rows as _top

    monkeypatch.setenv("MEMOFS_KERNELS", backend)
    rng = np.random.default_rng(seed)
    for trial in range(300):
        f = _random_frame(rng, int(rng.choice([0, 1, 2, 5, 17, 60, 250])))
        cfg = RecallConfig(
            use_bm25=bool(rng.random() < 0.8), use_fuzzy=bool(rng.random() < 0.7), use_vector=bool(rng.random() < 0.85),
            include_graph_docs=bool(rng.random() < 0.3), dynamic_weights=bool(rng.random() < 0.8),
            w_vec=float(rng.choice([0.0, 0.3, 0.6, 1.0])), fuzzy_boost=float(rng.choice([0.0, 0.15, 0.1 + rng.random()])),
            vector_pool_multiplier=float(rng.choice([0.5, 1.0, 3.0, 40.0])), lexical_pool_multiplier=float(rng.choice([0.5, 2.0, 40.0])),
        )
        k = int(rng.integers(1, 15))
        rows, (wv, wl, reason), lex, in_vec, in_lex = _reference_pools(f, cfg, k)
        got = pools(f, cfg, k)
        where = (seed, trial, cfg, k)
        np.testing.assert_array_equal(got.rows, rows, err_msg=str(where))
        assert got.rows.dtype == np.int64
        assert (got.weights.w_vec, got.weights.w_lex, got.weights.reason) == (wv, wl, reason), where
        np.testing.assert_array_equal(got.member["vector_pool"], in_vec)
        np.testing.assert_array_equal(got.member["lexical_pool"], in_lex)
        # bit for bit: the pool's lexical scores and the lazily computed full array
        assert got.row_lexical.tobytes() == lex[rows].tobytes(), where
        assert got.lexical.tobytes() == lex.tobytes(), where
        r2, w2, l2, m2 = got
        assert r2 is got.rows and w2 is got.weights and l2 is got.lexical and m2 is got.member
        # the kernel's ordered pools equal _top's, order included
        eligible = np.ones(len(f), dtype=bool) if cfg.include_graph_docs else ~f.is_graph
        n_vec, n_lex = int(rng.integers(0, 30)), int(rng.integers(0, 30))
        vec_top, lex_top, any_vec, any_lex = _scan(
            f.cosine, f.bm25, f.fuzzy, f.is_graph, f.order_key, _lex_mode(cfg), cfg.fuzzy_boost, cfg.include_graph_docs, n_vec, n_lex)
        vec_ok, lex_ok = eligible & np.isfinite(f.cosine), eligible & (lex > 0)
        np.testing.assert_array_equal(vec_top, _top(f.cosine, vec_ok, f.order_key, n_vec))
        np.testing.assert_array_equal(lex_top, _top(lex, lex_ok & np.isfinite(lex), f.order_key, n_lex))
        assert (any_vec, any_lex) == (bool(vec_ok.any()), bool(lex_ok.any()) and _lex_mode(cfg) != 0)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_compiled_pools_take_read_only_and_strided_columns(backend, monkeypatch):
    from memofs.ranking.pools import pools

    monkeypatch.setenv("MEMOFS_KERNELS", backend)
    f = _random_frame(np.random.default_rng(7), 400)
    cfg = RecallConfig()
    want = _reference_pools(f, cfg, 10)
    for name in ("cosine", "bm25", "fuzzy", "is_graph", "order_key"):
        getattr(f, name).flags.writeable = False
    got = pools(f, cfg, 10)
    np.testing.assert_array_equal(got.rows, want[0])
    g = f.take(np.arange(400))
    g.cosine = np.repeat(f.cosine, 2)[::2]  # a strided view
    got = pools(g, cfg, 10)
    np.testing.assert_array_equal(got.rows, want[0])
    np.testing.assert_array_equal(got.member["vector_pool"], want[3])


@pytest.mark.parametrize("backend, most", [("numpy", 4), ("numba", 5)])
def test_fusion_reads_its_terms_once(monkeypatch, backend, most):
    """Issue 35: fusion's call path (fuse's frame through every project file) was 5 files, 29
    changes of file, 24 returns to a file already left; with the per-candidate terms read in one
    call it is pools, their kernel, the terms and the rounding (its own module, shared with the
    learned fusion). The compiled selection adds one round trip (kernels asks, pool_kernel
    selects): at most 5 returns either way, the issue's bound."""
    from support import follow

    if backend == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("MEMOFS_KERNELS", backend)
    rows = [{"id": f"m{i:03d}", "cos": (i * 37 % 100) / 100, "bm25": (i * 13 % 7) * 0.5, "fuzzy": (i % 3) * 0.2,
             "rerank": (i * 11 % 10) / 10, "age": float(i * 5), "conf": 0.8, "kind": ["decision", "note"][i % 2],
             "stale": i % 17 == 0} for i in range(60)]
    f = frame(rows)
    want = fuse(f, RecallConfig())  # warm: imports and compilation are not the path
    got, path = follow(fuse, f, RecallConfig())
    assert got.ids(f) == want.ids(f)
    assert path.files[0] == path.files[-1] == "memofs/ranking/fusion.py"
    assert path.returns <= most, path.files
    assert path.entered["memofs/ranking/terms.py"] == 1, path.files  # every term in one call
    assert path.entered["memofs/ranking/rounding.py"] == 1, path.files
