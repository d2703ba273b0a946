"""EntityGraph: upserts, resolution, state lines, rendering, consolidation, JSONL files."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from memofs.graph.entity_graph import EntityGraph
from memofs.files.records import GraphEdge, GraphNode
from memofs.text.rewrite import rewrite_query

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def N(id_, label, **kw):  # noqa: N802 - short factory for readability
    return GraphNode(id=id_, label=label, **kw)


def E(src, dst, type_, **kw):  # noqa: N802
    return GraphEdge(source=src, target=dst, type=type_, **kw)


def auth_graph() -> EntityGraph:
    """The write-up's example: auth uses OAuth, and the OAuth move superseded JWT."""
    return EntityGraph(
        nodes=[N("auth", "auth"), N("oauth", "OAuth", type="tool"), N("jwt", "JWT", type="tool"),
               N("session", "session cookies")],
        edges=[E("auth", "oauth", "uses"), E("auth", "jwt", "supersedes"),
               E("session", "jwt", "uses")],
    )


# ---------------------------------------------------------------- upserts
def test_upsert_node_merges_aliases_and_drops_label():
    g = EntityGraph()
    g.upsert_node(N("db:pg", "Postgres", aliases=("pg", "postgres", " PG ", "")))
    assert g.node("db:pg").aliases == ("pg",)
    g.upsert_node(N("db:pg", "PostgreSQL", aliases=("postgres", "pg", "Postgresql"), summary="main db"))
    n = g.node("db:pg")
    assert n.label == "PostgreSQL" and n.summary == "main db"
    assert n.aliases == ("pg", "postgres")
    g.upsert_node(N("db:pg", "PostgreSQL"))  # empty summary keeps the stored one
    assert g.node("db:pg").summary == "main db"
    assert len(g) == 1


def test_upsert_rejects_bad_nodes_and_edges():
    g = EntityGraph(nodes=[N("a", "A"), N("b", "B")])
    with pytest.raises(ValueError, match="status"):
        g.upsert_node(N("c", "C", status="gone"))
    with pytest.raises(ValueError, match="graph id"):
        g.upsert_node(N("../x", "X"))
    with pytest.raises(ValueError, match="label"):
        g.upsert_node(N("c", "  "))
    with pytest.raises(ValueError, match="target 'zzz'"):
        g.upsert_edge(E("a", "zzz", "uses"))
    with pytest.raises(ValueError, match="source 'zzz'"):
        g.upsert_edge(E("zzz", "a", "uses"))
    with pytest.raises(ValueError, match="self edge"):
        g.upsert_edge(E("a", "a", "uses"))
    with pytest.raises(KeyError):
        g.node("nope")


def test_upsert_edge_replaces_same_triple():
    g = EntityGraph(nodes=[N("a", "A"), N("b", "B")], edges=[E("a", "b", "uses")])
    g.upsert_edge(E("a", "b", "uses", status="deprecated"))
    g.upsert_edge(E("a", "b", "prefers"))
    assert g.edges == [E("a", "b", "uses", status="deprecated"), E("a", "b", "prefers")]


def test_active_retired_and_bm25_documents():
    g = EntityGraph(nodes=[
        N("a", "PostgreSQL", summary="Connection pooling with pgBouncer", aliases=("pg",)),
        N("b", "JWT", status="retired"),
        N("c", "Sessions", status="deprecated"),
        N("d", "Redis", status="conflicted"),
        N("e", "Biome"),
    ])
    assert [n.id for n in g.active_nodes()] == ["a", "e"]
    assert g.retired_ids() == {"b", "c"}
    assert g.bm25_documents() == [
        ("graph:a", "PostgreSQL Connection pooling with pgBouncer pg"),
        ("graph:e", "Biome"),
    ]


