"""The README's main job (`make demo`): train the tiny SAS-P preset on the embedded code corpus (the Python
standard library of this interpreter) with the training API, export it Hub-ready, reload the export with
`trust_remote_code=True` and print a code completion."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from modeling_simplified.training.api import train
from modeling_simplified.training.plan import TrainPlan
from modeling_simplified.training.presets import UsageError, add_set_option, apply_override, first_line, load_preset

PRESET = "codeparrot-tiny-sas_p"
PROMPT = "    def __init__(self, "
RELOAD = r"""
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

export, prompt, new_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(export, trust_remote_code=True)
inputs = tokenizer(prompt, return_tensors="pt")
with torch.no_grad():
    output = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False, repetition_penalty=1.3,
                            pad_token_id=tokenizer.pad_token_id, eos_token_id=None)
completion = tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
cls = type(model)
print(f"== reloaded {cls.__module__}.{cls.__name__} in a fresh process with trust_remote_code=True; "
      "greedy completion:")
print(prompt + completion)
"""


def output_dir_for(path: str | Path, overwrite: bool = False) -> tuple[Path, str | None]:
    """The folder this demo writes: `path` when it is new or empty (or with `overwrite`), else the first free
    `path-2`, `path-3`, ... A previous run is never replaced silently: the note (None if none) says where it went."""
    path = Path(path)
    if overwrite or not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return path, None
    n = 2
    while (candidate := path.with_name(f"{path.name}-{n}")).exists() and (
        not candidate.is_dir() or any(candidate.iterdir())
    ):
        n += 1
    return candidate, (
        f"{path} holds a previous run (kept): this run goes to {candidate}. "
        f"Pass --overwrite to replace {path} (make demo DEMO_ARGS=--overwrite)."
    )


def demo_plan(output_dir: Path, overwrite: bool, max_steps: int | None, overrides: list[str]) -> TrainPlan:
    """The tiny SAS-P preset, with the `--set` overrides and a length other than its 300 steps if asked."""
    preset = load_preset(PRESET, check=False)
    for assignment in overrides:
        apply_override(preset, assignment)
    if max_steps is not None:
        if max_steps < 1:
            raise UsageError(f"--max-steps must be >= 1, got {max_steps}.")
        preset.training.max_steps, preset.training.num_train_epochs = max_steps, None
    return TrainPlan(preset=preset, output_dir=output_dir, overwrite=overwrite)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__)
    parser.add_argument(
        "--output-dir",
        default="runs/demo",
        help="run directory; if it holds a previous run, the first free <dir>-2, <dir>-3, ... (unless --overwrite)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a previous run in --output-dir")
    parser.add_argument("--max-steps", type=int, help="shorter or longer than the preset's 300 steps")
    parser.add_argument("--prompt", default=PROMPT, help="the code to complete")
    parser.add_argument("--new-tokens", type=int, default=40)
    add_set_option(parser, "a preset override, as in simplified-train (e.g. data.max_train_samples=40)")
    args = parser.parse_args(argv)

    output_dir, note = output_dir_for(args.output_dir, args.overwrite)
    if note:
        print(f"== {note}", flush=True)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        result = train(demo_plan(output_dir, args.overwrite, args.max_steps or None, args.overrides))
    except UsageError as err:
        print(f"simplified-train: error: {first_line(err)}", file=sys.stderr)
        return 2
    print(f"simplified-train: done in {output_dir}: " + json.dumps(result.summary()))

    metrics = result.metrics
    print(
        f"\n== trained {metrics['preset']} ({metrics['parameters'] / 1e6:.2f}M parameters) for {metrics['steps']} "
        f"steps on {metrics['tokens_seen'] / 1e6:.2f}M tokens of {metrics['dataset']}"
    )
    print(
        f"   eval loss {metrics['eval_loss']:.3f} (perplexity {metrics['perplexity']:.1f}), "
        f"{metrics['tokens_per_second']:.0f} tokens/s, wall time {metrics['wall_time_s']:.0f} s"
    )
    print(f"   loss curve: {output_dir / 'loss_curve.png'}; Hub-ready export: {output_dir / 'export'}", flush=True)
    # A fresh interpreter that never imports this package, as a Hub user would load the export.
    reload = subprocess.run(
        [sys.executable, "-c", RELOAD, str(output_dir / "export"), args.prompt, str(args.new_tokens)],
        stdout=subprocess.PIPE,
        text=True,
    )
    print(reload.stdout, end="")
    return reload.returncode


if __name__ == "__main__":
    sys.exit(main())
