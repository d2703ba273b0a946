"""Public-benchmark loaders (LoCoMo, LongMemEval, BEIR, TREC) on fixture files written here, and
LoCoMo on the real release when ../shared/datasets/locomo is present."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memofs_datasets.beir import load_beir
from memofs_datasets.format import DatasetError, load_dataset, write_dataset
from memofs_datasets.locomo import load_locomo
from memofs_datasets.longmemeval import load_longmemeval
from memofs_datasets.trec import load_trec

UTC = timezone.utc

# --------------------------------------------------------------------------- LoCoMo fixtures


def _conv(n: int) -> dict:
    """A two-session conversation in the locomo10.json record layout."""
    return {
        "sample_id": f"conv-{n}",
        "conversation": {
            "speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look at my garden!", "blip_caption": "a photo of tomatoes",
                 "img_url": ["http://x"]},
            ],
            "session_2_date_time": "9:05 am on 1 June, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "Miso knocked over my coffee."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "I start a pottery class on Friday."},
            ],
            "session_3_date_time": "10:00 am on 2 July, 2023",  # a date without a session, as in the release
        },
        "observation": {
            "session_1_observation": {"Ana": [["Ana adopted a cat named Miso.", "D1:1"]],
                                      "Ben": [["Ben grows tomatoes.", "D1:2"]]},
            "session_2_observation": {"Ana": [["Miso is clumsy.", "D2:1"]], "Ben": []},
        },
        "session_summary": {"session_1_summary": "Ana got a cat; Ben showed his garden.",
                            "session_2_summary": "Ana's cat spilled coffee; Ben takes pottery."},
        "event_summary": {"events_session_1": {"Ana": ["adopts a cat"], "Ben": [], "date": "8 May, 2023"}},
        "qa": [
            {"question": "What is Ana's cat called?", "answer": "Miso", "evidence": ["D1:1"], "category": 1},
            {"question": "When does Ben start pottery?", "answer": "June 2023", "evidence": ["D2:02"], "category": 2},
            {"question": "What did the cat do?", "answer": "spilled coffee", "evidence": ["D2:1; D1:1"], "category": 3},
            {"question": "What does Ben grow?", "answer": "tomatoes", "evidence": ["D1:2", "D9:9"], "category": 4},
            {"question": "What is Ben's dog called?", "adversarial_answer": "Rex", "evidence": ["D1:1"], "category": 5},
            {"question": "Where does Ana live?", "answer": "?", "evidence": ["D7:1"], "category": 4},
        ],
    }


def _flatten(rec: dict) -> dict:
    flat = dict(rec["conversation"])
    for key in ("observation", "session_summary", "event_summary"):
        flat.update(rec[key])
    flat["qa"] = rec["qa"]
    return flat


@pytest.fixture
def locomo_dirs(tmp_path: Path) -> tuple[Path, Path]:
    recs = [_conv(30), _conv(4)]
    single = tmp_path / "single"
    single.mkdir()
    (single / "locomo10.json").write_text(json.dumps(recs))
    folder = tmp_path / "split" / "by-conversation"
    folder.mkdir(parents=True)
    for r in recs:
        (folder / f"{r['sample_id'].split('-')[1]}.json").write_text(json.dumps(_flatten(r)))
    return single, tmp_path / "split"


def test_locomo_turns(locomo_dirs: tuple[Path, Path]) -> None:
    ds = load_locomo(locomo_dirs[0])
    assert ds.namespaces == ("conv-4", "conv-30")  # natural order, not string order
    assert len(ds.memories) == 8
    m = next(m for m in ds.memories if m.id == "conv-30:s0:t1")
    assert m.metadata["dia_id"] == "D1:2"  # the source id kept, the memory id positional
    assert m.text == "Ben: Look at my garden! [image: a photo of tomatoes]"
    assert (m.namespace, m.kind, m.confidence) == ("conv-30", "note", None)
    assert m.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert next(m for m in ds.memories if m.id == "conv-30:s1:t0").created_at == datetime(2023, 6, 1, 9, 5, tzinfo=UTC)
    # q0-q3 kept (q4 is adversarial, q5 has only unmatched evidence), per conversation
    assert [q.id for q in ds.queries if q.scope == "conv-30"] == ["conv-30:q0", "conv-30:q1", "conv-30:q2", "conv-30:q3"]
    assert ds.qrels["conv-30:q1"] == {"conv-30:s1:t1": 1}  # "D2:02" normalised
    assert ds.qrels["conv-30:q2"] == {"conv-30:s1:t0": 1, "conv-30:s0:t0": 1}  # "D2:1; D1:1" split
    assert ds.qrels["conv-30:q3"] == {"conv-30:s0:t1": 1}
    q = ds.queries_by_id["conv-30:q0"]
    assert (q.category, q.split, q.task_type) == ("locomo-cat1", None, "general")
    assert q.as_of == datetime(2023, 6, 1, 9, 5, tzinfo=UTC)  # last session with turns
    assert q.metadata["locomo_category"] == 1 and q.metadata["answer"] == "Miso"
    assert ("conv-30:q3", "D9:9") in ds.stats["unmatched_evidence"]
    assert ("conv-30:q5", "D7:1") in ds.stats["unmatched_evidence"]
    assert ds.stats["dropped_questions"] == ["conv-4:q5", "conv-30:q5"]
    assert ds.stats["excluded_questions"] == 2 and ds.stats["turns"] == 8
    assert all(set(ds.qrels[q.id]) <= {m.id for m in ds.corpus_for(q)} for q in ds.queries)


def test_locomo_layouts_identical(locomo_dirs: tuple[Path, Path]) -> None:
    a, b = load_locomo(locomo_dirs[0]), load_locomo(locomo_dirs[1])
    c = load_locomo(locomo_dirs[1] / "by-conversation")
    d = load_locomo(locomo_dirs[0] / "locomo10.json")
    assert a == b == c == d and a.content_hash() == b.content_hash()
    assert [m.metadata for m in a.memories] == [m.metadata for m in b.memories]


def test_locomo_categories_and_units(locomo_dirs: tuple[Path, Path]) -> None:
    with5 = load_locomo(locomo_dirs[0], categories=(1, 2, 3, 4, 5))
    assert "conv-30:q4" in with5.queries_by_id
    obs = load_locomo(locomo_dirs[0], unit="observation")
    assert len(obs.memories) == 6
    assert obs.qrels["conv-30:q0"] == {"conv-30:s0:o0": 1}
    assert obs.qrels["conv-30:q3"] == {"conv-30:s0:o1": 1}
    # D2:2 (pottery) has no observation: dropped for this unit, and counted
    assert "conv-30:q1" not in obs.queries_by_id and "conv-30:q1" in obs.stats["dropped_no_unit"]
    summ = load_locomo(locomo_dirs[0], unit="summary")
    assert [m.id for m in summ.memories if m.namespace == "conv-30"] == ["conv-30:s0", "conv-30:s1"]
    assert summ.qrels["conv-30:q2"] == {"conv-30:s1": 1, "conv-30:s0": 1}
    assert summ.memories[0].kind == "summary"


def test_locomo_export_round_trip(locomo_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ds = load_locomo(locomo_dirs[0])
    back = load_dataset(write_dataset(ds, tmp_path / "export"))
    assert back == ds and [q.metadata for q in back.queries] == [q.metadata for q in ds.queries]
    with pytest.raises(DatasetError):  # the authored rules reject it (no split, free categories)
        load_dataset(tmp_path / "export", public=False)


def _break(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=1))


@pytest.mark.parametrize("defect, field", [
    (lambda d: d[0]["conversation"]["session_1"][0].pop("text"), "conv-30.session_1[0].text"),
    (lambda d: d[0]["conversation"].update(session_2_date_time="June 1st"), "conv-30.session_2_date_time"),
    (lambda d: d[0]["conversation"].pop("session_1_date_time"), "conv-30.session_1_date_time"),
    (lambda d: d[1]["qa"][0].update(category="one"), "conv-4.qa[0].category"),
    (lambda d: d[1].pop("qa"), "conv-4.qa"),
    (lambda d: d[1].pop("sample_id"), "[1].sample_id"),
])
def test_locomo_malformed(locomo_dirs: tuple[Path, Path], defect, field: str) -> None:
    f = locomo_dirs[0] / "locomo10.json"
    _break(f, defect)
    with pytest.raises(DatasetError) as info:
        load_locomo(f)
    assert info.value.field == field and info.value.file == str(f)


def test_locomo_truncated_json(locomo_dirs: tuple[Path, Path]) -> None:
    f = locomo_dirs[1] / "by-conversation" / "4.json"
    text = json.dumps(_flatten(_conv(4)), indent=1)
    f.write_text(text[: len(text) // 2])
    with pytest.raises(DatasetError) as info:
        load_locomo(locomo_dirs[1])
    assert info.value.file == str(f) and info.value.field == "json"
    assert info.value.line == text[: len(text) // 2].count("\n") + 1  # the error is at the end of the file


def test_locomo_missing_summary_for_summary_unit(locomo_dirs: tuple[Path, Path]) -> None:
    f = locomo_dirs[0] / "locomo10.json"
    _break(f, lambda d: d[0]["session_summary"].pop("session_2_summary"))
    load_locomo(f)  # turns do not need it
    with pytest.raises(DatasetError) as info:
        load_locomo(f, unit="summary")
    assert info.value.field == "conv-30.session_2_summary"


# --------------------------------------------------------------------------- LoCoMo, real release


def _independent_locomo_totals(path: Path) -> dict:
    """A plain walk of locomo10.json, written without the loader's helpers."""
    data = json.loads(path.read_text())
    turns = 0
    answerable = 0
    for rec in data:
        conv = rec["conversation"]
        ids = set()
        for key, value in conv.items():
            if re.fullmatch(r"session_\d+", key):
                turns += len(value)
                ids |= {t["dia_id"] for t in value}
        for qa in rec["qa"]:
            if qa["category"] == 5:
                continue
            tokens = []
            for ev in qa["evidence"]:
                for tok in re.split(r"[;,\s]+", ev.replace("D:", "D")):
                    m = re.fullmatch(r"D(\d+):(\d+)", tok)
                    if m:
                        tokens.append(f"D{int(m.group(1))}:{int(m.group(2))}")
            if any(t in ids for t in tokens):
                answerable += 1
    return {"conversations": len(data), "turns": turns, "answerable": answerable}