# ---------------------------------------------------------------- resolution
def test_resolve_exact_and_substring_rules():
    g = EntityGraph(nodes=[
        N("n1", "MongoDB"),                          # "db" is too short for a substring hit
        N("n2", "Postgres Database", aliases=("pg",)),
        N("n3", "Payments", aliases=("db",)),        # alias exact match, any length
        N("n4", "Old", aliases=("db",), status="retired"),
        N("n5", "Queue"),
    ])
    got = g.resolve_entities(["DB", "pg", "base", "database"])
    assert [(r.node_id, r.matched_term) for r in got] == [
        # label decides before aliases: the label's first >=3 substring term is "base"
        ("n2", "base"),
        ("n3", "db"),
    ]
    assert g.resolve_entities([]) == []
    assert g.resolve_entities(["queue"])[0].matched_term == "queue"
    assert g.resolve_entities(["que"])[0].node_id == "n5"
    assert g.resolve_entities(["qu"]) == []
    # a candidate that is a substring of the term does not match
    assert g.resolve_entities(["queues"]) == []


@pytest.mark.parametrize("match", ["terms", "upstream"])
def test_both_rules_agree_on_plain_terms(match):
    # the exact/substring rules above hold for either rule when no stop word is involved
    g = EntityGraph(nodes=[N("n1", "MongoDB"), N("n2", "Postgres Database", aliases=("pg",)),
                           N("n3", "Payments", aliases=("db",))])
    got = g.resolve_entities(["DB", "pg", "base", "database"], match=match)
    assert [(r.node_id, r.matched_term) for r in got] == [("n2", "base"), ("n3", "db")]


def test_terms_rule_stop_words_never_resolve():
    # issue 19: the D1 question shares only the stop word "for" with this label
    g = EntityGraph(nodes=[N("rq", "React Query for server state"), N("d1", "D1")])
    terms = rewrite_query("What database driver did we pick for tenant metadata?").expanded_terms
    assert "for" in terms  # the rewrite keeps stop words; resolution must drop them
    assert g.resolve_entities(terms) == []
    assert [(r.node_id, r.matched_term) for r in g.resolve_entities(terms, match="upstream")] == [("rq", "for")]
    # stop words on the label side do not match either: "hat" is inside "what" only
    g2 = EntityGraph(nodes=[N("w", "What next"), N("it", "Tracker", aliases=("it",))])
    assert g2.resolve_entities(["hat", "it"]) == []
    assert [(r.node_id, r.matched_term) for r in g2.resolve_entities(["hat", "it"], match="upstream")] == [
        ("w", "hat"), ("it", "it")]


def test_terms_rule_dropped_characters_and_phrases():
    g = EntityGraph(nodes=[N("f", "legacy___flags"), N("gha", "GitHub Actions"), N("oa", "OAuth")])
    # "___" is no recall token at all; upstream finds it inside the label
    assert g.resolve_entities(["___"]) == []
    assert [r.node_id for r in g.resolve_entities(["___"], match="upstream")] == ["f"]
    # a multi-word expansion equals a multi-word label token for token; a token inside a
    # label token still matches ("auth" in "oauth"), as upstream
    got = g.resolve_entities(["github actions", "auth"])
    assert [(r.node_id, r.matched_term) for r in got] == [("gha", "github actions"), ("oa", "auth")]
    # "flags" is a token of "legacy___flags" ("_" separates): the label still resolves
    assert [r.matched_term for r in g.resolve_entities(["Flags"])] == ["flags"]
    with pytest.raises(ValueError, match="match must be one of terms, upstream"):
        g.resolve_entities(["x"], match="loose")


def test_resolve_fills_fields_in_node_order():
    g = auth_graph()
    got = g.resolve_entities(["jwt", "auth"])
    assert [r.node_id for r in got] == ["auth", "oauth", "jwt"]  # node order, not term order
    auth, oauth, jwt = got
    assert auth.label == "auth" and auth.type == "concept" and auth.matched_term == "auth"
    assert oauth.matched_term == "auth"  # "auth" is a substring of "oauth"
    assert jwt.type == "tool" and jwt.summary == "" and jwt.state == ""
    assert auth.state == "uses OAuth; supersedes JWT"


