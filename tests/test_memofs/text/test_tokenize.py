import numpy as np
import pytest

from memofs.text.stopwords import ADDED_STOP_WORDS, STOP_WORDS, UPSTREAM_STOP_WORDS
from memofs.text.tokenize import tokenize, tokenize_rewrite, tokenize_simple


def test_stop_word_list_has_exactly_94_words():
    assert len(STOP_WORDS) == 94
    assert len(UPSTREAM_STOP_WORDS) == 68 and len(set(UPSTREAM_STOP_WORDS)) == 68
    assert not set(UPSTREAM_STOP_WORDS) & set(ADDED_STOP_WORDS)
    for w in ("the", "again", "which", "been", "just"):
        assert w in STOP_WORDS
    for w in ("not", "no", "before", "after", "database"):
        assert w not in STOP_WORDS


def test_upstream_example():
    assert tokenize("how do we handle the auth") == ["handle", "auth"]


def test_split_lowercase_and_duplicates_kept():
    assert tokenize("Use D1 for tenant_metadata; D1!") == ["use", "d1", "tenant", "metadata", "d1"]
    assert tokenize("v2.3.1 HTTP-429") == ["v2", "3", "1", "http", "429"]


def test_unicode_accented_and_cjk():
    # accented letters are alphanumeric: kept inside the token, lowercased
    assert tokenize("Café CRÈME") == ["café", "crème"]
    # a CJK run has no separators, so it is one token; mixed scripts split at punctuation
    assert tokenize("数据库连接 池") == ["数据库连接", "池"]
    assert tokenize("pgBouncer：连接") == ["pgbouncer", "连接"]


def test_simple_tokenizer_keeps_stop_words():
    assert tokenize_simple("How do we handle the Auth") == ["how", "do", "we", "handle", "the", "auth"]


def test_rewrite_tokenizer_keeps_underscore_splits_hyphen():
    assert tokenize_rewrite("Bug-fix my_var, (login)") == ["bug", "fix", "my_var", "login"]


def test_empty_and_bad_input():
    assert tokenize("") == [] and tokenize("the of and") == [] and tokenize("!!!") == []
    with pytest.raises(TypeError, match="text must be str"):
        tokenize(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokenize_simple(b"bytes")  # type: ignore[arg-type]


def test_word_counts_split_underscores_like_the_tokenizer():
    """The learned fusion counts words with the tokenizer's split (``_`` separates), not
    ``\\w+`` (which keeps ``default_pool_size`` as one word)."""
    from memofs.ranking.learned import query_cues
    from memofs.signals.frame import context_columns

    assert query_cues("pgBouncer default_pool_size").n_words == 4
    c = context_columns(["a", "b"], ["n", "n"], np.array([0.0, 0.0]), ["set max_conn to 10_000", "__"])
    assert c.n_words.tolist() == [6, 0]  # set, max, conn, to, 10, 000; "__" has no word
