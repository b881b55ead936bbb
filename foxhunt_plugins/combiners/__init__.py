"""Built-in gradient combiners, one plugin module each (none imports another).

The default, ``budgeted_sum``, is the core's (``foxhunt.learner.combiners``);
these are the alternatives ``[learner] combiner`` can name:

=============== ==========================================================
combiner        what it does to the isolated component gradients
=============== ==========================================================
``pcgrad``      projects each off the others it conflicts with (Yu et al. 2020)
``uncertainty`` weighs each by a learned precision exp(−s) (Kendall et al. 2018)
=============== ==========================================================

Both end in the budget clip, and every combiner's sum goes through the learner's
safety clip, so the combined norm never exceeds ``max_grad_norm``.
"""

__all__: list[str] = []