def test_entity_state_order_and_filters():
    g = EntityGraph(
        nodes=[N("api", "api"), N("pg", "postgres"), N("jwt", "jwt"), N("t", "tabs"),
               N("lib", "libfoo"), N("o", "ops")],
        edges=[
            E("api", "jwt", "supersedes"),          # inserted first, shown last
            E("api", "lib", "depends_on", status="deprecated"),
            E("api", "t", "prefers", status="conflicted"),  # conflicted edges count
            E("api", "pg", "uses"),
            E("api", "o", "owns"),                  # not a state type
            E("o", "api", "uses"),                  # incoming: ignored
            E("api", "lib", "uses", status="retired"),
        ],
    )
    assert g.entity_state("api") == "uses postgres; prefers tabs; supersedes jwt"
    assert g.entity_state("pg") == ""


def test_render_matches_upstream_and_write_up_examples():
    g = EntityGraph(nodes=[N("api", "api"), N("pg", "postgres"), N("jwt", "jwt")],
                    edges=[E("api", "pg", "uses"), E("api", "jwt", "supersedes")])
    assert g.render(g.resolve_entities(["api"])) == (
        "1. api (concept) — currently: uses postgres; supersedes jwt"
    )
    # The write-up's line, reached through the real query path.
    g2 = auth_graph()
    g2.upsert_node(N("oauth", "OAuth", type="tool", summary="OAuth 2 via the identity provider"))
    resolved = g2.resolve_entities(rewrite_query("auth").expanded_terms)
    assert g2.render(resolved) == "\n".join([
        "1. auth (concept) — currently: uses OAuth; supersedes JWT",
        "2. OAuth (tool) — OAuth 2 via the identity provider",
        "3. JWT (tool)",
    ])
    assert g2.render([]) == ""


def test_expansion_terms_are_label_and_alias_tokens():
    g = EntityGraph(nodes=[N("pg", "PostgreSQL DB", aliases=("pg", "the_database")),
                           N("r", "Redis")])
    resolved = g.resolve_entities(["pg", "redis"])
    # recall tokenizer: lowercase, "_" splits, stop word "the" dropped, de-duplicated
    assert g.expansion_terms(resolved) == ["postgresql", "db", "pg", "database", "redis"]


# ---------------------------------------------------------------- consolidation
def test_consolidate_retires_superseded_node_and_its_other_edges():
    g = EntityGraph(
        nodes=[N("a", "OAuth"), N("b", "JWT"), N("c", "api"), N("d", "crypto"), N("e", "x")],
        edges=[E("a", "b", "supersedes"), E("c", "b", "uses"), E("b", "d", "depends_on"),
               E("d", "a", "uses"), E("e", "d", "supersedes", status="deprecated")],
    )
    result = g.consolidate(NOW)
    assert result.retired_nodes == ("b",)
    assert result.retired_edges == (("c", "uses", "b"), ("b", "depends_on", "d"))
    assert result.changed and result.now == NOW
    assert g.node("b").status == "retired" and g.valid_until("b") == NOW.isoformat().replace("+00:00", "Z")
    assert {(e.source, e.type, e.target): e.status for e in g.edges} == {
        ("a", "supersedes", "b"): "active",
        ("c", "uses", "b"): "retired",
        ("b", "depends_on", "d"): "retired",
        ("d", "uses", "a"): "active",
        ("e", "supersedes", "d"): "deprecated",   # inactive supersedes edge: no effect
    }
    assert len(g) == 5 and len(g.edges) == 5  # nothing deleted
    assert g.node("d").status == "active"
    assert g.retired_ids() == {"b"}
    assert [r.node_id for r in g.resolve_entities(["jwt", "oauth"])] == ["a"]
    assert g.entity_state("a") == "supersedes JWT"
    assert g.entity_state("c") == ""
    assert not g.consolidate(NOW).changed  # idempotent


def test_consolidate_on_write_up_graph():
    g = auth_graph()
    g.consolidate(NOW)
    resolved = g.resolve_entities(rewrite_query("auth").expanded_terms)
    assert [r.node_id for r in resolved] == ["auth", "oauth"]
    assert resolved[0].state == "uses OAuth; supersedes JWT"
    assert g.edges[2].status == "retired"  # session uses jwt
    assert "graph:jwt" not in dict(g.bm25_documents())


