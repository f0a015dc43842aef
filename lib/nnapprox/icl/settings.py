"""The chapter's profiles: ``nnapprox.setup("icl", ..., quick=PROFILES["quick"], full=PROFILES["full"])``.

The trained transformers of part II are not here: their full-profile settings are
:data:`nnapprox.icl.pretrained.SETTINGS` (the committed checkpoints were trained with them).
The quick profile evaluates those checkpoints; the full profile retrains them (``retrain``).
"""

from __future__ import annotations

from typing import Any

PROFILES: dict[str, dict[str, Any]] = {
    "quick": dict(
        retrain=False,  # evaluate the committed checkpoints on fresh prompts
        lsa_steps=600,
        lsa_batch=1024,
        aky_depths=(1, 3),
        aky_steps=800,
        aky_batch=512,
        n_eval=4000,
        n_eval_encoder=20_000,
        r2_eval=4000,  # prompts for the ReLU-teacher R^2
    ),
    "full": dict(
        retrain=True,  # train every checkpointed model from scratch with the run's seed
        lsa_steps=2000,
        lsa_batch=2048,
        aky_depths=(1, 2, 3, 4),
        aky_steps=3000,
        aky_batch=1024,
        n_eval=20_000,
        n_eval_encoder=50_000,
        r2_eval=20_000,
    ),
}
