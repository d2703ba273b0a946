"""Query cues of learned fusion: whether a query asks about a past moment, names a date, or
asks about the present / latest state (its query-level features, :mod:`memofs.ranking.learned_features`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memofs.text.tokenize import tokenize_simple


_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
#: cues that a query asks about a past moment rather than the latest state
PAST_CUES = re.compile(
    r"\b(when\s+did|when\s+was|when\s+were|last\s+time|used\s+to|before|ago|previous(ly)?|earlier|originally|"
    r"at\s+first|back\s+(then|in)|in\s+the\s+past|first\s+time|did|was|were|had|went|"
    r"yesterday|last\s+(week|month|year|summer|winter|spring|fall|weekend)|\w{3,}ed)\b",
    re.I,
)
#: explicit dates: month or weekday names, years
DATE_CUES = re.compile(rf"\b({_MONTHS}|({_WEEKDAYS})s?|(19|20)\d\d)\b", re.I)
#: cues that a query asks about the present / latest state
PRESENT_CUES = re.compile(
    r"\b(now|current(ly)?|latest|these\s+days|still|today|right\s+now|most\s+recent(ly)?|newest|"
    r"at\s+present|any\s*more|nowadays|up\s+to\s+date)\b",
    re.I,
)


@dataclass(frozen=True)
class QueryCues:
    """Query-level flags (regex on the query text) and its length in words."""

    past: float
    date: float
    present: float
    when: float
    n_words: int


def query_cues(text: str) -> QueryCues:
    t = text or ""
    return QueryCues(
        past=float(PAST_CUES.search(t) is not None),
        date=float(DATE_CUES.search(t) is not None),
        present=float(PRESENT_CUES.search(t) is not None),
        when=float(re.match(r"\s*when\b", t, re.I) is not None),
        n_words=len(tokenize_simple(t)),
    )