@pytest.mark.locomo
def test_locomo_real_release(locomo_dir: Path) -> None:
    LOCOMO_DIR = locomo_dir
    want = _independent_locomo_totals(LOCOMO_DIR / "locomo10.json")
    assert 5500 <= want["turns"] <= 6300 and 1400 <= want["answerable"] <= 1600  # the published scale
    ds = load_locomo(LOCOMO_DIR)
    assert len(ds.namespaces) == want["conversations"] == ds.stats["conversations"]
    assert len(ds.memories) == want["turns"]
    assert len(ds.queries) == want["answerable"]
    assert len(ds.stats["dropped_questions"]) + len(ds.queries) == sum(
        n for c, n in ds.stats["questions_by_category"].items() if c != 5)
    assert all(q.scope and set(ds.qrels[q.id]) <= {m.id for m in ds.corpus_for(q)} for q in ds.queries)
    if (LOCOMO_DIR / "by-conversation").is_dir():
        other = load_locomo(LOCOMO_DIR / "by-conversation")
        assert other == ds and other.content_hash() == ds.content_hash()


# --------------------------------------------------------------------------- LongMemEval


def _lme_items() -> list[dict]:
    def turn(role, content, has=None):
        t = {"role": role, "content": content}
        if has is not None:
            t["has_answer"] = has
        return t
    return [
        {"question_id": "q1", "question_type": "single-session-user", "question": "What car do I drive?",
         "answer": "a blue Civic", "question_date": "2023/05/30 (Tue) 23:40",
         "haystack_session_ids": ["s_a", "answer_1"], "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:00"],
         "haystack_sessions": [[turn("user", "hi"), turn("assistant", "hello")],
                               [turn("user", "I drive a blue Civic", True), turn("assistant", "nice", False)]],
         "answer_session_ids": ["answer_1"]},
        {"question_id": "q2", "question_type": "temporal-reasoning", "question": "When did I move?", "answer": 3,
         "question_date": "2023/06/01 (Thu) 08:00",
         "haystack_session_ids": ["answer_2", "s_b", "ghost"], "haystack_dates": ["2023/04/01 (Sat) 09:00"] * 3,
         "haystack_sessions": [[turn("user", "we moved in March"), turn("assistant", "congrats")], [turn("user", "x")], []],
         "answer_session_ids": ["answer_2", "missing_session"]},
        {"question_id": "q3_abs", "question_type": "single-session-user", "question": "What is my dog's name?",
         "answer": "not mentioned", "question_date": "2023/06/02 (Fri) 08:00", "haystack_session_ids": ["s_c"],
         "haystack_dates": ["2023/04/01 (Sat) 09:00"], "haystack_sessions": [[turn("user", "hello")]],
         "answer_session_ids": []},
    ]


