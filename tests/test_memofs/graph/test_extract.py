"""RuleBasedExtractor: each rule of upstream-facts.md section 8, on hand-written lines."""

from __future__ import annotations

from datetime import datetime

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.graph import extract
from memofs.graph.extract import RuleBasedExtractor, clean_line, normalize_label, slug
from memofs.graph.entity_graph import EntityGraph
from memofs.files.records import GraphEdge, GraphNode


def facts(text: str, **kw) -> list[tuple[str, str, str]]:
    _, edges = RuleBasedExtractor(**kw).extract(text)
    return [(e.source, e.type, e.target) for e in edges]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # rule 1: uses / use / is using
        ("The API uses Postgres", ("concept:the-api", "uses", "concept:postgres")),
        ("We use Biome", ("concept:we", "uses", "concept:biome")),
        ("Billing is using Stripe", ("concept:billing", "uses", "concept:stripe")),
        ("billing IS USING stripe", ("concept:billing", "uses", "concept:stripe")),
        # rule 2: depends on / requires / needs
        ("Worker depends on Redis", ("concept:worker", "depends_on", "concept:redis")),
        ("Login requires MFA", ("concept:login", "depends_on", "concept:mfa")),
        ("Search needs an index", ("concept:search", "depends_on", "concept:an-index")),
        # rule 3: prefers / likes
        ("Team prefers tabs", ("concept:team", "prefers", "concept:tabs")),
        ("Alice likes Vim", ("concept:alice", "prefers", "concept:vim")),
        # rule 4: blocks / is blocking
        ("Bug 12 blocks release", ("concept:bug-12", "blocks", "concept:release")),
        ("Migration is blocking deploy", ("concept:migration", "blocks", "concept:deploy")),
        # rule 5: supersedes / replaces / deprecates
        ("OAuth supersedes JWT", ("concept:oauth", "supersedes", "concept:jwt")),
        ("pnpm replaces npm", ("concept:pnpm", "supersedes", "concept:npm")),
        ("v2 deprecates v1", ("concept:v2", "supersedes", "concept:v1")),
        # rule 6: owns / maintains
        ("Bob owns billing", ("concept:bob", "owns", "concept:billing")),
        ("Infra maintains CI", ("concept:infra", "owns", "concept:ci")),
        # rule 7: bare arrows, whitespace optional
        ("cache -> redis", ("concept:cache", "related_to", "concept:redis")),
        ("cache=>redis", ("concept:cache", "related_to", "concept:redis")),
        # arrow triple, tried before all rules
        ("auth -> uses -> oauth", ("concept:auth", "uses", "concept:oauth")),
        ("auth=>Is-Part_Of=>platform", ("concept:auth", "is-part_of", "concept:platform")),
        ("svc -> replaces -> old svc", ("concept:svc", "replaces", "concept:old-svc")),
    ],
)
def test_each_rule(line, expected):
    assert facts(line) == [expected]


def test_rule_order_and_lazy_subject():
    # rule 1 is tried before rule 5, and the subject is the shortest prefix
    assert facts("A supersedes B which uses C") == [("concept:a-supersedes-b-which", "uses", "concept:c")]
    assert facts("API uses X uses Y") == [("concept:api", "uses", "concept:x-uses-y")]
    # verb rules beat the bare arrow
    assert facts("a -> b uses c") == [("concept:a-b", "uses", "concept:c")]
    # an identifier between two arrows is read as the relation
    assert facts("a -> bc -> c") == [("concept:a", "bc", "concept:c")]
    # ... but one character is too short: rule 7 then takes "b -> c" as the object
    assert facts("a -> b -> c") == [("concept:a", "related_to", "concept:b-c")]
    # a relation must start with a letter or "_" and have 2-65 characters
    assert facts("a -> 1x -> c") == [("concept:a", "related_to", "concept:1x-c")]


@pytest.mark.parametrize(
    "line",
    ["We prefer tabs", "usesPostgres", "uses Postgres", "Postgres uses", "The API users data",
     "plain sentence", "", "a -> ", "-> b", "`` uses x", "X uses X", "Postgres uses postgres."],
)
def test_lines_without_facts(line):
    assert facts(line) == []


def test_line_cleaning():
    assert clean_line("  - API uses pg  ") == "API uses pg"
    assert clean_line("* API uses pg") == "API uses pg"
    assert clean_line("+ API uses pg") == "API uses pg"
    assert clean_line("12. API uses pg") == "API uses pg"
    assert clean_line("3) API uses pg") == "API uses pg"
    assert clean_line("### API uses pg") == "API uses pg"
    assert clean_line("-API uses pg") == "-API uses pg"  # a bullet needs a space
    text = "# Decisions\n- The API uses `Postgres`.\n2) **Billing** depends on \"Stripe\";\n"
    assert facts(text) == [
        ("concept:the-api", "uses", "concept:postgres"),
        ("concept:billing", "depends_on", "concept:stripe"),
    ]


