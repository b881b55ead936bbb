"""StepGraphs off CUDA: every call runs eagerly, in order, and nothing is captured."""

from __future__ import annotations

from foxhunt.trainer.graphs import StepGraphs


def test_disabled_graphs_call_through_in_order() -> None:
    calls: list[str] = []
    graphs = StepGraphs(lambda: calls.append("collect"), lambda: calls.append("update"), enabled=False)
    for _ in range(5):
        graphs.collect()
        graphs.update()
        graphs.update()
    graphs.reset()
    graphs.collect()
    assert calls == ["collect", "update", "update"] * 5 + ["collect"]
    assert graphs.captures == {"collect": 0, "update": 0}
    assert graphs.replays == {"collect": 0, "update": 0}
