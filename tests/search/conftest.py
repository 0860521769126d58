"""The search tests import their envs and policies from search_envs.py beside them, and check the
report with the headless-chromium fixture of the evaluation report tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))

from test_eval_report import browser  # noqa: E402, F401 - the fixture, shared
