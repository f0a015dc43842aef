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
        r2_gpt=False,
        r2_steps=300,
        r2_batch=256,
        r2_eval=1000,
        r2_gpt_layers=4,
        r2_gpt_embd=128,
        td=False,
        td_layers=4,
        td_embd=128,
        td_steps=0,
        td_batch=128,
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
        r2_gpt=True,
        r2_steps=5000,
        r2_batch=128,
        r2_eval=4000,
        r2_gpt_layers=4,
        r2_gpt_embd=128,
        td=True,
        td_layers=4,
        td_embd=128,
        td_steps=5000,
        td_batch=128,
    ),
}
