"""The authors' side of the parity runs: a separate venv with the transformers 4.x their code needs, and their source
from a pinned commit with a minimal CPU patch.

Their code (`bobby-he/simplified_transformers`, MIT licence, `upstream/LICENSE`) is vendored verbatim in `upstream/`:
`simplified_transformers/model_utils.py`, `train_utils.py` and the hydra configs of commit `COMMIT` (sha256 of each
file in `UPSTREAM_SHA256`; `run_clm.py` is not vendored: `their_side.py` mirrors its model and TrainingArguments
construction, citing its lines). `prepare_source` copies them to `build/authors-parity/src/`, checks the hashes and
applies `CPU_PATCH` there; the vendored files stay as the authors wrote them.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "upstream"
REPOSITORY = "bobby-he/simplified_transformers"
COMMIT = "8d4ea7965f61c61259123a37ff06cdef636845c0"

#: The vendored files at `COMMIT`, with their sha256 (checked before the patch is applied).
UPSTREAM_SHA256 = {
    "LICENSE": "821050fc7d73a5dc4c35e828429a44e037f7a8eac004ad2f9dcad0d529ae3e64",
    "simplified_transformers/model_utils.py": "ef8a25054548207d09c03045d4202b2daf613c6b16a7ef07dbb1b1e9a76335f8",
    "simplified_transformers/train_utils.py": "c8c7f4d9ba469544eee7f5fd9d1b67c6310836fabe103b32ffac8bd190419a77",
    "simplified_transformers/config/config.yaml": "a2d6fc3f1541eba5e812a0ddc8e9fe037958b562d3d9f81c8490099209a50cd3",
    "simplified_transformers/config/train/train.yaml": "e287c1a374d5fe3ac094062e3f7761e34e352f9aedc7361334a277858c93bbab",
    "simplified_transformers/config/model/default.yaml": (
        "73503095696d54f324b65b8bb095648916be4a69dd4f4af2dbf082888e8496b6"
    ),
    "simplified_transformers/config/model/default-parallel.yaml": (
        "ddf8050ce2552340008c5a429f41998127a819f05c377b49dcbc8f7d3cc3fb4e"
    ),
    "simplified_transformers/config/model/skipless.yaml": (
        "f4101bdf5eca3daccbc435e4d7b720d06b1cdbe690089ace3f8d459747720b8e"
    ),
    "simplified_transformers/config/model/skipless-parallel.yaml": (
        "a24f8bbf8348f940235e61ba4e9d9c8b0ac7e382c67d8075b55a40763fe794cf"
    ),
    "simplified_transformers/config/model/op.yaml": "cda938e2f27c31a59c02ab5e5903bf8416db6ce1d0313b1145c080322a83275d",
}

#: The CPU patch, line by line: (file, line as they wrote it, line as patched, why). Nothing else is changed.
#: Their `MyConv1D` keeps eq. 6's fixed `W_init` as a plain attribute (not a buffer), so `.to(device)` would not move
#: it and they put it on the GPU at construction; on a CPU-only host `.cuda()` raises. The matrix itself is unchanged.
CPU_PATCH = (
    (
        "simplified_transformers/model_utils.py",
        "                self.id = nn.init.orthogonal_(torch.empty(nx, nx)).cuda()",
        "                self.id = nn.init.orthogonal_(torch.empty(nx, nx))",
        "W_init (orth) stays on the CPU",
    ),
    (
        "simplified_transformers/model_utils.py",
        "                self.id = torch.eye(nx).cuda()",
        "                self.id = torch.eye(nx)",
        "W_init (identity) stays on the CPU",
    ),
    (
        "simplified_transformers/model_utils.py",
        "                ).cuda()",
        "                )",
        "W_init (normal) stays on the CPU",
    ),
)

#: The venv's pins: their `requirements.txt` gives transformers 4.30.2 and accelerate 0.20.3 (kept); torch 2.0.0 has no
#: wheel for this Python, so the local CPU torch (the project's) replaces it; hydra-core as theirs; numpy < 2 and a
#: setuptools that still ships `pkg_resources` (accelerate 0.20.3 imports it) and satisfies torch's floor. wandb,
#: datasets and evaluate are not installed: the harness logs nothing remotely and brings its own batches.
REQUIREMENTS = (
    "torch==2.13.0",
    "transformers==4.30.2",
    "accelerate==0.20.3",
    "tokenizers==0.13.3",
    "hydra-core==1.3.2",
    "numpy==1.26.4",
    "setuptools==80.9.0",
    "safetensors==0.8.0",
)


class SetupError(RuntimeError):
    """The authors' venv or source cannot be prepared (one line: what failed and how to fix it)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def patch_text(relpath: str, text: str) -> str:
    """`text` (their file `relpath`) with `CPU_PATCH` applied; each patched line must occur exactly once."""
    for file, old, new, _why in CPU_PATCH:
        if file != relpath:
            continue
        lines = text.split("\n")
        hits = [i for i, line in enumerate(lines) if line == old]
        if len(hits) != 1:
            raise SetupError(f"{relpath}: the patched line {old.strip()!r} occurs {len(hits)} times (expected 1).")
        lines[hits[0]] = new
        text = "\n".join(lines)
    return text


def prepare_source(build: Path) -> Path:
    """Copy the vendored files to `build/src`, check their hashes, apply the CPU patch; returns the source folder
    (the one to put on `sys.path`)."""
    src = build / "src"
    tmp = build / "src.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, digest in UPSTREAM_SHA256.items():
        origin = UPSTREAM / rel
        if not origin.is_file() or _sha256(origin) != digest:
            raise SetupError(f"{origin}: missing or not the file of {REPOSITORY}@{COMMIT[:10]} (sha256 differs).")
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(patch_text(rel, origin.read_text()))
    shutil.rmtree(src, ignore_errors=True)
    tmp.rename(src)
    return src


def venv_python(build: Path) -> Path:
    return build / "venv" / "bin" / "python"


def ensure_venv(build: Path) -> Path:
    """Create `build/venv` with `REQUIREMENTS` unless it holds them already (a marker file lists the pins)."""
    python = venv_python(build)
    marker = build / "venv" / ".installed"
    wanted = "\n".join(REQUIREMENTS)
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        return python
    shutil.rmtree(build / "venv", ignore_errors=True)
    build.mkdir(parents=True, exist_ok=True)
    steps = (
        [sys.executable, "-m", "venv", str(build / "venv")],
        [str(python), "-m", "pip", "install", "-q", *REQUIREMENTS],
    )
    for cmd in steps:
        print("authors' venv:", " ".join(cmd[-8:]), flush=True)
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            tail = [line for line in result.stderr.splitlines() if "WARNING: Location" not in line][-3:]
            raise SetupError(f"setting up the authors' venv failed ({' '.join(cmd[:3])}): {' | '.join(tail)}")
    marker.write_text(wanted)
    return python
