"""The recall tokenizer's stop-word list: exactly 94 English words (spec, "Signal 1").

The write-up says "a curated set of 94 stop words"; upstream ships 68
(upstream-facts.md section 1a). We keep upstream's 68 verbatim, in source order, and
complete them with 26 common function words. Negations (``not``, ``no``) and temporal
prepositions (``before``, ``after``, ``since``) are deliberately *not* added: in project
memory "do not use X" and "after the migration" carry meaning.
"""

from __future__ import annotations

UPSTREAM_STOP_WORDS: tuple[str, ...] = tuple(
    """a an and are as at be but by for from has have he in is it its of on or that the
    this to was were will with i you we they them our your their me my do does did can
    could would should shall may might must how what when where who why which if then so
    than too very about into over under again""".split()
)

ADDED_STOP_WORDS: tuple[str, ...] = tuple(
    """been being had having him his her hers she these those there here am because
    while until during between through each both some such only just""".split()
)

STOP_WORDS: frozenset[str] = frozenset(UPSTREAM_STOP_WORDS + ADDED_STOP_WORDS)
