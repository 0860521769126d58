"""llmgym.ray: envs as Ray actors on a cluster's CPU nodes, for when one machine is not enough.

- :class:`EnvPool`: actors of one env, scaled between ``min_actors`` and ``max_actors`` by
  demand; ``acquire()`` hands out a :class:`RayEnv` (an ``LLMEnv`` proxy); ``run_episodes``
  plays many seeds; a dead actor's episode resumes from its last snapshot on a new actor.
- :func:`make_vec`: a Gymnasium vector env whose sub-envs step in parallel in actors.
- ``llmgym eval --ray ADDRESS`` plays an evaluation's episodes in a pool per env.
- :mod:`llmgym.ray.serving`: ``llmgym serve`` behind Ray Serve (needs the serve extra too).

Needs the ``ray`` extra (``pip install 'llmgym[ray]'``); Ray itself is imported only when a pool
starts. Ray places, starts and restarts processes; this package schedules nothing of its own.
"""

from __future__ import annotations

from llmgym.ray.actors import EpisodeResult
from llmgym.ray.cluster import LoopbackCluster, connect
from llmgym.ray.env import ActorDied, CallTimedOut, RayEnv
from llmgym.ray.pool import ActorInfo, EnvPool
from llmgym.ray.vector import RayVectorEnv, make_vec

__all__ = [
    "ActorDied",
    "ActorInfo",
    "CallTimedOut",
    "EnvPool",
    "EpisodeResult",
    "LoopbackCluster",
    "RayEnv",
    "RayVectorEnv",
    "connect",
    "make_vec",
]
