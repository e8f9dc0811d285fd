"""The second test environment (scripts/tests.d/10-python.sh, requirements-sdk.txt): the
libraries whose pins conflict with the first's. The helpers of the first are shared."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
