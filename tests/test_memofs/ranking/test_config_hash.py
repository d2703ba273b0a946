"""``RecallConfig.config_hash`` names a learned model by its file name and bytes, so a config
has one hash in every checkout (reports record it beside each row)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from memofs.ranking.config import RecallConfig


def test_a_learned_model_is_hashed_by_name_and_content_not_by_where_the_checkout_is(tmp_path: Path) -> None:
    robust = RecallConfig.from_dict({"profile": "robust"})
    shipped = Path(robust.learned_model)
    elsewhere = tmp_path / "another-clone" / shipped.name
    elsewhere.parent.mkdir()
    shutil.copy(shipped, elsewhere)
    moved = robust.replace(learned_model=str(elsewhere))
    assert moved.config_hash() == robust.config_hash()

    # the hash is the published definition: sha256 of the sorted-key JSON of the fields,
    # with the model given as "<file name>:<sha256 of its bytes>"
    d = robust.to_dict()
    d["learned_model"] = f"{shipped.name}:{hashlib.sha256(shipped.read_bytes()).hexdigest()}"
    for name, default in (("learned_fallback", "rrf"), ("learned_ood_threshold", 0.25), ("entity_match", "terms"),
                          ("upstream_index_text", False), ("graph_doc_aliases", True), ("upstream_stop_words", False),
                          ("neutral_recency_confidence", False), ("reranker", "deterministic"),
                          ("reranker_model", None), ("rerank_top_n", 20), ("stem", False)):
        if d[name] == default:
            del d[name]
    assert robust.config_hash() == hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    model = json.loads(elsewhere.read_text())
    elsewhere.write_text(json.dumps(model, indent=1))  # same model, other bytes: another file
    assert moved.config_hash() != robust.config_hash()
    renamed = elsewhere.with_name("other.json")
    shutil.copy(shipped, renamed)
    assert robust.replace(learned_model=str(renamed)).config_hash() != robust.config_hash()
    missing = robust.replace(learned_model=str(tmp_path / "gone.json"))
    assert missing.config_hash() != robust.config_hash()  # no error: a hash, not a load