# ---------------------------------------------------------------- persistence
def test_save_load_round_trip(tmp_path):
    g = auth_graph()
    g.upsert_node(N("oauth", "OAuth", type="tool", aliases=("oauth2", "OIDC"), summary="é ünïcode"))
    g.consolidate(NOW)
    g.save(tmp_path / "graph")
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == ["edges.jsonl", "nodes.jsonl"]
    back = EntityGraph.load(tmp_path / "graph")
    assert back.nodes == g.nodes and back.edges == g.edges
    assert back.valid_until("jwt") == NOW.isoformat().replace("+00:00", "Z")
    first = json.loads((tmp_path / "graph" / "nodes.jsonl").read_text().splitlines()[0])
    assert first == {"id": "auth", "label": "auth", "type": "concept", "aliases": [],
                     "status": "active", "summary": ""}
    # saving again overwrites in place
    back.upsert_node(N("new", "New"))
    back.save(tmp_path / "graph")
    assert len(EntityGraph.load(tmp_path / "graph")) == 5


def test_load_missing_files_is_empty_and_missing_dir_errors(tmp_path):
    assert len(EntityGraph.load(tmp_path)) == 0
    with pytest.raises(FileNotFoundError):
        EntityGraph.load(tmp_path / "absent")


def _write(dirpath, nodes, edges=""):
    (dirpath / "nodes.jsonl").write_text(nodes)
    (dirpath / "edges.jsonl").write_text(edges)


GOOD = '{"id": "a", "label": "A"}\n{"id": "b", "label": "B"}\n'


@pytest.mark.parametrize(
    ("nodes", "edges", "where", "field"),
    [
        ('{"id": "a", "label": "A"}\n{"id": "b"\n', "", "nodes.jsonl:2", "invalid JSON"),
        ('{"id": "a"}\n', "", "nodes.jsonl:1", "'label'"),
        ('{"id": "a", "label": "A", "status": "gone"}\n', "", "nodes.jsonl:1", "'status'"),
        ('{"id": "a", "label": "A", "aliases": "x"}\n', "", "nodes.jsonl:1", "'aliases'"),
        ('{"id": "a", "label": "A", "colour": 1}\n', "", "nodes.jsonl:1", "'colour'"),
        ('\n{"id": "a b", "label": "A"}\n', "", "nodes.jsonl:2", "'id'"),
        (GOOD + '{"id": "a", "label": "A2"}\n', "", "nodes.jsonl:3", "'id'"),
        ('[1]\n', "", "nodes.jsonl:1", "JSON object"),
        (GOOD, '{"source": "a", "target": "zz", "type": "uses"}\n', "edges.jsonl:1", "'target'"),
        (GOOD, '{"source": "a", "target": "b"}\n', "edges.jsonl:1", "'type'"),
        (GOOD, '{"source": "a", "target": "a", "type": "uses"}\n', "edges.jsonl:1", "'target'"),
        (GOOD, '{"source": "a", "target": "b", "type": "uses", "status": 3}\n', "edges.jsonl:1",
         "'status'"),
    ],
)
def test_load_errors_name_file_line_and_field(tmp_path, nodes, edges, where, field):
    _write(tmp_path, nodes, edges)
    with pytest.raises(ValueError) as info:
        EntityGraph.load(tmp_path)
    assert where in str(info.value) and field in str(info.value)


def test_save_leaves_no_temp_files_and_keeps_old_file_on_failure(tmp_path, monkeypatch):
    import memofs.graph.entity_graph as graph_mod

    g = auth_graph()
    g.save(tmp_path)
    before = (tmp_path / "nodes.jsonl").read_text()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    g.upsert_node(N("z", "Z"))
    monkeypatch.setattr(graph_mod.os, "replace", boom)
    with pytest.raises(OSError):
        g.save(tmp_path)
    assert (tmp_path / "nodes.jsonl").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edges.jsonl", "nodes.jsonl"]
