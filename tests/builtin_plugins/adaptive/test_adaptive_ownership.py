"""Property: over random sequences of updates, epoch and fold boundaries and monitor calls, every ISV slot is
written only by its declared owner."""

from __future__ import annotations

import numpy as np
from adaptive_harness import BACKENDS, build_run, changed_slots, isv_array, random_signals
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.plugin import core_declarations
from foxhunt.monitoring.epoch_diagnostics import epoch_diagnostics
from foxhunt.plugin.records import KernelPoint
from foxhunt.state import ResetCategory

RUNS = {backend: build_run(device=device) for backend, device in BACKENDS}
OPS = st.sampled_from(["step", "epoch", "fold", "monitors"])


def _trainer_epoch(run, epoch: int, total: int) -> None:
    """What the trainer writes at an epoch boundary: its own slot only."""
    run.isv.write(core_declarations.PROGRESS, min(1.0, epoch / total))


@settings(max_examples=15, deadline=None)
@given(
    backend_index=st.integers(0, len(BACKENDS) - 1),
    ops=st.lists(OPS, min_size=1, max_size=12),
    seed=st.integers(0, 2**32 - 1),
    total=st.integers(1, 6),
)
def test_no_slot_is_written_by_anyone_but_its_owner(backend_index, ops, seed, total):
    backend, device = BACKENDS[backend_index]
    run = RUNS[backend]
    run.isv.reset_all()
    layout = run.layout
    owners = {slot.name: slot.owner for slot in layout.slots}
    categories = {entry.name: entry.category for entry in run.registry.entries()}
    resettable = {name for name, c in categories.items() if c in (ResetCategory.FOLD_RESET, ResetCategory.SOFT_RESET)}
    rng = np.random.default_rng(seed)
    for kernel in run.points(KernelPoint.CONSTRUCT):
        before = isv_array(run)
        kernel.run(run.context(backend, device, random_signals(rng, device)))
        assert changed_slots(layout, before, isv_array(run)) <= set(kernel.writes)
    epoch = 0
    for op in ops:
        before = isv_array(run)
        if op == "step":
            context = run.context(backend, device, random_signals(rng, device))
            for kernel in run.points(KernelPoint.STEP):
                start = isv_array(run)
                kernel.run(context)
                changed = changed_slots(layout, start, isv_array(run))
                assert changed <= set(kernel.writes), (kernel.name, changed - set(kernel.writes))
                assert {owners[name] for name in changed} <= {kernel.name.split(".")[0]}
        elif op == "epoch":
            epoch += 1
            _trainer_epoch(run, epoch, total)
            changed = changed_slots(layout, before, isv_array(run))
            assert {owners[name] for name in changed} <= {core_declarations.CORE_PLUGIN_NAME}
        elif op == "fold":
            epoch = 0
            run.registry.fold_boundary()
            assert changed_slots(layout, before, isv_array(run)) <= resettable
        else:
            epoch_diagnostics(run.monitors, run.isv, fold=0, epoch=epoch, signals=random_signals(rng, device))
            after = isv_array(run)
            assert np.array_equal(before.view(np.uint32), after.view(np.uint32))
    assert np.all(np.isfinite(isv_array(run)[: layout.offset("isv.fingerprint")]))
