"""Learned fusion's model files: small versioned JSON (:data:`FORMAT`, :data:`VERSION`; never
pickle) holding a pairwise-logistic or LambdaMART model, its feature parameters and training
range; a defective file is a :class:`ModelFileError` naming file, line and field."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memofs.files import safe_json
from memofs.ranking.learned_features import FEATURES, FeatureParams

FORMAT = "memofs-learned-fusion"
VERSION = 1

# --------------------------------------------------------------------------- model


class ModelFileError(ValueError):
    """A defective model file: names the file, the line (JSON syntax errors) and the field."""

    def __init__(self, path: str | os.PathLike, field_name: str, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {field_name}: {message}")


@dataclass(frozen=True)
class TrainingRange:
    """The signal distribution a model was trained on: per feature (the model's order) the
    ``QUANTILES`` of its training candidates' values.

    A query's candidates are *out of distribution* when the mean over features of the share
    of candidate values outside ``[lo - w, hi + w]`` (``lo``, ``hi``: the 1st and 99th
    percentile, ``w = WIDEN * (hi - lo)``) exceeds the config's ``learned_ood_threshold``; a
    constant training feature counts a value as outside when it differs from that constant."""

    lo: NDArray[np.float64]
    hi: NDArray[np.float64]

    QUANTILES = (0.01, 0.99)
    WIDEN = 0.25

    @classmethod
    def of(cls, X: NDArray[np.float64]) -> TrainingRange:
        lo, hi = np.quantile(X, cls.QUANTILES, axis=0) if len(X) else (np.zeros(X.shape[1]), np.zeros(X.shape[1]))
        return cls(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64))

    def outside_share(self, X: NDArray[np.float64]) -> float:
        """Mean over features of the share of rows of ``X`` outside the widened range (0 for no rows)."""
        if len(X) == 0:
            return 0.0
        w = self.WIDEN * (self.hi - self.lo)
        eps = 1e-9 * np.maximum(1.0, np.abs(self.hi))
        out = (X < self.lo - w - eps) | (X > self.hi + w + eps)
        return float(out.mean())

    def to_json(self, names: tuple[str, ...]) -> dict[str, Any]:
        return {"quantiles": list(self.QUANTILES), "widen": self.WIDEN,
                "features": {f: [float(a), float(b)] for f, a, b in zip(names, self.lo, self.hi, strict=True)}}


@dataclass
class LearnedModel:
    """A linear pairwise model: ``s = coef . ((x - mean) / scale)`` over ``features``."""

    features: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]
    params: FeatureParams = field(default_factory=FeatureParams)
    kind: str = "pairwise-logistic"
    training: dict[str, Any] = field(default_factory=dict)
    cv: dict[str, Any] = field(default_factory=dict)
    range: TrainingRange | None = None  # the training distribution (v3 files; None: never out of distribution)

    def __post_init__(self) -> None:
        n = len(self.features)
        for name in ("mean", "scale", "coef"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n,):
                raise ValueError(f"LearnedModel.{name}: expected {n} values (one per feature), got shape {arr.shape}")
            if not np.isfinite(arr).all():
                raise ValueError(f"LearnedModel.{name}: values must be finite")
            setattr(self, name, arr)
        if (self.scale <= 0).any():
            raise ValueError("LearnedModel.scale: values must be > 0")

    def raw_scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``coef . ((X - mean) / scale)`` per row (ranking is invariant to the squash)."""
        return ((X - self.mean) / self.scale) @ self.coef

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.kind,
            "formula": "score = 1 / (1 + exp(-sum_j coef[j] * (x[j] - mean[j]) / scale[j]))",
            "feature_params": self.params.to_dict(),
            "features": [
                {"name": f, "mean": float(m), "scale": float(s), "coef": float(c)}
                for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef, strict=True)
            ],
            **_range_json(self.range, self.features),
            "training": self.training,
            "cv": self.cv,
        }

    def save(self, path: str | os.PathLike) -> Path:
        return _save(self.to_json(), path)

    def file_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class LambdaMartModel:
    """LightGBM ``lambdarank`` (LambdaMART) trees over ``features``, kept as LightGBM's text
    model format (``Booster.model_to_string``) inside the JSON file; the score is the
    booster's raw output ``s`` (a sum of tree leaves), squashed like the linear model's."""

    features: tuple[str, ...]
    booster_text: str
    params: FeatureParams = field(default_factory=FeatureParams)
    kind: str = "lambdamart"
    training: dict[str, Any] = field(default_factory=dict)
    cv: dict[str, Any] = field(default_factory=dict)
    range: TrainingRange | None = None

    def __post_init__(self) -> None:
        import lightgbm

        self._booster = lightgbm.Booster(model_str=self.booster_text)
        if self._booster.num_feature() != len(self.features):
            raise ValueError(f"LambdaMartModel: the booster has {self._booster.num_feature()} features, the file lists {len(self.features)}")

    def raw_scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        if len(X) == 0:
            return np.zeros(0)
        return np.asarray(self._booster.predict(X, raw_score=True, num_threads=1), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "model": self.kind,
                "formula": "score = 1 / (1 + exp(-s)), s = LightGBM lambdarank raw score (sum of leaf values)",
                "feature_params": self.params.to_dict(), "features": [{"name": f} for f in self.features],
                **_range_json(self.range, self.features), "lightgbm_model": self.booster_text,
                "training": self.training, "cv": self.cv}

    def save(self, path: str | os.PathLike) -> Path:
        return _save(self.to_json(), path)

    def file_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