def test_longmemeval_sessions(tmp_path: Path) -> None:
    f = tmp_path / "longmemeval_s.json"
    f.write_text(json.dumps(_lme_items()))
    ds = load_longmemeval(f)
    assert [q.id for q in ds.queries] == ["q1", "q2"]
    assert ds.stats["abstention_excluded"] == 1
    assert ds.stats["unmatched_answer_sessions"] == [("q2", "missing_session")]
    assert [m.id for m in ds.corpus_for(ds.queries[0])] == ["q1:s0", "q1:s1"]
    assert [m.metadata["session_id"] for m in ds.corpus_for(ds.queries[0])] == ["s_a", "answer_1"]
    m = ds.memories_by_id["q1:s1"]
    assert m.text == "user: I drive a blue Civic\nassistant: nice"
    assert m.created_at == datetime(2023, 5, 21, 10, 0, tzinfo=UTC) and m.namespace == "q1"
    assert ds.qrels == {"q1": {"q1:s1": 1}, "q2": {"q2:s0": 1}}
    q = ds.queries[0]
    assert (q.category, q.scope, q.as_of) == ("single-session-user", "q1", datetime(2023, 5, 30, 23, 40, tzinfo=UTC))
    assert ds.as_of == datetime(2023, 6, 1, 8, 0, tzinfo=UTC)
    assert not any(m.namespace == "q3_abs" for m in ds.memories)


