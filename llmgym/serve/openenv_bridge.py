"""OpenEnv's own server (``openenv-core``) around llmgym envs, so OpenEnv's client connects unchanged.

Each served env id gets OpenEnv's FastAPI app (``openenv.core.env_server.create_app``) mounted
at ``/openenv/<env id>``: its WebSocket ``/ws`` holds one session (one env) per connection, as
OpenEnv's ``EnvClient`` expects; its stateless HTTP ``/reset`` and ``/step`` are OpenEnv's own
(a fresh env per request). Actions are ``{"content": str, "tool_calls": [...] | null}``;
observations carry the text, ``terminated``/``truncated`` and the step's ``info``.

What OpenEnv's protocol has no room for (server-side sessions over plain HTTP, ownership by
token, get_state/set_state) is served by llmgym's own ``/v1/sessions`` routes beside it.
Importing this module imports openenv-core (seconds: it pulls in gradio and fastmcp).
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from llmgym.serve import wire


class LLMAction(Action):
    """The model's assistant message."""

    content: str = Field(default="", description="The assistant message's text")
    tool_calls: list[dict[str, Any]] | None = Field(
        default=None, description="OpenAI-style tool calls, if any"
    )


class LLMObservation(Observation):
    """The next user or tool turn, with the step's info."""

    text: str = Field(default="", description="The observation text")
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class LLMState(State):
    env_id: str = ""
    task_id: str | None = None


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(wire.dumps(info))
    assert isinstance(doc, dict)
    return doc


class OpenEnvAdapter(Environment[LLMAction, LLMObservation, LLMState]):
    """An llmgym env behind OpenEnv's ``Environment`` interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str):
        super().__init__()
        self.env_id = env_id
        self.env = gym.make(env_id, disable_env_checker=True)
        self._state = LLMState(env_id=env_id)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> LLMObservation:
        options = kwargs.get("options")
        obs, info = self.env.reset(
            seed=seed, options=options if isinstance(options, dict) else None
        )
        self._state = LLMState(
            env_id=self.env_id, episode_id=episode_id, step_count=0, task_id=info.get("task_id")
        )
        return LLMObservation(text=obs, info=_jsonable(info), reward=None, done=False)

    def step(
        self, action: LLMAction, timeout_s: float | None = None, **kwargs: Any
    ) -> LLMObservation:
        message: Any = action.content
        if action.tool_calls:
            message = {"content": action.content, "tool_calls": action.tool_calls}
        obs, reward, terminated, truncated, info = self.env.step(message)
        self._state.step_count += 1
        return LLMObservation(
            text=obs,
            info=_jsonable(info),
            reward=float(reward),
            done=bool(terminated or truncated),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )

    @property
    def state(self) -> LLMState:
        return self._state

    def close(self) -> None:
        self.env.close()


def openenv_app(env_id: str, *, max_sessions: int = 256) -> Any:
    """OpenEnv's FastAPI app serving one llmgym env id."""
    return create_app(
        lambda: OpenEnvAdapter(env_id),
        LLMAction,
        LLMObservation,
        env_name=env_id,
        max_concurrent_envs=max_sessions,
    )


def mount_openenv(app: Any, env_ids: list[str], *, max_sessions: int = 256) -> None:
    """Mount OpenEnv's app for each env id at ``/openenv/<env id>`` of ``app``."""
    for env_id in env_ids:
        app.mount(f"/openenv/{env_id}", openenv_app(env_id, max_sessions=max_sessions))
