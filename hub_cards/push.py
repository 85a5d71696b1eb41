"""Push an export folder to the Hub: `simplified-push EXPORT_DIR REPO_ID [--private] [--revision R] [--commit-message M]`.

Uses `HfApi(endpoint=$HF_ENDPOINT, token=$HF_TOKEN)`: `create_repo` then `upload_folder`. The card's usage snippet
is then pinned to the uploaded commit (a second, README-only commit, unless `--no-pin`). Prints the commit URL and sha.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, constants
from safetensors import safe_open

from .card import pin_snippet
from .export import CODE_FILES


@dataclass
class PushResult:
    repo_id: str
    commit_url: str
    commit_sha: str
    card_commit_url: str | None = None
    card_commit_sha: str | None = None


def _check_export_dir(folder: Path) -> None:
    missing = [
        name for name in ("config.json", "model.safetensors", "README.md", *CODE_FILES) if not (folder / name).is_file()
    ]
    if missing:
        raise ValueError(
            f"{folder} is not an export folder (missing {', '.join(missing)}); create one with simplified-export first."
        )
    config_file = folder / "config.json"
    try:
        config = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{config_file} is not valid JSON: {err}.") from None
    if not isinstance(config, dict) or config.get("model_type") != "simplified":
        found = config.get("model_type") if isinstance(config, dict) else f"a JSON {type(config).__name__}"
        raise ValueError(f"{config_file}: expected a config object with model_type 'simplified', found {found!r}.")
    try:
        with safe_open(folder / "model.safetensors", framework="pt") as weights:
            if not list(weights.keys()):
                raise ValueError("it holds no tensors")
    except Exception as err:  # noqa: BLE001  (safetensors' errors have no common base with OSError)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{folder / 'model.safetensors'} is not a readable weights file: {first}.") from None


def make_api(endpoint: str | None = None, token: str | None = None):
    """`HfApi` on `endpoint` (default `$HF_ENDPOINT`, else the public Hub) with `token` (default `$HF_TOKEN`)."""
    return HfApi(
        endpoint=endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT,
        token=token or os.environ.get("HF_TOKEN") or None,
    )


def push_export(
    export_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    pin: bool = True,
    api=None,
) -> PushResult:
    """Create `repo_id` if needed and upload `export_dir` to `revision` (a branch, created if missing)."""
    folder = Path(export_dir)
    _check_export_dir(folder)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"REPO_ID must look like 'namespace/name', got {repo_id!r}.")
    api = api or make_api()
    api.create_repo(repo_id, private=private, exist_ok=True)
    if revision and revision != "main":
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    info = api.upload_folder(
        folder_path=folder,
        repo_id=repo_id,
        revision=revision,
        commit_message=commit_message or f"Upload {folder.name} with simplified-push",
    )
    result = PushResult(repo_id, info.commit_url, info.oid)
    if pin:
        card = (folder / "README.md").read_text()
        pinned = pin_snippet(card, repo_id, info.oid)
        if pinned != card:
            card_info = api.upload_file(
                path_or_fileobj=pinned.encode(),
                path_in_repo="README.md",
                repo_id=repo_id,
                revision=revision,
                commit_message=f"Pin the card's usage snippet to {info.oid}",
            )
            result.card_commit_url, result.card_commit_sha = card_info.commit_url, card_info.oid
    return result