def test_longmemeval_turns(tmp_path: Path) -> None:
    f = tmp_path / "longmemeval_oracle.json"
    f.write_text(json.dumps(_lme_items()))
    ds = load_longmemeval(f, granularity="turn")
    assert ds.qrels["q1"] == {"q1:s1:t0": 1}  # the marked turn only
    assert ds.qrels["q2"] == {"q2:s0:t0": 1, "q2:s0:t1": 1}  # none marked: whole answer session
    assert ds.stats["fallback_to_session_turns"] == 1
    assert ds.memories_by_id["q1:s1:t1"].text == "assistant: nice"


@pytest.mark.parametrize("defect, field", [
    (lambda d: d[0].update(question_date="May 30"), "q1.question_date"),
    (lambda d: d[0]["haystack_dates"].__setitem__(1, "2023-05-21"), "q1.haystack_dates[1]"),
    (lambda d: d[1]["haystack_dates"].pop(), "q2.haystack_sessions"),
    (lambda d: d[0].pop("answer_session_ids"), "q1.answer_session_ids"),
    (lambda d: d[0]["haystack_sessions"][1][0].pop("content"), "q1.haystack_sessions[1][0].content"),
    (lambda d: d[1].update(question_id="q1"), "[1].question_id"),
])
def test_longmemeval_malformed(tmp_path: Path, defect, field: str) -> None:
    items = _lme_items()
    defect(items)
    f = tmp_path / "lme.json"
    f.write_text(json.dumps(items))
    with pytest.raises(DatasetError) as info:
        load_longmemeval(f)
    assert info.value.field == field and info.value.file == str(f)