def test_label_normalisation_and_slugs():
    assert normalize_label(" `my_lib`*, ") == "mylib"
    assert normalize_label("'quoted' \"label\".;:,") == "quoted label"
    assert normalize_label("x" * 200) == "x" * 160
    assert slug("  Crème Brûlée!! ") == "creme-brulee"
    assert slug("***") == "unknown"
    assert slug("a" * 100) == "a" * 80
    nodes, edges = RuleBasedExtractor(default_node_type="Tool Kind").extract("Café uses Crème brûlée")
    assert nodes == [
        GraphNode(id="tool-kind:cafe", label="Café", type="Tool Kind"),
        GraphNode(id="tool-kind:creme-brulee", label="Crème brûlée", type="Tool Kind"),
    ]
    assert edges == [GraphEdge("tool-kind:cafe", "tool-kind:creme-brulee", "uses")]


def test_nodes_deduplicated_first_label_kept_and_max_facts():
    text = "\n".join(["API uses PostgreSQL", "api uses postgresql", "Worker uses PostgreSQL",
                      "Worker -> API", "X uses Y"])
    nodes, edges = RuleBasedExtractor().extract(text)
    assert [(n.id, n.label) for n in nodes] == [
        ("concept:api", "API"), ("concept:postgresql", "PostgreSQL"), ("concept:worker", "Worker"),
        ("concept:x", "X"), ("concept:y", "Y"),
    ]
    assert len(edges) == 4  # the repeated fact is one edge
    assert facts(text, max_facts=2) == [
        ("concept:api", "uses", "concept:postgresql"),
        ("concept:worker", "uses", "concept:postgresql"),
    ]
    nodes, _ = RuleBasedExtractor(max_facts=1).extract(text)
    assert [n.id for n in nodes] == ["concept:api", "concept:postgresql"]


def test_limits_and_bad_input():
    ex = RuleBasedExtractor()
    assert ex.extract("a" * 250_000) == ([], [])
    with pytest.raises(ValueError, match="250000"):
        ex.extract("a" * 250_001)
    with pytest.raises(TypeError):
        ex.extract(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ex.extract("a uses b", source_id=3)  # type: ignore[arg-type]
    for bad in (0, 1001, True, 2.5):
        with pytest.raises(ValueError, match="max_facts"):
            RuleBasedExtractor(max_facts=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RuleBasedExtractor(default_node_type=" ")
    assert RuleBasedExtractor(max_facts=1000).max_facts == 1000


def test_output_loads_into_graph():
    nodes, edges = RuleBasedExtractor().extract(
        "Auth uses OAuth\nOAuth supersedes JWT\nSessions use JWT\r\nAuth -> owner -> Alice",
        source_id="mem-1",
    )
    g = EntityGraph(nodes, edges)
    g.consolidate(datetime(2026, 1, 1))
    assert g.retired_ids() == {"concept:jwt"}
    assert g.entity_state("concept:auth") == "uses OAuth"
    assert g.entity_state("concept:oauth") == "supersedes JWT"


# ---------------------------------------------------------------- the trigger gate
# match_fact searches its rules only on lines holding FACT_TRIGGER; the reference below is
# the rules without the gate, in the same order.
def ungated_match(line: str):
    m = extract._ARROW_TRIPLE.match(line)
    if m:
        return m.group(1), extract._RELATION_RUN.sub("_", m.group(2).lower()), m.group(3)
    for pattern, edge_type in extract._VERB_RULES:
        m = pattern.match(line)
        if m:
            return m.group(1), edge_type, m.group(2)
    return None


LINE_PIECES = ["The API", "billing", " ", "  ", "\t", "uses", "USES", "use", "is using", "IS\tUSING", "depends on",
               "Depends  On", "requires", "needs", "prefers", "likes", "blocks", "is blocking", "supersedes",
               "replaces", "deprecates", "owns", "maintains", "->", "=>", "- >", "calls_api", "Stripe", "redis",
               "because", "user", "u\u017fes", "\u212a", "maıntains", "ownership", "-", "=", ">", "x"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(LINE_PIECES), max_size=9).map("".join))
def test_gated_rules_equal_the_ungated_rules(line: str) -> None:
    assert extract.match_fact(line) == ungated_match(line)
    for pattern, _ in ((extract._ARROW_TRIPLE, None), *extract._VERB_RULES):
        if pattern.match(line):
            assert extract.FACT_TRIGGER.search(line)
