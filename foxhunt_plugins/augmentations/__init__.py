"""Built-in replay augmentations, one plugin module each (none imports another).

================ ========= ===================================================================
plugin           default   what it does to its share of each sampled batch
================ ========= ===================================================================
``mirror``       on, 0.25  the counterfactual mirror: observations mirrored, SHORT and LONG swapped
``hindsight``    off       the magnitude relabelled to the one best in hindsight, the return adjusted
================ ========= ===================================================================

Each is switched by ``[plugins.<name>] enabled`` and sized by ``[plugins.<name>] fraction``
(docs/learner.md, "Replay augmentations").
"""

__all__: list[str] = []
