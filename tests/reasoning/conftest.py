"""Fixtures of the reasoning-gym bridge tests: skipped without the ``reasoning`` extra; the
scoring workers a module started are killed when it ends, also on failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("reasoning_gym", reason="the reasoning extra is not installed")


@pytest.fixture(autouse=True, scope="module")
def _no_worker_left() -> Iterator[None]:
    yield
    from llmgym.envs.reasoning.bridge.worker import shutdown

    shutdown()
