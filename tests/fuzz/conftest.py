"""Hypothesis profiles of the fuzzing suite, and its helper modules on ``sys.path``.

``ci`` (the default, run by ``make test``): a few thousand cases in all, derandomized so that CI
is reproducible; it does not shrink. ``dev`` shrinks (to minimise a failure). ``long`` (``DPCUBE_FUZZ_PROFILE=long``): twelve times as many, random seeds; the
documented run of docs/reliability.md section 7. Each test scales its ``ci`` budget by
``scale()`` (1 under ``ci``, 12 under ``long``, or ``DPCUBE_FUZZ_SCALE``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

sys.path.insert(0, str(Path(__file__).parent))

_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    "print_blob": True,
}
# ``ci`` does not shrink (a failure there is re-run under ``dev`` to minimise it): an xfail
# property that stops at its first counterexample costs a second, not a minute.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    **_COMMON,
)
settings.register_profile("long", derandomize=False, **_COMMON)
settings.register_profile("dev", derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("DPCUBE_FUZZ_PROFILE", "ci"))
