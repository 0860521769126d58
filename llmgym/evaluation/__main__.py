"""``python -m llmgym.evaluation eval|compare|report|reverify|export-rollouts ...``."""

import sys

from llmgym.evaluation.cli import main

sys.exit(main())