Model = LearnedModel | LambdaMartModel
MODEL_KINDS = ("pairwise-logistic", "lambdamart")


def _range_json(rng: TrainingRange | None, names: tuple[str, ...]) -> dict[str, Any]:
    return {} if rng is None else {"training_range": rng.to_json(names)}


def _save(doc: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a model document as indented JSON (floats round-trip exactly)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    _CACHE.pop(str(p.resolve()), None)
    return p


def model_from_json(data: Any, path: str | os.PathLike = "<model>") -> Model:
    """Validate and build a model; errors name ``path`` and the offending field."""
    if not isinstance(data, dict):
        raise ModelFileError(path, "<root>", "expected a JSON object")
    if data.get("format") != FORMAT:
        raise ModelFileError(path, "format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise ModelFileError(path, "version", f"this memofs reads version {VERSION}, got {data.get('version')!r}")
    kind = data.get("model")
    if kind not in MODEL_KINDS:
        raise ModelFileError(path, "model", f"unknown model kind {kind!r} (expected one of {', '.join(map(repr, MODEL_KINDS))})")
    feats = data.get("features")
    if not isinstance(feats, list) or not feats:
        raise ModelFileError(path, "features", "expected a non-empty list")
    names, mean, scale, coef = [], [], [], []
    for i, f in enumerate(feats):
        if not isinstance(f, dict):
            raise ModelFileError(path, f"features[{i}]", "expected an object")
        name = f.get("name")
        if name not in FEATURES:
            raise ModelFileError(path, f"features[{i}].name", f"unknown feature {name!r}")
        if name in names:
            raise ModelFileError(path, f"features[{i}].name", f"duplicate feature {name!r}")
        names.append(name)
        if kind == "lambdamart":
            continue
        for key, out in (("mean", mean), ("scale", scale), ("coef", coef)):
            v = f.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ModelFileError(path, f"features[{i}].{key}", f"expected a finite number, got {v!r}")
            if key == "scale" and not v > 0:
                raise ModelFileError(path, f"features[{i}].scale", f"must be > 0, got {v!r}")
            out.append(float(v))
    fp = data.get("feature_params", {})
    if not isinstance(fp, dict):
        raise ModelFileError(path, "feature_params", "expected an object")
    try:
        params = FeatureParams(**{**FeatureParams().to_dict(), **fp})
    except TypeError as exc:
        raise ModelFileError(path, "feature_params", str(exc)) from None
    for key in ("fuzzy_boost", "saturation_c", "half_life_days", "default_confidence"):
        v = getattr(params, key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelFileError(path, f"feature_params.{key}", f"expected a finite number >= 0, got {v!r}")
    if not isinstance(params.kind_expiry_days, dict):
        raise ModelFileError(path, "feature_params.kind_expiry_days", "expected an object of kind -> days")
    try:
        params.config()  # the features run under it: a constant it rejects is the file's error
    except ValueError as exc:
        raise ModelFileError(path, "feature_params", str(exc)) from None
    rng = _range_from_json(data.get("training_range"), names, path)
    meta = {"training": dict(data.get("training") or {}), "cv": dict(data.get("cv") or {}), "range": rng}
    if kind == "lambdamart":
        text = data.get("lightgbm_model")
        if not isinstance(text, str) or not text.startswith("tree"):
            raise ModelFileError(path, "lightgbm_model", "expected LightGBM's text model format (Booster.model_to_string)")
        try:
            return LambdaMartModel(tuple(names), text, params, **meta)
        except (ValueError, Exception) as exc:  # lightgbm raises its own LightGBMError on a bad model string
            raise ModelFileError(path, "lightgbm_model", str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return LearnedModel(tuple(names), np.array(mean), np.array(scale), np.array(coef), params, **meta)


def _range_from_json(doc: Any, names: list[str], path: str | os.PathLike) -> TrainingRange | None:
    """``training_range`` of a model file (absent in v2 files: None)."""
    if doc is None:
        return None
    per = doc.get("features") if isinstance(doc, dict) else None
    if not isinstance(per, dict):
        raise ModelFileError(path, "training_range.features", "expected an object of feature -> [lo, hi]")
    lo, hi = [], []
    for f in names:
        v = per.get(f)
        if (not isinstance(v, list) or len(v) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v) or v[0] > v[1]):
            raise ModelFileError(path, f"training_range.features.{f}", f"expected [lo, hi] with lo <= hi, got {v!r}")
        lo.append(float(v[0]))
        hi.append(float(v[1]))
    return TrainingRange(np.array(lo), np.array(hi))


_CACHE: dict[str, tuple[float, int, Model]] = {}


def load_model(path: str | os.PathLike) -> Model:
    """Read a model file (memoised per path, reloaded when the file changes)."""
    p = Path(path)
    key = os.path.abspath(p)  # not resolve(): a symlink loop raises RuntimeError there
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelFileError(p, "learned_model", "file not found") from None
    except OSError as exc:  # a symlink loop, a permission
        raise ModelFileError(p, "learned_model", f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == st.st_mtime and hit[1] == st.st_size:
        return hit[2]
    try:  # the store's reader: a FIFO or directory is refused, never opened; depth and UTF-8 checked
        data = safe_json.load_file(p)
    except safe_json.JSONFileError as exc:
        raise ModelFileError(exc.where, "json", exc.reason) from None
    except OSError as exc:
        raise ModelFileError(p, "learned_model", f"cannot be read ({exc})") from None
    model = model_from_json(data, p)
    _CACHE[key] = (st.st_mtime, st.st_size, model)
    return model
