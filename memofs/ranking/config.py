"""One typed, validated configuration for the whole recall pipeline.

Every constant of the spec lives here with the spec's default; every signal and
adjustment has a switch. Switching a signal off is defined to be the same as giving it
zero weight (and a path with zero weight retrieves no candidate pool), so ablations by
toggle and by weight agree.

Fields that change the *signals* (what is extracted per query and candidate) are listed
in :data:`SIGNAL_FIELDS`; all other fields only change how cached signals are combined
(:func:`memofs.ranking.fusion.fuse`). The harness caches signals by :meth:`RecallConfig.signal_key`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from memofs.graph.entity_graph import ENTITY_MATCH_MODES, EntityMatch
from memofs.ranking.profiles import PROFILE_NAMES, profile_settings
from memofs.signals.rerank import RERANKERS
from memofs.text.lexicon import TASK_TYPES

DEFAULT_KIND_EXPIRY_DAYS: Mapping[str, float] = MappingProxyType(
    {"decision": 365.0, "constraint": 180.0, "preference": 90.0, "note": 30.0}
)

SIGNAL_FIELDS: tuple[str, ...] = (
    "use_rewrite",
    "use_lexicon",
    "use_entity_boost",
    "k1",
    "b",
    "fuzzy_partial",
    "entity_match",
    "upstream_index_text",
    "graph_doc_aliases",
    "upstream_stop_words",
    "stem",
)
"""Fields that change extracted signals; everything else is recombination."""
_PARITY_SIGNAL_DEFAULTS: Mapping[str, bool] = MappingProxyType(
    {"upstream_index_text": False, "graph_doc_aliases": True, "upstream_stop_words": False, "stem": False})


LEARNED_FALLBACKS: tuple[str, ...] = ("rrf", "none")
"""What a learned fusion falls back to on out-of-distribution candidates (RecallConfig.learned_fallback)."""
FUSION_MODES: tuple[str, ...] = ("formula", "learned")
"""``formula``: the spec's weighted sum; ``learned``: a model file scores the same pools."""


def model_identity(path: str) -> str:
    """A learned model file as :meth:`RecallConfig.config_hash` records it: its file name and
    the SHA-256 of its bytes (``missing`` when it cannot be read), never its directory."""
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        digest = "missing"
    return f"{Path(path).name}:{digest}"

