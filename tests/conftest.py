"""Test-wide setup: CUDA simulator when there is no GPU, hypothesis profiles (ci, dev, nightly).

``NUMBA_ENABLE_CUDASIM`` must be set before numba is first imported, so it is
set here, at the top of the root conftest, before any test module imports it.
"""

from __future__ import annotations

import os
import shutil

if not os.environ.get("NUMBA_ENABLE_CUDASIM") and shutil.which("nvidia-smi") is None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

from hypothesis import HealthCheck, settings  # noqa: E402 - after the simulator switch on purpose

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=100, deadline=None)
# HYPOTHESIS_PROFILE=nightly: the fuzzing suite (tests/fuzz) at length, new inputs every run (docs/reliability.md).
settings.register_profile(
    "nightly", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
