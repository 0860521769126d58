"""Search over episodes: best-of-N, beam search and MCTS from any env state with any policy.

>>> import gymnasium as gym, llmgym
>>> from llmgym.search import best_of_n
>>> env = gym.make("llm/Math-v0", family="arith.add_small")
>>> _ = env.reset(seed=0)
>>> result = best_of_n(env, "oracle", n=2)
>>> result.success, result.stats["calls"]
(True, 2)
"""

from llmgym.search.methods import (
    METHODS,
    beam_search,
    best_of_n,
    mcts,
    parse_spec,
    search,
)
from llmgym.search.tree import Budget, Node, SearchError, SearchResult

__all__ = [
    "METHODS",
    "Budget",
    "Node",
    "SearchError",
    "SearchResult",
    "beam_search",
    "best_of_n",
    "mcts",
    "parse_spec",
    "search",
]
