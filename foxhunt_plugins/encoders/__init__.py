"""Built-in encoders, one plugin module each (none imports another).

The default, ``mlp`` (one bar, the observation as the trunk's input), is the core's
(``foxhunt.learner.encoders``); these are the alternatives ``[learner] encoder`` can name:

============= ==============================================================
encoder       what it does with the window of the last W bars
============= ==============================================================
``attention`` causal self-attention over the W feature rows, read at the last bar
``scan``      a selective state-space scan (Mamba2-style), read at the last bar
============= ==============================================================

None is on by default: none has been measured against ``mlp`` yet (docs/learner.md, "Encoders").
"""

__all__: list[str] = []
