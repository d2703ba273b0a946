"""Task-aware query rewriting. Expected strings are worked out by hand from the tables in
upstream-facts.md section 7 and the substring rule in memofs/text/rewrite.py's docstring."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memofs.text.lexicon import DOMAIN_LEXICON, TASK_PROFILES, TASK_TYPES, lexicon_expansions
from memofs.text.rewrite import rewrite_query


def test_write_up_worked_example_verbatim():
    r = rewrite_query("login failure", "debug")
    assert r.text == (
        "Recent errors and bug-fix context login failure authentication auth exception crash "
        "stack trace debug issue"
    )
    assert r.original == "login failure"
    assert r.tokens == ("recent", "errors", "and", "bug", "fix", "context", "login", "failure")
    # Upstream's set keeps "error" (only "errors" is a token); the text drops it.
    assert r.expanded_terms == (
        "recent", "errors", "and", "bug", "fix", "context", "login", "failure",
        "authentication", "auth",
        "error", "exception", "crash", "stack trace", "debug", "issue",
    )
    assert r.expanded is True


@pytest.mark.parametrize(
    ("query", "task", "text"),
    [
        # "constraint" in "Constraints", "pattern" in "patterns": both skipped.
        ("naming", "coding",
         "Constraints, patterns, and recent decisions naming rule convention standard style guideline"),
        # db expands before the task terms; error/bug/fix are in the prepend.
        ("db timeout", "debug",
         "Recent errors and bug-fix context db timeout database postgres sqlite turso "
         "exception crash failure stack trace debug issue"),
        # The prepend token "dependency" is a lexicon trigger; "module" is in the query.
        ("module layout", "refactor",
         "Architecture decisions and dependency graph module layout dependencies deps package "
         "refactor structure design pattern coupling interface"),
        # "api", "documentation", "contract", "readme" are already there; "docs" is not a
        # substring of "documentation".
        ("readme for config", "docs",
         "Public API contracts and documentation decisions readme for config configuration "
         "docs interface type schema"),
        ("auth", "general", "auth authentication jwt oauth login"),
        ("db", "general", "db database postgres sqlite turso"),
        ("deps", "general", "deps dependency dependencies package"),
        ("ci", "general", "ci continuous integration github actions"),
        ("fmt", "general", "fmt format formatting biome prettier"),
        ("pkg", "general", "pkg package pnpm npm"),
        ("config", "general", "config configuration"),
        # Tokens already in the set are not re-added; the original casing stays in ``base``.
        ("Login auth", "general", "Login auth authentication jwt oauth"),
        # Not recursive: "ci" is added but its own expansions are not.
        ("deploy", "general", "deploy deployment ci release"),
        # Multi-word task term already in the query is skipped as a whole.
        ("stack trace missing", "debug",
         "Recent errors and bug-fix context stack trace missing exception crash failure debug issue"),
    ],
)
def test_hand_worked_rewrites(query, task, text):
    assert rewrite_query(query, task).text == text


def test_general_without_lexicon_hit_is_the_original():
    r = rewrite_query("Where is the Retry policy?", "general")
    assert r.text == "Where is the Retry policy?"
    assert r.expanded is False
    assert r.tokens == ("where", "is", "the", "retry", "policy")
    assert r.expanded_terms == r.tokens


def test_default_task_is_general():
    assert rewrite_query("db") == rewrite_query("db", "general")


def test_underscore_and_hyphen_tokenization():
    # section 1c: hyphen splits, underscore does not; "db" inside db_pool is no trigger.
    r = rewrite_query("db_pool ci-cd")
    assert r.tokens == ("db_pool", "ci", "cd")
    assert r.text == (
        "db_pool ci-cd continuous integration github actions continuous deployment deploy"
    )


def test_switches_ablate_each_part():
    assert rewrite_query("login failure", "debug", use_task=False).text == (
        "login failure authentication auth"
    )
    assert rewrite_query("login failure", "debug", use_lexicon=False).text == (
        "Recent errors and bug-fix context login failure exception crash stack trace debug issue"
    )
    both_off = rewrite_query("login failure", "debug", use_task=False, use_lexicon=False)
    assert both_off.text == "login failure"
    assert both_off.expanded is False
    assert both_off.tokens == ("login", "failure")


def test_extra_terms_sit_between_lexicon_and_task_terms():
    r = rewrite_query("login failure", "debug", extra_terms=("HotFix", "auth"))
    assert r.text == (
        "Recent errors and bug-fix context login failure authentication auth hotfix "
        "exception crash stack trace debug issue"
    )
    assert r.expanded_terms.index("hotfix") == r.expanded_terms.index("auth") + 1
    assert rewrite_query("hello", extra_terms=("SSO",)).text == "hello sso"


def test_duplicate_tokens_do_not_count_as_expansion():
    # upstream: expanded = set size > token count (duplicates included)
    r = rewrite_query("retry retry")
    assert r.expanded is False and r.text == "retry retry"
    assert r.tokens == ("retry", "retry") and r.expanded_terms == ("retry",)


def test_invalid_task_type_lists_valid_ones():
    with pytest.raises(ValueError, match="coding, debug, refactor, docs, general"):
        rewrite_query("x", "testing")
    with pytest.raises(ValueError):
        rewrite_query("x", "Debug", use_task=False)
    with pytest.raises(TypeError):
        rewrite_query(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rewrite_query("x", extra_terms=(1,))  # type: ignore[arg-type]


def test_tables_match_upstream_sheet():
    assert TASK_TYPES == ("coding", "debug", "refactor", "docs", "general")
    assert set(TASK_PROFILES) == set(TASK_TYPES)
    assert TASK_PROFILES["general"].prepend == "" and TASK_PROFILES["general"].expansions == ()
    triggers = [t for t, _ in DOMAIN_LEXICON]
    assert len(triggers) == 19 and len(set(triggers)) == 19
    assert lexicon_expansions("test") == ("testing", "vitest", "jest", "spec")
    assert lexicon_expansions("Auth") == ()  # exact, case-sensitive lookup on lowercased tokens


_WORDS = [t for t, _ in DOMAIN_LEXICON] + ["retry", "Errors", "stack", "trace", "x", "bug-fix"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=5), st.sampled_from(TASK_TYPES))
def test_text_invariants(words, task):
    query = " ".join(words)
    r = rewrite_query(query, task)
    prepend = TASK_PROFILES[task].prepend
    base = f"{prepend} {query}" if prepend else query
    if not r.expanded:
        assert r.text == query
        return
    assert r.text.startswith(base)
    added = r.text[len(base):].strip()
    new_terms = [t for t in r.expanded_terms if t not in r.tokens]
    # every new set member is either in the base string already or appended, in set order
    expected = [t for t in new_terms if t not in base.lower()]
    assert added == " ".join(expected)
    assert r.expanded_terms == tuple(dict.fromkeys(r.expanded_terms))
