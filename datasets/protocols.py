"""Named retrieval protocols: which documents a loader builds, which questions it keeps and how
the field metrics read a ranking, so a figure can sit beside the published one it names.

- ``memofs``: the harness's own protocol (every turn indexed as ``role: content``; relevance
  from answer sessions / ``has_answer`` turns; questions without relevance left out).
- ``longmemeval-official``: LongMemEval's ``src/retrieval/run_retrieval.py`` and ``eval_utils.py``
  (github.com/xiaowu0162/LongMemEval): user turns only, a session document is its user turns
  joined by one space; gold from session ids containing ``answer`` and the ``has_answer`` flags of
  user turns; the 470 questions without abstention (those without user-side gold kept: recall_any
  0, recall_all 1 since ``all([])`` is true, ndcg_any 0); turn2session metrics grow k until k
  distinct sessions are covered. ``longmemeval-official-419``: the same on the questions that have
  user-side gold.
- ``lenient``: how memory products publish: official documents and gold, all questions
  (abstention included), ``session_recall_any@N`` over the sessions of the top N documents (no
  growth of N) and an nDCG whose ideal is built from the retrieved list. Not comparable with the
  official figures; labelled lenient wherever it appears.
- ``locomo-paper``: LoCoMo's ``task_eval/evaluation.py`` R@k (github.com/snap-research/locomo):
  the share of a question's evidence entries found verbatim among the retrieved dia_ids, 1 for a
  question with no evidence; every category including the adversarial 5.
  ``locomo-paper-no-adv``: the same without category 5.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """A named preset: ``family`` selects the metric definitions (see the module docstring)."""

    name: str
    family: str  # "memofs" | "official" | "lenient" | "locomo-paper"
    questions: str  # which questions are kept: "judged", "answerable", "user-gold", "all"
    label: str

    @property
    def keeps_unjudged(self) -> bool:
        """Questions without gold stay in (they score by the published definition)."""
        return self.questions in ("answerable", "all")


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("memofs", "memofs", "judged", "memofs (ours)"),
    Protocol("longmemeval-official", "official", "answerable", "LongMemEval official, 470 without abstention"),
    Protocol("longmemeval-official-419", "official", "user-gold", "LongMemEval official, 419 with user-side gold"),
    Protocol("lenient", "lenient", "all", "lenient (as products publish): all questions, retrieved-list nDCG ideal"),
    Protocol("locomo-paper", "locomo-paper", "all", "LoCoMo paper R@k, all categories"),
    Protocol("locomo-paper-no-adv", "locomo-paper", "all", "LoCoMo paper R@k, without adversarial (category 5)"),
)}
LONGMEMEVAL_PROTOCOLS = ("memofs", "longmemeval-official", "longmemeval-official-419", "lenient")
LOCOMO_PROTOCOLS = ("memofs", "locomo-paper", "locomo-paper-no-adv")
# the k list of LongMemEval's run_retrieval.py
OFFICIAL_KS = (1, 3, 5, 10, 30, 50)


def protocol(name: str, allowed: tuple[str, ...]) -> Protocol:
    """The preset ``name``; ``ValueError`` naming the choices when the loader does not offer it."""
    if name not in allowed:
        raise ValueError(f"protocol must be one of {', '.join(allowed)}, got {name!r}")
    return PROTOCOLS[name]
