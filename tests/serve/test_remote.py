"""A remote env is the env: the contract checks pass, and rewards equal the same episode in-process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import llmgym
from llmgym import error, remote
from llmgym.checks import check_env
from llmgym.serve import ServeConfig, Server

from .conftest import DECLARATIVE_ID


def _episode(env: gym.Env, seed: int, policy: str) -> list[tuple]:
    """(observation, reward, terminated, truncated, task id) of each step of one episode."""
    base = env.unwrapped
    obs, info = env.reset(seed=seed)
    out = [(obs, info["task_id"])]
    for _ in range(20):
        action = base.oracle_action() if policy == "oracle" else "I am not sure."
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, float(reward), terminated, truncated, info["is_success"]))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id", ["llm/Math-v0", "llm/ToolCalling-v0", DECLARATIVE_ID])
def test_remote_episodes_equal_in_process(server: Server, env_id: str) -> None:
    env = remote.make(server.url, env_id)
    local = gym.make(env_id)
    try:
        for seed in (0, 1, 7):
            for policy in ("oracle", "wrong"):
                assert _episode(env, seed, policy) == _episode(local, seed, policy), (seed, policy)
    finally:
        env.close()
        local.close()


@pytest.mark.parametrize("env_id", ["llm/Math-v0", DECLARATIVE_ID])
def test_remote_env_passes_both_checkers(server: Server, env_id: str) -> None:
    env = remote.make(server.url, env_id)
    try:
        gym_check_env(env, skip_render_check=True, skip_close_check=True)
        check_env(env, seeds=(0, 1), skip_gymnasium=True)
    finally:
        env.close()


def test_snapshots_and_message_actions_round_trip(server: Server) -> None:
    env = remote.make(server.url, "llm/ToolCalling-v0")
    try:
        env.reset(seed=3)
        state = env.get_state()
        first = env.step({"content": "checking", "tool_calls": []})
        env.set_state(state)
        second = env.step({"content": "checking", "tool_calls": []})
        assert first[:4] == second[:4]
        assert env.episode is not None and env.episode.turn == 1
    finally:
        env.close()


def test_errors_come_back_as_the_envs_own(server: Server) -> None:
    env = remote.make(server.url, "llm/Math-v0")
    try:
        with pytest.raises(error.ResetNeeded):
            env.step("42")
        env.reset(seed=0)
        with pytest.raises(gym.error.InvalidAction):
            env.step(None)
        with pytest.raises(error.InvalidState):
            env.set_state({"format": 99})
    finally:
        env.close()
    with pytest.raises(error.UnknownEnv, match="did you mean 'llm/Math-v0'"):
        remote.make(server.url, "llm/Maths-v0")


def test_a_step_after_the_server_closed_an_idle_connection_is_sent_on_a_new_one() -> None:
    """uvicorn closes a kept-alive connection idle past its keep-alive; a step sent on it would
    fail (and a step is never sent twice), so the client must see the close and reconnect."""
    srv = Server(ServeConfig(env_ids=["llm/Math-v0"]), timeout_keep_alive=1).start()
    try:
        env = remote.make(srv.url, "llm/Math-v0")
        env.reset(seed=0)
        time.sleep(1.5)  # past the server's keep-alive, within the client's idle limit
        action = env.oracle_action()
        time.sleep(1.5)
        assert env.step(action)[1] == 1.0
        env.close()
    finally:
        srv.stop()


REGISTRY = llmgym.list_envs()


@pytest.fixture(scope="module")
def registry_server() -> Iterator[Server]:
    srv = Server(ServeConfig(env_ids=REGISTRY, max_sessions=64)).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", REGISTRY)
def test_every_registered_env_served_passes_the_contract(
    registry_server: Server, env_id: str
) -> None:
    """The registry-wide contract (tests/test_contract.py) run unchanged against served envs:
    Gymnasium's checker, llmgym's checker, and the oracle's and a wrong answer's episodes equal
    the same episodes in-process."""
    env = remote.make(registry_server.url, env_id)
    local = gym.make(env_id)
    try:
        gym_check_env(env, skip_render_check=True, skip_close_check=True)
        check_env(env, seeds=(0, 1, 2), skip_gymnasium=True)
        for seed in (0, 5):
            for policy in ("oracle", "wrong"):
                assert _episode(env, seed, policy) == _episode(local, seed, policy), (seed, policy)
    finally:
        env.close()
        local.close()


def test_the_mirrored_episode_is_the_servers_in_sequential_subtask_mode(server: Server) -> None:
    """The client's ``episode`` is read from a snapshot by the core's own reader, so it carries
    the subtask order too (it used to come back with none)."""
    env = remote.make(server.url, "llm/Math-v0", subtask_mode="sequential")
    local = gym.make("llm/Math-v0", subtask_mode="sequential")
    try:
        for seed in range(40):
            env.reset(seed=seed)
            local.reset(seed=seed)
            mine, theirs = env.unwrapped.episode, local.unwrapped.episode
            assert (mine.task.id, mine.subtasks, mine.mode) == (
                theirs.task.id,
                theirs.subtasks,
                theirs.mode,
            )
            if len(theirs.subtasks) > 1:
                break
        else:
            pytest.fail("no task with several subtasks in 40 seeds")
    finally:
        env.close()
        local.close()