@dataclass(frozen=True)
class RecallConfig:
    """Spec defaults. Formulas (spec "Fusion", "Post-scoring intelligence"):

    lexical  = use_bm25 * BM25 + use_fuzzy * fuzzy_boost * fuzzyOverlap
    base     = w_vec * clamp01(cosine) + (1 - w_vec) * clamp01(saturate(lexical, saturation_c))
               (dynamic: no usable vector path -> 0 / 1; no lexical hit -> 1 / 0)
    base    <- (1 - rerank_blend) * base + rerank_blend * clamp01(rerank)
    final    = w_relevance * base + w_recency * 0.5 ** (age_days / half_life_days)
               + w_confidence * clamp01(confidence or default_confidence)
    final   *= stale_penalty (anchor drift) * unverified_penalty (kind decay)
               * superseded_penalty (supersession)

    Post-scoring names, one concept each (the spec's "Post-scoring intelligence: drift and
    decay"): *anchor drift* is switched by ``use_drift``; a memory whose anchor drifted is
    *stale* and is multiplied by ``stale_penalty`` (explain: penalty ``stale_anchor``).
    *Kind decay* (the spec's "cognitive decay") is switched by ``use_decay``; a memory older
    than its kind's floor in ``kind_expiry_days`` is *unverified* (the spec's word) and is
    multiplied by ``unverified_penalty`` (explain: penalty ``unverified_kind``; the datasets'
    query category ``expired_kind`` tests it). The field names stay as they are: they are
    user-facing in ``.memofs/config.json`` and the eval specs.
    """

    # switches
    use_vector: bool = True
    use_bm25: bool = True
    use_fuzzy: bool = True
    use_reranker: bool = True
    use_recency: bool = True
    use_confidence: bool = True
    use_drift: bool = True
    use_decay: bool = True
    use_rewrite: bool = True
    use_lexicon: bool = True
    use_entity_boost: bool = True
    dynamic_weights: bool = True
    # lexical signal
    k1: float = 1.2
    b: float = 0.75
    fuzzy_boost: float = 0.15
    fuzzy_partial: float = 0.25
    saturation_c: float = 2.0
    # candidate pools
    top_k: int = 10
    vector_pool_multiplier: float = 3.0
    lexical_pool_multiplier: float = 2.0
    # fusion
    w_vec: float = 0.6
    rerank_blend: float = 0.5
    w_relevance: float = 0.7
    w_recency: float = 0.2
    w_confidence: float = 0.1
    half_life_days: float = 30.0
    default_confidence: float = 0.5
    round_decimals: int = 4
    # post-scoring
    stale_penalty: float = 0.5
    unverified_penalty: float = 0.6
    kind_expiry_days: Mapping[str, float] = field(default_factory=lambda: DEFAULT_KIND_EXPIRY_DAYS)
    # query
    task_type: str = "general"
    include_graph_docs: bool = False
    # entity resolution: the recall tokenizer's terms (our reading) or upstream's raw terms
    entity_match: EntityMatch = "terms"
    # combination: the spec's formula (default) or a learned model over the same pools
    # (an option beyond the spec; see memofs.ranking.learned)
    fusion: str = "formula"
    learned_model: str | None = None
    # supersession (issue 20; spec "Entity-boost": superseded knowledge is outranked): a
    # memory superseded by another (``remember --supersedes``, or a graph ``supersedes``
    # edge onto one of its entities) is multiplied by ``superseded_penalty``; default chosen
    # on agent-memory's dev split (eval/studies/supersession_sweep.py)
    use_supersession: bool = True
    superseded_penalty: float = 0.6
    # upstream's phrase scan of core.md and notes.md into the lexical candidates
    # (upstream-facts section 2, memofs.signals.phrase_scan); the query as the caller gave
    # it is the phrase. Formula fusion only (the learned fusion and its features know no
    # blocks); the learned fusion does not apply superseded_penalty either
    use_phrase_scan: bool = True
    # learned fusion's safe fallback (memofs.ranking.learned.fuse_learned): when a query's
    # candidates fall outside the model's training distribution (mean share of feature values
    # outside its widened 1st-99th percentile range > learned_ood_threshold), explain says so
    # and the candidates are fused by learned_fallback: "rrf" (reciprocal rank fusion of the
    # lexical and cosine ranks, k = 60) or "none" (keep the model's order)
    learned_fallback: str = "rrf"
    learned_ood_threshold: float = 0.25
    # upstream parity switches (issue 37; the ``upstream`` profile), off in the reference:
    # BM25, fuzzy and the reranker read upstream's document text ``(title ?? first 80
    # characters) + "\n" + text`` (memofs.text.index_text; facts section 2)
    upstream_index_text: bool = False
    # graph node documents in the BM25 corpus carry the aliases (ours) or only "label summary"
    # (upstream's: they change N, df and avgdl like any document)
    graph_doc_aliases: bool = True
    # BM25 and fuzzy drop upstream's 68 stop words only, not our 94 (facts section 1a,
    # memofs.text.stopwords): the 26 added words count in document lengths and queries
    upstream_stop_words: bool = False
    # BM25 and fuzzy read Snowball English stems (memofs.text.stem; issue 46): off in the
    # reference; LanceDB's full-text index stems by default
    stem: bool = False
    # upstream's lexical candidates carry no timestamp and no confidence: recency 0.5 and
    # confidence default_confidence for every candidate (facts section 4 steps 6-7)
    neutral_recency_confidence: bool = False
    # the reranker behind the fold (issue 46): "deterministic" (the spec's token overlap, every
    # candidate) or "cross-encoder" (memofs.signals.cross_encoder, ONNX Runtime, no torch),
    # which scores only the top rerank_top_n candidates of the fused pool (the others keep
    # their base: the fold is the identity for a candidate it did not score); reranker_model
    # is the cross-encoder's directory (None: $MEMOFS_RERANKER_MODEL; no PyPI package ships one)
    reranker: str = "deterministic"
    reranker_model: str | None = None
    rerank_top_n: int = 20
    # a named profile (memofs.ranking.profiles): "reference" (the spec, default), "robust"
    # (the learned-fusion study's best leave-one-dataset-out configuration), "recommended"
    # (learned fusion, stemming in its space, chosen by a rule fixed in advance) or "upstream"
    # (upstream's own ranking, for parity); from_dict applies
    # the profile's settings first, then the other keys
    profile: str = "reference"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind_expiry_days", MappingProxyType(dict(self.kind_expiry_days)))
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, bool):
                raise ValueError(f"RecallConfig.{f.name} must be a bool, got {v!r}")
        for name in ("k1", "fuzzy_boost", "w_relevance", "w_recency", "w_confidence", "half_life_days"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"RecallConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("b", "fuzzy_partial", "w_vec", "rerank_blend", "default_confidence", "stale_penalty", "unverified_penalty",
                     "superseded_penalty"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"RecallConfig.{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not self.saturation_c > 0:
            raise ValueError(f"RecallConfig.saturation_c must be > 0, got {self.saturation_c!r}")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise ValueError(f"RecallConfig.top_k must be an int >= 1, got {self.top_k!r}")
        for name in ("vector_pool_multiplier", "lexical_pool_multiplier"):
            if not getattr(self, name) > 0:
                raise ValueError(f"RecallConfig.{name} must be > 0, got {getattr(self, name)!r}")
        total = self.w_relevance + self.w_recency + self.w_confidence
        # the spec's weights sum to 1; a sweep may zero one term (the same as switching it
        # off) but never push final scores past 1
        if not 0.0 < total <= 1.0 + 1e-9:
            raise ValueError(
                "RecallConfig: w_relevance + w_recency + w_confidence must be in (0, 1] "
                f"(got {self.w_relevance} + {self.w_recency} + {self.w_confidence} = {total})"
            )
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"RecallConfig.task_type must be one of {', '.join(TASK_TYPES)}; got {self.task_type!r}")
        for kind, days in self.kind_expiry_days.items():
            if not days > 0:
                raise ValueError(f"RecallConfig.kind_expiry_days[{kind!r}] must be > 0, got {days!r}")
        if not 0 <= self.round_decimals <= 12:
            raise ValueError(f"RecallConfig.round_decimals must be in [0, 12], got {self.round_decimals!r}")
        if self.entity_match not in ENTITY_MATCH_MODES:
            raise ValueError(
                f"RecallConfig.entity_match must be one of {', '.join(ENTITY_MATCH_MODES)}; got {self.entity_match!r}"
            )
        if self.fusion not in FUSION_MODES:
            raise ValueError(f"RecallConfig.fusion must be one of {', '.join(FUSION_MODES)}; got {self.fusion!r}")
        if self.learned_model is not None and not (isinstance(self.learned_model, str) and self.learned_model):
            raise ValueError(f"RecallConfig.learned_model must be a non-empty path string or None, got {self.learned_model!r}")
        if self.fusion == "learned" and self.learned_model is None:
            raise ValueError("RecallConfig.fusion='learned' needs learned_model (path of a model JSON file)")
        if self.learned_fallback not in LEARNED_FALLBACKS:
            raise ValueError(f"RecallConfig.learned_fallback must be one of {', '.join(LEARNED_FALLBACKS)}; got {self.learned_fallback!r}")
        if not 0.0 <= self.learned_ood_threshold <= 1.0:
            raise ValueError(f"RecallConfig.learned_ood_threshold must be in [0, 1], got {self.learned_ood_threshold!r}")
        if self.profile not in PROFILE_NAMES:
            raise ValueError(f"RecallConfig.profile must be one of {', '.join(PROFILE_NAMES)}; got {self.profile!r}")
        if self.reranker not in RERANKERS:
            raise ValueError(f"RecallConfig.reranker must be one of {', '.join(RERANKERS)}; got {self.reranker!r}")
        if self.reranker_model is not None and not (isinstance(self.reranker_model, str) and self.reranker_model):
            raise ValueError(f"RecallConfig.reranker_model must be a non-empty path string or None, got {self.reranker_model!r}")
        if not (isinstance(self.rerank_top_n, int) and not isinstance(self.rerank_top_n, bool) and self.rerank_top_n >= 1):
            raise ValueError(f"RecallConfig.rerank_top_n must be an int >= 1, got {self.rerank_top_n!r}")

    def replace(self, **changes: Any) -> RecallConfig:
        """A copy with ``changes`` applied (validated); unknown names are an error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown RecallConfig field(s): {', '.join(unknown)}")
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["kind_expiry_days"] = dict(self.kind_expiry_days)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallConfig:
        """``data`` over the defaults; a ``"profile"`` key applies that profile's settings
        (:func:`memofs.ranking.profiles.profile_settings`) before the other keys."""
        d = dict(data)
        name = d.get("profile", "reference")
        if name not in PROFILE_NAMES:
            raise ValueError(f"RecallConfig.profile must be one of {', '.join(PROFILE_NAMES)}; got {name!r}")
        return cls().replace(**{**profile_settings(name), **d})

    def config_hash(self) -> str:
        """Short stable hash of every field (recorded in reports)."""
        d = self.to_dict()
        # the combination fields came later: at their defaults they stay out of the hash,
        # so every formula config keeps the hash it had before they existed
        if d["fusion"] == "formula" and d["learned_model"] is None:
            del d["fusion"], d["learned_model"]
        # so does entity_match at its default (the cached signals are keyed by signal_key()
        # and the extraction code's hash, so they are re-extracted all the same)
        if d["entity_match"] == "terms":
            del d["entity_match"]
        # and the fallback / profile fields at their defaults
        for name, default in (("learned_fallback", "rrf"), ("learned_ood_threshold", 0.25), ("profile", "reference"),
                              ("upstream_index_text", False), ("graph_doc_aliases", True), ("upstream_stop_words", False),
                              ("neutral_recency_confidence", False), ("reranker", "deterministic"),
                              ("reranker_model", None), ("rerank_top_n", 20), ("stem", False)):
            if d[name] == default:
                del d[name]
        if d.get("learned_model") is not None:
            # the model by what it is, not where this checkout keeps it: the same config has
            # the same hash in every clone (the path itself is machine-specific)
            d["learned_model"] = model_identity(d["learned_model"])
        if d.get("reranker_model") is not None:  # a directory: by its name, the same in every clone
            d["reranker_model"] = Path(d["reranker_model"]).name
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    def signal_key(self) -> tuple:
        """The fields that change extracted signals (see :data:`SIGNAL_FIELDS`); the upstream
        parity switches only when set, so every earlier key (and signal cache) stays as it was."""
        return tuple(getattr(self, f) for f in SIGNAL_FIELDS
                     if f not in _PARITY_SIGNAL_DEFAULTS or getattr(self, f) != _PARITY_SIGNAL_DEFAULTS[f])
