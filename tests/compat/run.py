"""`make test-compat`: the exported Hub folders under every transformers this project declares, and a clear refusal
below the floor.

1. This venv (the newest transformers the project resolves to) exports reference folders and outputs
   (`export_references.py`: every block type, causal and masked LM heads).
2. For the floor (the `transformers>=` bound in pyproject.toml, which must equal `MIN_TRANSFORMERS_VERSION` in the
   shipped configuration module) and the newest 5.x on the registry, a venv with only the local torch wheel and that
   transformers loads every folder in a fresh process (`check_folders.py`: logits, a packed row, cached generate).
3. For the versions below the floor (the last 4.x and the last 5.x release before the floor), every load must raise
   the one version ImportError before any weight is read.

Venvs are cached in build/compat/venv-<version> (created only when missing). Needs only the package registry.
Usage: python tests/compat/run.py [--newest 5.23.0] [--below 4.57.6 5.5.4]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = ROOT / "build" / "compat"
TORCH = "torch==2.13.0"  # the wheel CI installs everywhere (Makefile TORCH_SPEC)


def declared_floor() -> str:
    # the dependency line, not the test extra's `transformers[serving]`
    (spec,) = re.findall(r'"(transformers(?!\[)[^"]*)"', (ROOT / "pyproject.toml").read_text())
    floor = re.search(r">=\s*([\d.]+)", spec).group(1)
    return floor + ".0" * (2 - floor.count("."))  # "5.4" -> "5.4.0", as MIN_TRANSFORMERS_VERSION writes it


def registry_versions() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "transformers"], capture_output=True, text=True, check=True
    ).stdout
    return re.search(r"Available versions: (.*)", out).group(1).split(", ")


def release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def venv(version: str) -> Path:
    """build/compat/venv-<version> with the local torch wheel and transformers==<version> (built once)."""
    path = BUILD / f"venv-{version}"
    if not (path / ".complete").exists():
        print(f"creating {path.relative_to(ROOT)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", path], check=True)
        pip = [path / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, TORCH, f"transformers=={version}"], check=True)
        (path / ".complete").touch()
    return path / "bin" / "python"


def check(version: str, refs: Path, *flags: str) -> bool:
    python = venv(version)
    with tempfile.TemporaryDirectory() as tmp:  # fresh HF_HOME (remote-code cache) and cwd; -I: no user site, no cwd
        env = {"HF_HOME": tmp, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
        proc = subprocess.run([python, "-I", HERE / "check_folders.py", refs, *flags], cwd=tmp, env=env)
    return proc.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--newest", help="the newest 5.x to test (default: asked from the registry)")
    parser.add_argument("--below", nargs="*", help="versions below the floor (default: last 4.x, last 5.x before it)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from modeling_simplified.configuration_simplified import MIN_TRANSFORMERS_VERSION

    floor = declared_floor()
    if floor != MIN_TRANSFORMERS_VERSION:
        print(f"pyproject.toml declares transformers>={floor}, the shipped code {MIN_TRANSFORMERS_VERSION}")
        return 1
    if args.newest is None or args.below is None:
        final = [v for v in registry_versions() if re.fullmatch(r"[\d.]+", v)]
        newest = args.newest or max((v for v in final if v.startswith("5.")), key=release)
        below = args.below
        if below is None:
            older = [v for v in final if v.startswith("5.") and release(v) < release(floor)]
            below = [max((v for v in final if v.startswith("4.")), key=release)] + [max(older, key=release)] * bool(
                older
            )
    else:
        newest, below = args.newest, args.below
    start = time.monotonic()
    refs = BUILD / "refs"
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HF_HOME": home, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        subprocess.run([sys.executable, HERE / "export_references.py", refs], check=True, env=env)
    jobs = {f"{v} (supported)": (v,) for v in dict.fromkeys([floor, newest])}
    jobs |= {f"{v} (below the floor)": (v, "--expect-refusal") for v in below}
    # two at a time (each venv's install and each check is one process of one thread): CI has 2 cores
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(check, version, refs, *flags) for name, (version, *flags) in jobs.items()}
        results = {name: future.result() for name, future in futures.items()}
    for name, ok in results.items():
        print(f"transformers {name}: {'ok' if ok else 'FAILED'}")
    print(f"test-compat: {time.monotonic() - start:.0f} s")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
