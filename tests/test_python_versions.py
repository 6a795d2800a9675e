"""The Python versions pyproject.toml claims, checked with what runs under each interpreter on the
machine: every module compiles under each, and the modules that need no third-party package import.
Only Python 3.11 has a local torch wheel here, so the rest of the suite runs under 3.11 alone: what
needs torch or numpy under 3.10, 3.12 and 3.13 stays uncovered (docs/howto/install.md says so)."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# attnkit's modules that import nothing beyond the standard library: each must import everywhere
STANDARD_LIBRARY_ONLY = [
    "attnkit",
    "attnkit.errors",
    "attnkit.bounds",
    "attnkit.denormals",
    "attnkit.files",
    "attnkit.folders",
    "attnkit.processes",
    "attnkit.config",
]
CHECK = f"""
import importlib, pathlib, sys
sys.path.insert(0, {str(ROOT / "src")!r})
for path in sorted(pathlib.Path({str(ROOT / "src" / "attnkit")!r}).rglob("*.py")):
    compile(path.read_text(encoding="utf-8"), str(path), "exec")
for name in {STANDARD_LIBRARY_ONLY!r}:
    importlib.import_module(name)
print("ok")
"""


def claimed_versions() -> list[str]:
    """The minor versions the classifiers name (3.10, ...), which requires-python admits."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    lowest = re.search(r'requires-python = ">=3\.(\d+)"', text)
    assert lowest, "requires-python must say its lowest version"
    versions = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text)
    assert versions and all(int(v.split(".")[1]) >= int(lowest.group(1)) for v in versions)
    return versions


def interpreter(version: str) -> str | None:
    """A working ``pythonX.Y`` on this machine (on PATH, or a pyenv version), or None."""
    found = [
        shutil.which(f"python{version}"),
        *glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"),
    ]
    for path in filter(None, found):
        if subprocess.run([path, "--version"], capture_output=True).returncode == 0:
            return path
    return None


@pytest.mark.parametrize("version", claimed_versions())
def test_every_module_compiles_and_the_standard_library_ones_import(version):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    done = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
