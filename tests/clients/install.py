"""Published clients (the Node SDK, LangChain, pymilvus 3) installed once, outside the
project's venv.

Each client is pinned by manifest files in ``tests/clients/<name>``; its install lives in
``.vectide/<name>/<hash of the manifests>``, so a changed pin installs afresh and an unchanged
one is reused. The install runs in a staging folder renamed into place when complete: an
interrupted or concurrent run never leaves a half-made install behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.infra import REPO


def installed_once(name: str, manifests: Iterable[Path], build: Callable[[Path], None]) -> Path:
    """The folder holding the client, after ``build(folder)`` filled it the first time."""
    manifests = list(manifests)
    key = hashlib.sha256(b"\0".join(p.read_bytes() for p in manifests)).hexdigest()[:16]
    target = REPO / ".vectide" / name / key
    done = target / ".installed"
    if done.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)  # an install from before the marker existed
    staging = target.with_name(f"{key}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    build(staging)
    (staging / ".installed").touch()
    try:
        staging.rename(target)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return target


def venv_python(name: str) -> Path:
    """The interpreter of a virtualenv holding ``tests/clients/<name>/requirements.txt``
    (Python clients pinned apart from the project's own pymilvus), built once."""
    requirements = REPO / "tests" / "clients" / name / "requirements.txt"

    def venv(folder: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-r", str(requirements)], check=True, timeout=600)

    return installed_once(name, [requirements], venv) / "bin" / "python"


def run_flow(name: str, *args: str) -> dict:
    """Run ``tests/clients/<name>/flow.py ARGS`` in its virtualenv: the JSON object it
    printed last (what it observed)."""
    flow = REPO / "tests" / "clients" / name / "flow.py"
    done = subprocess.run(
        [str(venv_python(name)), str(flow), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
