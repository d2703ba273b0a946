"""``make eval --quiet`` is quiet (issue 37): the static embedder's distillation prints no
transformers "Loading weights" bar, no model2vec "Encoding tokens" bar and no model2vec
warning. model2vec's own distill is replaced by a stand-in that makes exactly those three
outputs through the objects the real one uses (a minutes-long build is not a unit test)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memofs.signals.embedders import static


class _Model:
    embedding = np.ones((4, 2), dtype=np.float32)


def _noisy_distill(**_: object) -> _Model:
    # imported here, not at collection: model2vec.distill pulls in torch and transformers
    # (seconds), which every pytest-xdist worker would pay for this one test
    from model2vec.distill import inference
    from transformers.utils import logging as hf_logging

    bar = inference.tqdm(total=3, desc="Encoding tokens", unit=" tokens")
    bar.update(3)
    bar.close()
    hf_logging.tqdm(range(2), desc="Loading weights").__iter__().__next__()
    logging.getLogger("model2vec.distill.distillation").warning("Couldn't get the model info from the Hugging Face Hub")
    return _Model()


def test_distillation_prints_nothing(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
                                     caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("model2vec.distill")
    import model2vec.distill
    from model2vec.distill import inference

    monkeypatch.setattr(model2vec.distill, "distill", _noisy_distill)
    caplog.set_level(logging.WARNING)
    _noisy_distill()  # the stand-in is noisy on its own
    noisy = capfd.readouterr().err
    assert "Encoding tokens" in noisy and "Loading weights" in noisy and "model info" in caplog.text
    caplog.clear()
    bar = inference.tqdm
    static.distill_deterministic("unused", 2, 1e-4)
    out = capfd.readouterr()
    assert out.out == "" and out.err == "" and caplog.records == []
    assert inference.tqdm is bar  # restored
    _noisy_distill()  # and the bars are back afterwards
    assert "Encoding tokens" in capfd.readouterr().err
