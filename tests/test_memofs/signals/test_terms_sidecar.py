"""The terms sidecar (issue 18, fast start): a corpus's recall-token counts as one CSR matrix
(TermCounts), adopted by the BM25 / fuzzy index as its base and kept by the store in a binary
sidecar validated by content. Checked against independent truth: a naive Counter of the
tokenizer per text, a fresh BM25Index over the current documents, token_overlap per
document, and recall of a Recaller given no term counts at all."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memofs.files.records import Memory
from memofs.files.sidecar import join_strings, sha256_column
from memofs.ranking.recall import Recaller
from memofs.signals import terms_sidecar
from memofs.signals.bm25 import BM25Index
from memofs.signals.fuzzy import OverlapIndex, token_overlap
from memofs.signals.term_counts import TermCounts
from memofs.signals.terms_sidecar import TermsSidecar
from memofs.store import directory
from memofs.store.project import Store, rehydrate
from memofs.text import tokenize as tokenize_module
from memofs.text.tokenize import tokenize

from support import kill_mid_write

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=2)
WORDS = ["data", "database", "db", "base", "the", "a", "of", "cache", "caches", "deploy", "tuesday", "x1", "café"]
QUERIES = ["database cache", "the db", "data", "deploy tuesday caches", "café x1", "bases of data"]
COLUMNS = ["ids", "ids_ends", "vocab", "vocab_ends", "sha", "indptr", "indices", "data"]


def naive_counts(tc: TermCounts) -> list[dict[str, int]]:
    """Each row of the matrix as {term: count}, read entry by entry."""
    m = tc.counts.tocoo()
    rows: list[dict[str, int]] = [{} for _ in tc.ids]
    for r, c, v in zip(m.row.tolist(), m.col.tolist(), m.data.tolist()):
        rows[r][tc.vocab[c]] = rows[r].get(tc.vocab[c], 0) + v
    return rows


# ---------------------------------------------------------------------- TermCounts
def test_build_extended_head_and_lengths_match_a_naive_counter() -> None:
    rng = random.Random(7)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 9))) for _ in range(30)]
    texts += ["", "the a of", "Ünïcode CAFÉ café_data naïve 数据库"]
    ids = [f"d{i}" for i in range(len(texts))]
    tc = TermCounts.build(ids, texts)
    assert tc.ids == tuple(ids) and len(tc) == len(texts) and tc.counts.has_canonical_format
    assert naive_counts(tc) == [dict(Counter(tokenize(t))) for t in texts]
    assert len(set(tc.vocab)) == len(tc.vocab) and set(tc.vocab) == {w for t in texts for w in tokenize(t)}
    assert tc.lengths.tolist() == [len(tokenize(t)) for t in texts]
    more = ["new words: database zebra", "the", "zebra zebra yak"]
    ext = tc.extended(["e0", "e1", "e2"], more)
    assert ext.vocab[: len(tc.vocab)] == tc.vocab and ext.ids == (*ids, "e0", "e1", "e2")
    assert naive_counts(ext) == [dict(Counter(tokenize(t))) for t in texts + more]
    old = ext.counts[: len(ids)].toarray()
    assert (old[:, : len(tc.vocab)] == tc.counts.toarray()).all() and not old[:, len(tc.vocab):].any()
    head = ext.head(5)
    assert head.ids == tuple(ids[:5]) and head.vocab == ext.vocab and naive_counts(head) == naive_counts(ext)[:5]
    assert ext.head(99) is ext and len(ext.head(0)) == 0
    upper = TermCounts.build(["u"], ["Data DB"], tokenizer=lambda t: t.split())
    assert upper.vocab == ("Data", "DB") and naive_counts(upper) == [{"Data": 1, "DB": 1}]
    with pytest.raises(ValueError):
        tc.extended(["x"], [])


def _check_index(idx: BM25Index, ov: OverlapIndex, docs: dict[str, str], seen: set[str], rng: random.Random) -> None:
    ref = BM25Index()
    ref.add_many(docs.items())
    assert len(idx) == len(ov) == len(ref) == len(docs) and set(idx.ids) == set(docs) == set(ov.ids)
    assert all((d in idx) == (d in docs) == (d in ov) for d in seen)
    assert idx.avgdl == ref.avgdl and idx.total_length == ref.total_length
    assert set(idx._refresh().vocab) == set(ov._refresh().vocab) == set(ref._refresh().vocab)  # dead-only terms left out
    assert all(idx.idf(w) == ref.idf(w) and idx.df(w) == ref.df(w) for w in [*WORDS, "zebra", "café"])
    for q in rng.sample(QUERIES, 2) + [" ".join(rng.choice(WORDS + ["dat", "zzz"]) for _ in range(3))]:
        for fuzzy in (True, False):
            got, want = idx.score(q, fuzzy=fuzzy), ref.score(q, fuzzy=fuzzy)
            assert dict(zip(got.ids, got.raw.tolist())) == dict(zip(want.ids, want.raw.tolist()))
            assert idx.search(q, 4, fuzzy=fuzzy) == ref.search(q, 4, fuzzy=fuzzy)
        qt = tokenize(q)
        assert dict(zip(ov.ids, ov.overlap(q).tolist())) == {
            d: token_overlap(qt, set(tokenize(t))) for d, t in docs.items()}


def test_an_adopted_base_then_edits_equals_a_fresh_index_over_the_current_docs() -> None:
    rng = random.Random(18)
    for trial in range(200):
        n = rng.randrange(0, 8)
        text = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 7)))  # noqa: E731
        docs = {f"b{i}": text() for i in range(n)}
        extra = {f"z{i}": text() + " zebra" for i in range(rng.randrange(0, 3))}  # head() keeps their vocab
        base = TermCounts.build([*docs, *extra], [*docs.values(), *extra.values()]).head(n)
        idx, ov = BM25Index(), OverlapIndex()
        idx.add_counts(base)
        ov.add_counts(base)
        seen, fresh = set(docs) | set(extra), 0
        for _ in range(rng.randrange(0, 9)):
            op = rng.choice(["add", "replace", "replace", "remove", "remove", "batch"])
            if op == "add" or (op != "batch" and not docs):
                ids = [f"n{fresh}"]
                fresh += 1
            elif op == "batch":  # add_counts on a non-empty (or emptied) index: one by one
                ids = rng.sample(sorted(docs), min(len(docs), 2)) + [f"n{fresh}"]
                fresh += 1
            else:
                ids = [rng.choice(sorted(docs))]
            if op == "remove" and ids[0] in docs:
                idx.remove(ids)
                ov.remove(ids)
                del docs[ids[0]]
                continue
            new = {d: text() for d in ids}
            if op == "batch":
                tc = TermCounts.build(list(new), list(new.values()))
                idx.add_counts(tc)
                ov.add_counts(tc)
            else:
                idx.add_many(new.items())
                ov.add_many(new.items())
            docs.update(new)
            seen |= set(ids)
            if rng.random() < 0.3:
                _check_index(idx, ov, docs, seen, rng)
        _check_index(idx, ov, docs, seen, rng)


def test_add_counts_refuses_repeated_ids_and_recaller_refuses_a_non_prefix() -> None:
    with pytest.raises(ValueError):
        BM25Index().add_counts(TermCounts.build(["a", "a"], ["x", "y"]))
    mems = [Memory(id=f"m{i}", text=f"memory {i} about the database cache") for i in range(4)]
    for ids in (["m1", "m0"], ["m0", "m2"], ["m9"], [f"m{i}" for i in range(4)] + ["m4"]):
        with pytest.raises(ValueError):
            Recaller().add(mems, terms=TermCounts.build(ids, ["t"] * len(ids)))
    Recaller().add(mems, terms=TermCounts.build(["m0", "m1"], [m.text for m in mems[:2]]))  # a prefix is fine


def test_a_recaller_with_terms_then_edits_recalls_like_one_without() -> None:
    rng = random.Random(3)
    mems = [Memory(id=f"m{i:02d}", text=" ".join(rng.choice(WORDS) for _ in range(6)) + f" item{i}", created_at=T0)
            for i in range(30)]
    for built_first in (False, True):
        a, b = Recaller(), Recaller()
        a.add(mems, terms=TermCounts.build([m.id for m in mems[:20]], [m.text for m in mems[:20]]))
        b.add(mems)
        if built_first:  # the lexical index adopted the counts before the edits
            a.recall("data", now=NOW)
        for r in (a, b):
            r.add([Memory(id="m05", text="replaced: deploy tuesday", created_at=T0),
                   Memory(id="m25", text="replaced overlay db", created_at=T0),
                   Memory(id="new", text="a new database", created_at=T0)])
            r.remove(["m07", "m22"])
        for q in QUERIES:
            assert [(x.id, x.score) for x in a.recall(q, 10, now=NOW)] == [(x.id, x.score) for x in b.recall(q, 10, now=NOW)]


# ---------------------------------------------------------------------- the store's sidecar
TOPICS = ["database", "data pipeline", "db migration", "cache layer", "deploy window", "the release train"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.init(tmp_path, clock=lambda: T0)
    for i in range(40):
        s.remember(f"memory {i} about the {TOPICS[i % 6]} and {TOPICS[(i * 5) % 6]} for service{i * 7}",
                   now=T0 + timedelta(minutes=i))
    return s


def generation(store: Store) -> str:
    return json.loads((store.paths.embeddings.parent / "terms.sidecar.json").read_text())["generation"]


def held(store: Store) -> TermCounts | None:
    mems = store.load(sidecar=False).memories
    return TermsSidecar(store.paths.embeddings.parent).read([m.id for m in mems], sha256_column(m.text for m in mems))


def answers(store: Store) -> list:
    rec = rehydrate(store).recaller
    return [[(r.id, r.score) for r in rec.recall(q, 8, now=NOW)] for q in QUERIES]


def reference(store: Store, monkeypatch) -> list:
    """Recall of a start whose Recaller gets no term counts (tokenizes every text)."""
    with monkeypatch.context() as m:
        m.setattr(Store, "term_counts", lambda self, mems, sha=None: None)
        return answers(store)


def tokenized_on_start(store: Store, monkeypatch) -> list[str]:
    """Memory texts tokenized by a start and its first lexical index build (the tokenizer's
    regex is swapped for a spy that records each text it splits)."""
    real, seen = tokenize_module._WORD, []
    spy = type("Spy", (), {"findall": staticmethod(lambda text: seen.append(text) or real.findall(text))})
    with monkeypatch.context() as m:
        m.setattr(tokenize_module, "_WORD", spy)
        rec = rehydrate(store).recaller
        rec._lexical_index(rec.config)
    texts = {m.text.lower() for m in store.load(sidecar=False).memories}
    return sorted(t for t in seen if t in texts)


def test_a_later_start_reads_the_sidecar_and_tokenizes_only_appended_texts(store: Store, monkeypatch) -> None:
    want = reference(store, monkeypatch)
    assert held(store) is None and tokenized_on_start(store, monkeypatch)  # first start: all tokenized, written
    d = store.paths.embeddings.parent
    assert (d / "terms.sidecar.json").is_file() and {p.name.split(".")[2] for p in d.glob("terms.*.npy")} == set(COLUMNS)
    mems = store.load(sidecar=False).memories
    tc = held(store)
    assert tc.ids == tuple(m.id for m in mems) and naive_counts(tc) == [dict(Counter(tokenize(m.text))) for m in mems]
    gen = generation(store)
    assert tokenized_on_start(store, monkeypatch) == [] and answers(store) == want
    added = [store.remember(f"appended {i}: database cache of the db", now=T0 + timedelta(hours=i)) for i in range(3)]
    assert tokenized_on_start(store, monkeypatch) == sorted(m.text.lower() for m in added)
    assert generation(store) == gen and len(held(store)) == 40  # a lag of 3 does not rewrite it
    assert answers(store) == reference(store, monkeypatch)


@pytest.mark.parametrize("edit", ["in-place", "appended-rewrite"])
def test_an_edited_text_makes_the_rows_from_it_on_stale(store: Store, monkeypatch, edit: str) -> None:
    rehydrate(store)
    gen = generation(store)
    rows = [json.loads(x) for x in store.paths.memories.read_text().splitlines()]
    new_text = "memory 20 rewritten by hand: database db data"
    if edit == "in-place":
        rows[20] = {**rows[20], "text": new_text}
        store.paths.memories.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:  # the id moves to the end of the load
        with open(store.paths.memories, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**rows[20], "text": new_text}) + "\n")
    mems = store.load(sidecar=False).memories
    tc = held(store)
    assert tc.ids == tuple(r["id"] for r in rows[:20])  # the head before the edited row
    assert naive_counts(tc) == [dict(Counter(tokenize(m.text))) for m in mems[:20]]
    assert tokenized_on_start(store, monkeypatch) == sorted(m.text.lower() for m in mems[20:])
    assert generation(store) == gen and answers(store) == reference(store, monkeypatch)
    monkeypatch.setattr(directory, "SIDECAR_REFRESH_LINES", 1)
    rehydrate(store)
    tc = held(store)
    assert generation(store) != gen and tc.ids == tuple(m.id for m in mems)
    assert naive_counts(tc) == [dict(Counter(tokenize(m.text))) for m in mems]
    assert tokenized_on_start(store, monkeypatch) == [] and answers(store) == reference(store, monkeypatch)


@pytest.mark.parametrize("damage", [f"flip-{c}" for c in COLUMNS] + ["truncate", "garbage-meta", "missing", "tokenizer"])
def test_a_damaged_sidecar_is_refused_and_rewritten(store: Store, monkeypatch, damage: str) -> None:
    want = reference(store, monkeypatch)
    rehydrate(store)
    d, gen = store.paths.embeddings.parent, generation(store)
    col = d / f"terms.{gen}.{damage.removeprefix('flip-')}.npy"
    if damage.startswith("flip-"):
        raw = bytearray(col.read_bytes())
        raw[-1] ^= 0x01  # the last data byte, header intact
        col.write_bytes(bytes(raw))
    elif damage == "truncate":
        p = d / f"terms.{gen}.indices.npy"
        p.write_bytes(p.read_bytes()[:-6])
    elif damage == "garbage-meta":
        (d / "terms.sidecar.json").write_text('{"format": 1, "generation": ')
    elif damage == "missing":
        (d / f"terms.{gen}.indptr.npy").unlink()
    else:
        monkeypatch.setattr(terms_sidecar, "tokenizer_digest", lambda: "0" * 32)
    assert held(store) is None
    assert answers(store) == want
    tc = held(store)
    assert tc is not None and len(tc) == 40 and generation(store) != gen
    assert len({p.name.split(".")[1] for p in d.glob("terms.*.npy")}) == 1


def _swap(a: np.ndarray, i: int, j: int) -> None:
    a[[i, j]] = a[[j, i]]


FORGE = {  # (columns, vocab) -> a structural inconsistency; the digests stay valid
    "out-of-range": lambda c, v: c["indices"].__setitem__(-1, len(v)),
    "unsorted": lambda c, v: _swap(c["indices"], 0, 1),
    "duplicate": lambda c, v: c["indices"].__setitem__(1, c["indices"][0]),
    "zero": lambda c, v: c["data"].__setitem__(2, 0),
    "negative": lambda c, v: c["data"].__setitem__(2, -1),
    "indptr": lambda c, v: _swap(c["indptr"], 1, 2),
    "sha-dtype": lambda c, v: c.__setitem__("sha", c["sha"].astype("S32")),
    "ids": lambda c, v: c.update(zip(("ids", "ids_ends"), join_strings(["m0", "m1", "m2"]))),
    "repeated-term": lambda c, v: c.update(zip(("vocab", "vocab_ends"), join_strings([v[0], *v[:1], *v[2:]]))),
    "float-counts": lambda c, v: c.__setitem__("data", c["data"] * 1.5),
}


@pytest.mark.parametrize("forge", list(FORGE))
def test_a_forged_csr_with_valid_digests_is_refused(tmp_path: Path, forge: str) -> None:
    texts = ["database cache data", "the db of data", "deploy tuesday deploy", "café x1 cache"]
    ids, sha = [f"m{i}" for i in range(4)], sha256_column(texts)
    tc = TermCounts.build(ids, texts)
    s = TermsSidecar(tmp_path)
    assert s.write(tc, sha) and naive_counts(s.read(ids, sha)) == naive_counts(tc)  # the honest write reads back
    c = tc.counts
    cols = {"sha": sha, "indptr": c.indptr.astype(np.int64), "indices": c.indices.astype(np.int32),
            "data": c.data.astype(np.int32)}
    for name, strings in (("ids", ids), ("vocab", list(tc.vocab))):
        cols[name], cols[f"{name}_ends"] = join_strings(strings)
    FORGE[forge](cols, list(tc.vocab))
    assert s.files.write(None, cols, {"tokenizer": terms_sidecar.tokenizer_digest()})
    assert s.read(ids, sha) is None  # (a repeated term is never fed to an index here: a heap overrun there)


WRITER = """
import sys
from memofs.files.sidecar import sha256_column
from memofs.signals.term_counts import TermCounts
from memofs.signals.terms_sidecar import TermsSidecar
from memofs.store.project import Store
s = Store.open(sys.argv[1])
mems = s.load(sidecar=False).memories
ids, texts = [m.id for m in mems], [m.text for m in mems]
full, sha = TermCounts.build(ids, texts), sha256_column(texts)
half = TermCounts.build(ids[:150], texts[:150])
side = TermsSidecar(s.paths.embeddings.parent)
print("ready", flush=True)
while True:  # alternate two generations: a mix of them would read as neither
    side.write(half, sha[:150])
    side.write(full, sha)
"""


@pytest.mark.parametrize("delay", [0.0, 0.03, 0.15])
def test_kill_9_while_writing_leaves_one_whole_generation(store: Store, monkeypatch, delay: float) -> None:
    for i in range(40, 300):
        store.remember(f"bulk memory {i} on the {TOPICS[i % 6]} " + " ".join(WORDS[: i % 13]), now=T0 + timedelta(hours=i))
    rehydrate(store)  # the old generation
    mems = store.load(sidecar=False).memories
    naive = [dict(Counter(tokenize(m.text))) for m in mems]
    kill_mid_write(WRITER, store.root, delay)
    tc = held(store)
    assert tc is not None and len(tc) in (150, 300) and naive_counts(tc) == naive[: len(tc)]
    assert answers(store) == reference(store, monkeypatch)
