"""The package as a user installs it: an sdist and a wheel built from it (``python -m build``, so a
file the sdist lacks is missing from the wheel too), their metadata checked (``twine check``), and
the wheel installed into a new virtual environment, not editable, then run from a folder outside
the clone: ``--version``, ``--help``, the shipped configs by name, two training steps of the main
job's config and a translation with what they trained.

The new environment takes its dependencies (torch and the rest) from this one's site-packages
through a ``.pth`` line, so the test needs no second download of them; attnkit itself, and its
entry points, come from the wheel alone (this environment's editable install is not read there)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attnkit"

pytestmark = pytest.mark.slow


def run(*argv, cwd: Path, env: dict | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{argv}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel), the wheel built from the sdist."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=out)
    (sdist,), (wheel,) = out.glob("attnkit-*.tar.gz"), out.glob("attnkit-*.whl")
    return sdist, wheel


def test_the_metadata_passes_twine_check(built):
    done = run(sys.executable, "-m", "twine", "check", "--strict", *built, cwd=built[0].parent)
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_configs_the_page_the_panels_and_the_type_hints(built):
    names = set(zipfile.ZipFile(built[1]).namelist())
    wanted = ["attnkit/py.typed"]
    for folder in ("configs", "page/static", "tasks/translation/static", "tasks/captioning/static"):
        wanted += [f"attnkit/{p.relative_to(PACKAGE).as_posix()}" for p in (PACKAGE / folder).iterdir()]
    assert not [name for name in wanted if name not in names]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(built[1]).read(metadata).decode()
    assert "License-Expression: MIT" in text and "Classifier: Programming Language :: Python :: 3.13" in text


def test_the_installed_wheel_trains_and_translates_from_outside_the_clone(built, tmp_path, shared_data):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python, attnkit = venv / "bin" / "python", venv / "bin" / "attnkit"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["OMP_NUM_THREADS"] = "1"
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(run(python, "-c", purelib, cwd=tmp_path, env=env).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # --ignore-installed: this environment's editable attnkit, seen through the .pth line, is not it
    pip = [python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q"]
    run(*pip, built[1], cwd=tmp_path, env=env)
    where = run(python, "-c", "import attnkit; print(attnkit.__file__)", cwd=tmp_path, env=env).stdout
    assert where.startswith(str(site)), where  # the wheel's copy, not the clone's
    assert run(attnkit, "--version", cwd=tmp_path, env=env).stdout.startswith("attnkit 0.1.0: Python")
    assert "translate" in run(attnkit, "--help", cwd=tmp_path, env=env).stdout
    assert "multi30k_de_en_tiny" in run(attnkit, "configs", cwd=tmp_path, env=env).stdout
    train = [attnkit, "train", "--config", "multi30k_de_en_tiny", "--data-dir", shared_data]
    run(
        *train,
        "--output-dir",
        "run",
        "train.max_steps=2",
        "valid.every=2",
        "valid.max_sentences=8",
        cwd=tmp_path,
        env=env,
    )
    ckpt = tmp_path / "run" / "checkpoint_best.pt"
    out = run(
        attnkit, "translate", "--checkpoint", ckpt, "--beam", "1", cwd=tmp_path, env=env, stdin="Ein Hund.\n"
    )
    assert len(out.stdout.splitlines()) == 1
