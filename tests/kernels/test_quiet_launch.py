"""numba's low-occupancy advice for the one-thread ISV kernels never reaches the user; other warnings do."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numba
import pytest
from numba.core.errors import NumbaPerformanceWarning

from foxhunt.kernels.dual import LOW_OCCUPANCY_WARNING, quiet_launch_configuration


class _WarningKernel:
    """Stands in for a numba CUDA dispatcher (absent under the simulator): configuring a launch warns."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __getitem__(self, configuration: tuple[int, int, object]) -> tuple[int, int, object]:
        blocks = configuration[0]
        warnings.warn(NumbaPerformanceWarning(self.message.format(blocks=blocks)), stacklevel=2)
        return configuration


def test_a_one_block_grid_configures_without_the_grid_size_warning() -> None:
    kernel = _WarningKernel("Grid size {blocks} will likely result in GPU under-utilization due to low occupancy.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert quiet_launch_configuration(kernel, 1, 256, "stream") == (1, 256, "stream")


def test_other_warnings_of_a_launch_still_reach_the_user() -> None:
    kernel = _WarningKernel("Host array used in CUDA kernel will incur copy overhead ({blocks} blocks).")
    with pytest.warns(NumbaPerformanceWarning, match="copy overhead"):
        quiet_launch_configuration(kernel, 1, 256, "stream")


def test_the_filter_matches_the_message_numba_writes() -> None:
    # numba builds the message from two literals; if it rewords them the filter would stop matching.
    source = (Path(numba.__file__).parent / "cuda" / "dispatcher.py").read_text()
    template = re.search(r'f"(Grid size \{grid_size\} will likely result in GPU )"\s*"(under-utilization[^"]*)"', source)
    assert template is not None, "numba's low-occupancy warning changed: update LOW_OCCUPANCY_WARNING"
    message = (template.group(1) + template.group(2)).replace("{grid_size}", "1")
    assert re.match(LOW_OCCUPANCY_WARNING, str(NumbaPerformanceWarning(message)))
