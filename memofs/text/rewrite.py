"""Task-aware query rewriting (spec "Task-aware biasing"; upstream-facts.md section 7).

Two outputs come from one query:

* ``expanded_terms`` -- upstream's insertion-ordered, lowercased set: the tokens of
  ``base`` (section 1c tokenizer), then the lexicon expansions of each token in order,
  then caller ``extra_terms``, then the task expansions. Entity resolution uses it.
* ``text`` -- the string fed to BM25 and the embedder. Our reading of the write-up's
  worked example ("login failure", debug ->
  "Recent errors and bug-fix context login failure authentication auth exception crash
  stack trace debug issue"):

      base = "<prepend> <query>"   (just the query when no prepend applies)
      text = base + " " + " ".join(t for t in expanded_terms[after the tokens]
                                   if t not in base.lower())

  i.e. the added terms (lexicon, extra, task; in that order, each once) are appended
  unless a term already occurs as a case-insensitive substring of ``base``. That is why
  the example drops "error" ("errors"), "bug" and "fix" ("bug-fix") and "failure" (in
  the query) yet keeps "auth" after "authentication": only ``base`` is searched, not
  the terms added so far.

Differences from upstream, documented as the brief asks:

* Upstream's recall query is ``" ".join(expanded_terms)`` (lowercase, prepend split into
  tokens, duplicates of the prepend words included). The write-up's example is not that
  string, so ``text`` follows the write-up.
* As upstream, ``expanded`` is ``len(expanded_terms) > len(tokens)`` (the token count
  includes duplicates), and when it is false ``text`` is the original query without the
  prepend.
* Lexicon lookup runs over every token of ``base``, prepend included, as upstream's step 3
  does. Only the refactor prepend contains a trigger ("dependency"), so a refactor query
  always gains "dependencies", "deps" and "package".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memofs.text.lexicon import TASK_TYPES, lexicon_expansions, task_profile
from memofs.text.tokenize import tokenize_rewrite

__all__ = ["TASK_TYPES", "RewrittenQuery", "rewrite_query"]


@dataclass(frozen=True)
class RewrittenQuery:
    """A query after task-aware rewriting.

    ``tokens`` are the section-1c tokens of ``"<prepend> <query>"`` (duplicates kept);
    ``expanded_terms`` is the ordered set described in the module docstring;
    ``text`` is what recall should search with.
    """

    original: str
    tokens: tuple[str, ...]
    expanded_terms: tuple[str, ...]
    expanded: bool
    text: str


def rewrite_query(
    query: str,
    task_type: str = "general",
    *,
    use_task: bool = True,
    use_lexicon: bool = True,
    extra_terms: Iterable[str] = (),
) -> RewrittenQuery:
    """Rewrite ``query`` for ``task_type`` (one of :data:`TASK_TYPES`).

    ``use_task=False`` drops the prepend and the task expansions (as for ``general``);
    ``use_lexicon=False`` drops the domain-lexicon expansions. ``task_type`` is validated
    either way. ``extra_terms`` play the role of upstream's adapter expansions.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be str, got {type(query).__name__}")
    profile = task_profile(task_type)
    extras = list(extra_terms)
    for i, term in enumerate(extras):
        if not isinstance(term, str):
            raise TypeError(f"extra_terms[{i}] must be str, got {type(term).__name__}")

    prepend = profile.prepend if use_task else ""
    base = f"{prepend} {query}" if prepend else query
    tokens = tokenize_rewrite(base)

    terms: dict[str, None] = dict.fromkeys(tokens)  # insertion-ordered set
    seeded = len(terms)

    def add(term: str) -> None:
        term = term.lower()
        if term:  # an empty extra term would only add a stray space to ``text``
            terms.setdefault(term, None)

    if use_lexicon:
        for token in tokens:
            for term in lexicon_expansions(token):
                add(term)
    for term in extras:
        add(term)
    if use_task:
        for term in profile.expansions:
            add(term)

    expanded_terms = tuple(terms)
    expanded = len(expanded_terms) > len(tokens)
    if expanded:
        haystack = base.lower()
        added = [t for t in expanded_terms[seeded:] if t not in haystack]
        text = " ".join([base, *added])
    else:
        text = query
    return RewrittenQuery(
        original=query,
        tokens=tuple(tokens),
        expanded_terms=expanded_terms,
        expanded=expanded,
        text=text,
    )
