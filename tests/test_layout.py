"""The package layout comes from pyproject's package-dir alone: the root folders `conversion/`, `hub_cards/` and
`configuration/` import as `modeling_simplified.*` (installed or editable), and no other root folder does."""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: root folder -> the subpackage it installs as
MAPPED = {folder: f"modeling_simplified.{folder}" for folder in ("conversion", "hub_cards", "configuration")}


@pytest.mark.parametrize("folder", sorted(MAPPED))
def test_mapped_root_folders_import_as_subpackages(folder):
    spec = importlib.util.find_spec(MAPPED[folder])
    assert spec is not None and Path(spec.origin).resolve() == ROOT / folder / "__init__.py"


@pytest.mark.parametrize("folder", ["benchmarks", "tests", "docs"])
def test_other_root_folders_are_not_subpackages(folder):
    assert (ROOT / folder).is_dir()
    assert importlib.util.find_spec(f"modeling_simplified.{folder}") is None


def test_the_wheel_holds_the_mapped_folders(tmp_path):
    """A regular (non-editable) build: code, card template and recipe families under `modeling_simplified/`."""
    pytest.importorskip("setuptools")
    source = tmp_path / "source"  # a copy: setuptools builds in the source tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("modeling_simplified", *MAPPED):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path, source]
    subprocess.run(command, check=True, capture_output=True)
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in MAPPED.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".json"):
                inside = f"{package.replace('.', '/')}/{path.relative_to(ROOT / folder).as_posix()}"
                assert inside in names, inside
    assert not any(name.startswith(("benchmarks/", "tests/", "modeling_simplified/benchmarks/")) for name in names)
