"""The built wheel: everything under the one import name ``vectide`` (nothing generic such
as ``services`` at the top of site-packages), the channel schemas inside it where the codec
looks, and the ``vectide`` command pointing into it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"]
    subprocess.run([*argv, "-w", str(out), str(ROOT)], check=True, capture_output=True)
    (built,) = out.glob("vectide-*.whl")
    return zipfile.ZipFile(built)


def test_one_import_name(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"vectide"}
    names = set(wheel.namelist())
    assert "vectide/services/cli.py" in names
    assert "vectide/streaming/__init__.py" in names
    assert "vectide/services/querynode/core.py" in names
    assert not any(n.startswith(("vectide/tests/", "vectide/benchmarks/")) for n in names)


def test_schemas_ship_where_the_codec_looks(wheel: zipfile.ZipFile) -> None:
    shipped = {Path(n).name for n in wheel.namelist() if n.startswith("vectide/schemas/")}
    assert shipped == {p.name for p in (ROOT / "schemas").glob("*.avsc")}
    # the codec reads <package root>/schemas, three folders above its own file
    codec = Path("vectide/services/common/msgstream/codec.py")
    assert (codec.parents[3] / "schemas").as_posix() == "vectide/schemas"


def test_the_command_points_into_the_package(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    assert "vectide = vectide.services.cli:main" in wheel.read(entry_points).decode()
