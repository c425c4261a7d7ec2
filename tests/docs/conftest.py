"""The doc-example helpers (doc_blocks.py) on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
