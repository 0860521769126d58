"""``python -m llmgym``: the ``llmgym`` command (see :mod:`llmgym.cli`)."""

from __future__ import annotations

import sys

from llmgym.cli import main

if __name__ == "__main__":
    sys.exit(main())
