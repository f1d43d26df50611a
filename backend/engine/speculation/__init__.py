"""Speculative decoding for the optimized path, chosen by measurement.

Where speculation is decided, in the order a model meets the stages:

1. ``first_start`` — the optimized CPU engine's first start measures 0 to 4 drafts on itself
   (``DraftPlan``: how many a step proposes, set at every start);
2. ``step_decision`` — for a model whose steps are slow, that decision predicted from step costs;
3. ``when_idle`` — in the app, 1 and 2 run when the engine is idle, after answering without drafts
   (``Measure``: ``AT_START``, ``WHEN_IDLE`` or ``NEVER``, chosen by the engine's maker);
4. ``reply_check`` — the user's first replies confirm or correct a predicted choice;
5. ``backend.engine.probe.probe`` and ``backend.engine.probe.by_load`` — ``paths --measure``: one
   engine per candidate, then drafts by load; its choice replaces what 1-4 kept.

Each choice is kept per model and machine (``kept``, keyed by ``choice.choice_key``) and read at
every start by ``backend.engine.paths.speculative.optimized_speculation``.
"""
