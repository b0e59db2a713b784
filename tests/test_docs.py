"""The generated API reference is up to date with the docstrings and the command's --help."""

import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_is_current():
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "docs" / "make_api.py"), "--check"],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
