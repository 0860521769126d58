"""Adapters that let other RL loops train on llmgym environments: TRL (:mod:`.trl`) and verl (:mod:`.verl`).

Each module imports its framework lazily, so ``import llmgym.integrations.verl`` needs no verl.
"""
