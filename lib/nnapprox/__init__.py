"""nnapprox: the library behind *Neural network approximation: from functions to algorithms*.

One module per mathematical object; chapters import from the subpackage of their topic.
The runtime contract shared by every chapter lives at the top level:

>>> import nnapprox
>>> run = nnapprox.setup("intro", profile="quick", device="cpu", seed=0,
...                      quick={"L_max": 8}, full={"L_max": 30})
>>> run.L_max
8
"""

from .claims import Claim, ClaimError, Claims, compare
from .progress import explorer, progress, static_mode
from .runtime import DEVICES, PROFILES, Run, resolve_device, resolve_profile, setup

__version__ = "0.1.0"

__all__ = [
    "Claim",
    "ClaimError",
    "Claims",
    "DEVICES",
    "PROFILES",
    "Run",
    "compare",
    "explorer",
    "progress",
    "resolve_device",
    "resolve_profile",
    "setup",
    "static_mode",
]
