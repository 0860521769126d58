"""Many clients at once: no episode lost, duplicated or mixed up with another's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym

from llmgym import remote
from llmgym.serve import Server

from .conftest import DECLARATIVE_ID

EPISODES = 200
CLIENTS = 16
PLAN = [
    (("llm/Math-v0", DECLARATIVE_ID)[i % 2], 1000 + i, "oracle" if i % 3 else "wrong")
    for i in range(EPISODES)
]


def _play(env: gym.Env, env_id: str, seed: int, policy: str) -> tuple:
    obs, info = env.reset(seed=seed)
    action = env.unwrapped.oracle_action() if policy == "oracle" else f"wrong {seed}"
    _, reward, terminated, truncated, step_info = env.step(action)
    return (env_id, seed, info["task_id"], obs, float(reward), terminated, step_info["is_success"])


def test_200_episodes_from_16_clients_match_in_process(server: Server) -> None:
    local = {env_id: gym.make(env_id) for env_id in {p[0] for p in PLAN}}
    expected = sorted(_play(local[e], e, s, p) for e, s, p in PLAN)
    for env in local.values():
        env.close()

    def client(k: int) -> list[tuple]:
        envs = {env_id: remote.make(server.url, env_id) for env_id in local}
        try:
            return [_play(envs[e], e, s, p) for e, s, p in PLAN[k::CLIENTS]]
        finally:
            for env in envs.values():
                env.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        results = [r for batch in pool.map(client, range(CLIENTS)) for r in batch]
    assert len(results) == EPISODES
    assert len({(r[0], r[1]) for r in results}) == EPISODES
    assert sorted(results) == expected
    assert len(server.app.pool) == 0  # every client closed its sessions