def test_longmemeval_truncated(tmp_path: Path) -> None:
    f = tmp_path / "lme.json"
    f.write_text(json.dumps(_lme_items())[:-40])
    with pytest.raises(DatasetError) as info:
        load_longmemeval(f)
    assert (info.value.field, info.value.line) == ("json", 1)


# --------------------------------------------------------------------------- BEIR


def _beir(root: Path, qrels: str | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Cats", "text": "Cats purr."}, {"_id": "d2", "title": "", "text": "Dogs bark."},
            {"_id": "d3", "title": "Fish", "text": "Fish swim."}, {"_id": "d4", "text": "Birds fly."}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    qs = [{"_id": "1", "text": "what purrs"}, {"_id": "2", "text": "what swims"}, {"_id": "3", "text": "what barks"},
          {"_id": "4", "text": "what flies"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    (root / "qrels" / "test.tsv").write_text(qrels if qrels is not None else
                                             "query-id\tcorpus-id\tscore\n1\td1\t5\n1\td2\t-1\n2\td3\t2\n"
                                             "3\td2\t0\n3\td9\t1\n9\td1\t1\n")
    return root


def test_beir(tmp_path: Path) -> None:
    ds = load_beir(_beir(tmp_path / "scifact"))
    assert ds.name == "scifact" and ds.namespaces == ("default",)
    # positional ids d0.. in corpus order; the corpus's own ids in metadata
    assert ds.memories_by_id["d0"].text == "Cats\nCats purr." and ds.memories_by_id["d1"].text == "Dogs bark."
    assert [m.metadata["source_id"] for m in ds.memories] == ["d1", "d2", "d3", "d4"]
    assert all(m.created_at is None for m in ds.memories)
    # query 3's only judgements are a 0 and an unknown doc; query 4 has none
    assert [q.id for q in ds.queries] == ["1", "2"]
    assert ds.qrels == {"1": {"d0": 3, "d1": 0}, "2": {"d2": 2}}
    assert (ds.stats["clipped_high"], ds.stats["clipped_negative"]) == (1, 1) and len(ds.stats["notes"]) == 2
    assert (ds.stats["unknown_doc_judgements"], ds.stats["unknown_query_judgements"]) == (1, 1)
    back = load_dataset(write_dataset(ds, tmp_path / "export"))
    assert back == ds
    with pytest.raises(DatasetError) as info:
        load_dataset(tmp_path / "export", public=False)
    assert info.value.field == "created_at"


@pytest.mark.parametrize("target, content, line, field", [
    ("corpus.jsonl", '{"_id": "d1", "text": "Cats purr."}\n{"_id": "d2", "te', 2, "json"),
    ("corpus.jsonl", '{"_id": "d1", "text": "Cats purr."}\n{"title": "x", "text": "y"}\n', 2, "_id"),
    ("queries.jsonl", '{"_id": "1"}\n', 1, "text"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\n1\td1\n", 2, "columns"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\n1\td1\thigh\n", 2, "score"),
])
def test_beir_malformed(tmp_path: Path, target: str, content: str, line: int, field: str) -> None:
    root = _beir(tmp_path / "b")
    (root / target).write_text(content)
    with pytest.raises(DatasetError) as info:
        load_beir(root)
    assert (info.value.file, info.value.line, info.value.field) == (str(root / target), line, field)


# --------------------------------------------------------------------------- TREC

SGML = """<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in
international criminal activity.
<narr> Narrative:
A relevant document must name the organization.
</top>

<top>
<num> Number: 302 </num>
<title> Poliomyelitis and Post-Polio </title>
<desc> Description: Is the disease still a threat? </desc>
</top>
"""


def _trec(tmp: Path, corpus_jsonl: bool = True) -> tuple[Path, Path, Path]:
    topics = tmp / "topics.txt"
    topics.write_text(SGML)
    qrels = tmp / "qrels.txt"
    qrels.write_text("301 0 FT1 2\n301 0 FT2 0\n302 0 LA1 1\n302 0 LA9 4\n303 0 FT1 1\n")
    if corpus_jsonl:
        corpus = tmp / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in [
            {"id": "FT1", "text": "Mafia groups in Europe"}, {"id": "FT2", "title": "Weather", "text": "Rain"},
            {"id": "LA1", "text": "Polio vaccination"}]))
    else:
        corpus = tmp / "corpus.tsv"
        corpus.write_text("FT1\tMafia groups in Europe\nFT2\tWeather\nLA1\tPolio vaccination\n")
    return topics, qrels, corpus


def test_trec_sgml_and_tsv_topics(tmp_path: Path) -> None:
    topics, qrels, corpus = _trec(tmp_path)
    ds = load_trec(topics, qrels, corpus, name="robust")
    assert [(q.id, q.text) for q in ds.queries] == [("301", "International Organized Crime"),
                                                   ("302", "Poliomyelitis and Post-Polio")]
    assert ds.qrels == {"301": {"d0": 2, "d1": 0}, "302": {"d2": 1}}
    assert ds.memories_by_id["d1"].text == "Weather\nRain" and ds.memories_by_id["d1"].metadata["source_id"] == "FT2"
    assert ds.stats["unknown_doc_judgements"] == 1 and ds.stats["unknown_query_judgements"] == 1
    desc = load_trec(topics, qrels, corpus, topic_field="desc")
    assert desc.queries_by_id["301"].text == ("Identify organizations that participate in international "
                                              "criminal activity.")
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("301\tInternational Organized Crime\n302\tPoliomyelitis and Post-Polio\n")
    assert load_trec(tsv, qrels, corpus, name="robust") == ds
    (tmp_path / "t").mkdir()
    tsv_corpus = load_trec(topics, qrels, _trec(tmp_path / "t", corpus_jsonl=False)[2], name="robust")
    assert [m.metadata["source_id"] for m in tsv_corpus.memories] == ["FT1", "FT2", "LA1"]


def test_trec_malformed(tmp_path: Path) -> None:
    topics, qrels, corpus = _trec(tmp_path)
    topics.write_text(SGML[: SGML.index("</top>")])  # truncated inside the first topic
    with pytest.raises(DatasetError) as info:
        load_trec(topics, qrels, corpus)
    assert (info.value.file, info.value.line, info.value.field) == (str(topics), 1, "top")
    topics.write_text(SGML)
    qrels.write_text("301 0 FT1 2\n301 FT2 0\n")
    with pytest.raises(DatasetError) as info:
        load_trec(topics, qrels, corpus)
    assert (info.value.file, info.value.line, info.value.field) == (str(qrels), 2, "columns")
    qrels.write_text("301 0 FT1 2\n")
    corpus.write_text('{"id": "FT1", "text": "x"}\n{"id": "FT1", "text": "y"}\n')
    with pytest.raises(DatasetError) as info:
        load_trec(topics, qrels, corpus)
    assert (info.value.line, info.value.field) == (2, "id")
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("301 no tab here\n")
    with pytest.raises(DatasetError) as info:
        load_trec(tsv, qrels, corpus)
    assert (info.value.line, info.value.field) == (1, "columns")
