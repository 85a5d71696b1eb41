"""The console commands `simplified-export` and `simplified-push`: each reads its arguments first and imports the
export or push code (torch, transformers, the model) only then, so `--help` and a mistyped option answer at once."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simplified-export",
        description="Export a saved simplified model or Trainer checkpoint as a Hub-ready folder (weights, config "
        "with auto_map, flat custom code, tokenizer, model card).",
    )
    parser.add_argument("checkpoint_dir", help="folder written by save_pretrained or a Trainer checkpoint-N folder")
    parser.add_argument("output_dir", help="new or empty folder (or a previous export, which is replaced)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the checkpoint's own tokenizer files, if any)")
    parser.add_argument("--run-info", help="JSON file with run facts (dataset, steps, tokens_seen, eval_loss, ...)")
    parser.add_argument("--dataset", action="append", help="training dataset name (repeatable)")
    parser.add_argument("--loss-curve", help="PNG of the training loss, copied into the export")
    parser.add_argument("--license", help="license id for the card metadata (default apache-2.0)")
    parser.add_argument("--repo-id", help="repository id to show in the card's usage snippet")
    return parser


def export_main(argv: list[str] | None = None) -> int:
    """`simplified-export`; returns the exit status (2 with one line for bad input)."""
    parser = export_parser()
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from .card import weights_dtype
    from .export import ExportError, export_model, one_line

    try:
        run_info: dict[str, Any] = {}
        if args.run_info:
            try:
                run_info = json.loads(Path(args.run_info).read_text())
            except json.JSONDecodeError as err:
                raise ExportError(f"--run-info {args.run_info} is not valid JSON: {err}.") from None
            if not isinstance(run_info, dict):
                raise ExportError(f"--run-info {args.run_info} must hold a JSON object, got {type(run_info).__name__}.")
        for key, value in (
            ("datasets", args.dataset),
            ("loss_curve", args.loss_curve),
            ("license", args.license),
            ("repo_id", args.repo_id),
        ):
            if value:
                run_info[key] = value
        tokenizer = None
        if args.tokenizer:
            try:
                tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
            except Exception as err:  # noqa: BLE001
                raise ExportError(f"--tokenizer {args.tokenizer}: cannot load a tokenizer: {one_line(err)}") from None
        out = export_model(args.checkpoint_dir, args.output_dir, tokenizer=tokenizer, run_info=run_info)
    except (ValueError, OSError) as exc:  # ExportError, bad run_info, unreadable files
        parser.exit(2, f"simplified-export: error: {one_line(exc)}\n")
    print(f"exported to {out} (weights in {weights_dtype(json.loads((out / 'config.json').read_text()))})")
    for path in sorted(out.iterdir()):
        print(f"  {path.name}")
    return 0


def push_main(argv: list[str] | None = None) -> int:
    """`simplified-push`; returns the exit status (1 with one line when the push fails)."""
    parser = argparse.ArgumentParser(
        prog="simplified-push",
        description="Upload an export folder (from simplified-export) to the Hub. The endpoint comes from "
        "HF_ENDPOINT and the token from HF_TOKEN.",
    )
    parser.add_argument("export_dir")
    parser.add_argument("repo_id", help="namespace/name")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", help="branch to push to (created from main if missing; default main)")
    parser.add_argument("--commit-message", help="message of the upload commit")
    parser.add_argument(
        "--no-pin", action="store_true", help="do not rewrite the card's usage snippet to the uploaded commit sha"
    )
    args = parser.parse_args(argv)
    from .push import push_export

    try:  # huggingface_hub's HTTP client (httpx2 from huggingface-hub 2.0, httpx before): connection errors are not OSErrors
        import httpx2
    except ImportError:  # huggingface-hub 1.x, which transformers 5.4-5.17 require
        import httpx as httpx2

    try:
        result = push_export(
            args.export_dir,
            args.repo_id,
            private=args.private,
            revision=args.revision,
            commit_message=args.commit_message,
            pin=not args.no_pin,
        )
    except (ValueError, OSError, httpx2.HTTPError) as exc:  # HfHubHTTPError is an OSError
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        parser.exit(1, f"simplified-push: error: {message}\n")
    print(f"commit: {result.commit_url}")
    print(f"sha: {result.commit_sha}")
    if result.card_commit_sha:
        print(f"card pinned to {result.commit_sha} in commit {result.card_commit_sha}")
    print(
        f'load: AutoModel*.from_pretrained("{result.repo_id}", revision="{result.commit_sha}", trust_remote_code=True)'
    )
    return 0
