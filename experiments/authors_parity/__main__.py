"""`python -m experiments.authors_parity`: this project's training against the authors' own code
(`bobby-he/simplified_transformers`), in a miniature, on the CPU.

    python -m experiments.authors_parity [--steps 200] [--jobs 2] [--blocks pre_ln sas sas_p ...] [--no-study]

1. Sets up `build/authors-parity/venv` (transformers 4.30.2, their pins; `venv.REQUIREMENTS`) and their source
   (vendored at a pinned commit, CPU patch applied: `venv.py`), and the shared batches (`settings.build_batches`).
2. **Exact parity.** Per block, their model is built from seed 0 by their code and trained by their `MyTrainer`
   twice: with torch's AdamW (`optim="adamw_torch"`, the optimizer this project's Trainer uses) and with the AdamW
   their script gets (transformers' own, the 4.30 default). Its initial weights go through `simplified-convert
   original` and this project's Trainer trains them with their hyper-parameters. Same batches, same order.
3. **The study** (`study.py`): their blocks' lrs swept; this project's presets walked to the authors' configuration
   (`codeparrot-tiny-authors`) one difference at a time, every step swept; the leads over Pre-LN at each model's
   own best lr with two seeds; the initialisation parity (their code and ours in their configuration, each from its
   own initialisation, three seeds); the long probe.
4. Writes `docs/reproduction/authors-parity/results.json`; `python -m experiments.doc_figures` renders its tables.

Resumable: each run writes `build/authors-parity/runs/<run>/`; a run whose job is unchanged is not run again. Each
run is one process with one torch thread; `--jobs` runs that many at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from . import results as res
from . import study
from .our_side import init_stats, model_from_fields
from .runner import BUILD, REPO, Run, execute
from .settings import BLOCKS, THEIR_OPTIMIZER, TORCH_OPTIMIZER, Miniature, build_batches, their_job
from .venv import COMMIT, CPU_PATCH, REPOSITORY, REQUIREMENTS, SetupError, ensure_venv, prepare_source

RESULTS = REPO / "docs" / "reproduction" / "authors-parity" / "results.json"
HERE = Path(__file__).resolve().parent
#: the float64 exact-parity runs' length
FLOAT64_STEPS = 100


def plan(setting: Miniature, blocks: list[str], data: dict, python: Path, src: Path) -> list[Run]:
    """The exact-parity runs: per block, their seed-0 model trained with both AdamWs (its initial weights saved), ours
    from those weights converted; and both again in float64 for `FLOAT64_STEPS` steps."""
    base = {"setting": dataclasses.asdict(setting), "data": str(BUILD / "data.pt"), "threads": 1}
    their = their_job(setting, data, src)
    runs = []
    for block in blocks:
        name = f"theirs-{block}-s0"
        job = {
            **base,
            **their,
            "name": name,
            "overrides": setting.their_overrides(block),
            "seed": 0,
            "optims": [TORCH_OPTIMIZER, THEIR_OPTIMIZER],
            "save_init": True,
            "out": str(BUILD / "runs" / name),
        }
        runs.append(
            Run(
                name,
                job,
                (f"{TORCH_OPTIMIZER}.json", f"{THEIR_OPTIMIZER}.json"),
                [str(python), str(HERE / "their_side.py")],
            )
        )
    for block in blocks:
        name, source = f"ours-converted-{block}", f"theirs-{block}-s0"
        job = {
            **base,
            "kind": "converted",
            "block": block,
            "seed": 0,
            "their_init": str(BUILD / "runs" / source / "init"),
            "converted": str(BUILD / "runs" / name / "converted"),
            "out": str(BUILD / "runs" / name / "record.json"),
        }
        runs.append(
            Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"], (source,))
        )
    for block in blocks:  # exact parity below float32's rounding: both codes in float64, `FLOAT64_STEPS` steps
        name, source = f"theirs-{block}-s0-float64", f"theirs-{block}-s0"
        job = {
            **base,
            **their,
            "steps": FLOAT64_STEPS,
            "name": name,
            "overrides": setting.their_overrides(block),
            "seed": 0,
            "optims": [TORCH_OPTIMIZER],
            "save_init": False,
            "dtype": "float64",
            "out": str(BUILD / "runs" / name),
        }
        runs.append(Run(name, job, (f"{TORCH_OPTIMIZER}.json",), [str(python), str(HERE / "their_side.py")]))
        name = f"ours-converted-{block}-float64"
        job = {
            **base,
            "setting": dataclasses.asdict(dataclasses.replace(setting, steps=FLOAT64_STEPS)),
            "kind": "converted",
            "block": block,
            "seed": 0,
            "dtype": "float64",
            "their_init": str(BUILD / "runs" / source / "init"),
            "converted": str(BUILD / "runs" / name / "converted"),
            "out": str(BUILD / "runs" / name / "record.json"),
        }
        runs.append(
            Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"], (source,))
        )
    return runs


def collect(setting: Miniature, blocks: list[str], preset_init: dict[str, dict], authors_init: dict[str, dict]) -> dict:
    """results.json's exact parity, parameter groups and initial weights from the runs' records; `preset_init` and
    `authors_init`: per block, the initial statistics (seed 0) of this project's preset and of this project's model in
    the authors' configuration."""

    def load(path: str) -> dict:
        return json.loads((BUILD / "runs" / path).read_text())

    exact, groups, inits = {}, {}, {}
    for block in blocks:
        theirs_torch = load(f"theirs-{block}-s0/{TORCH_OPTIMIZER}.json")
        theirs_hf = load(f"theirs-{block}-s0/{THEIR_OPTIMIZER}.json")
        ours = load(f"ours-converted-{block}/record.json")
        exact[block] = {
            "ours_vs_theirs_torch_adamw": res.max_difference(ours["train_loss"], theirs_torch["train_loss"]),
            "ours_vs_theirs_hf_adamw": res.max_difference(ours["train_loss"], theirs_hf["train_loss"]),
            "their_adamw_hf_vs_torch": res.max_difference(theirs_hf["train_loss"], theirs_torch["train_loss"]),
            "eval_difference": abs(ours["eval_loss"] - theirs_torch["eval_loss"]),
            "lr_max_abs_difference": max(abs(a - b) for a, b in zip(ours["lr"], theirs_torch["lr"])),
            "warmup_steps": sum(1 for a, b in zip(theirs_torch["lr"], theirs_torch["lr"][1:]) if b > a) + 1,
            "final_lr": theirs_torch["lr"][-1],
            "curves": {
                "ours": ours["train_loss"],
                "theirs_torch_adamw": theirs_torch["train_loss"],
                "theirs_hf_adamw": theirs_hf["train_loss"],
            },
            "their_optimizer_class": theirs_hf["optimizer_class"],
            "float64": res.max_difference(
                load(f"ours-converted-{block}-float64/record.json")["train_loss"],
                load(f"theirs-{block}-s0-float64/{TORCH_OPTIMIZER}.json")["train_loss"],
            ),
        }
        their_params = {n: {k: v for k, v in i.items()} for n, i in theirs_torch["parameters"].items()}
        groups[block] = {
            "their_config": theirs_torch["config"],
            "their_parameters": their_params,
            "comparison": res.compare_groups(theirs_torch["config"], their_params, 0.1),
        }
        mapping, _ = res.parameter_map(theirs_torch["config"], their_params)
        inits[block] = {
            "converted_equals_theirs": all(
                abs(ours["init"][o]["std"] - their_params[t]["init"]["std"]) < 1e-6 for t, o in mapping.items()
            ),
            "theirs_vs_our_preset": res.compare_init(
                {n: i["init"] for n, i in their_params.items()}, preset_init[block], mapping
            ),
            "theirs_vs_ours_in_their_configuration": res.compare_init(
                {n: i["init"] for n, i in their_params.items()}, authors_init[block], mapping
            ),
            "only_ours": {n: s for n, s in preset_init[block].items() if n not in set(mapping.values())},
            # their parameters with no counterpart in the preset (unmapped, or mapped to a name the preset lacks)
            "only_theirs": sorted(n for n in their_params if mapping.get(n) not in preset_init[block]),
        }
    versions = load(f"theirs-{blocks[0]}-s0/{THEIR_OPTIMIZER}.json")["versions"]
    return {
        "authors": {"repository": REPOSITORY, "commit": COMMIT, "venv": list(REQUIREMENTS), "versions": versions},
        "cpu_patch": [{"file": f, "theirs": o.strip(), "patched": n.strip(), "why": w} for f, o, n, w in CPU_PATCH],
        "setting": dataclasses.asdict(setting),
        "tolerance": res.TOLERANCE,
        "exact": exact,
        "parameter_groups": groups,
        "init": inits,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.authors_parity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--blocks", nargs="+", default=list(BLOCKS), choices=BLOCKS, help="the exact-parity blocks")
    parser.add_argument("--steps", type=int, default=Miniature.steps, help="training steps of every run (>= 100)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each one process, one torch thread)")
    parser.add_argument("--no-study", action="store_true", help="exact parity only (no sweeps, walk or seeds)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.steps < 100:
        parser.error(f"--steps={args.steps}: exact parity needs at least 100 steps.")
    setting = Miniature(steps=args.steps)
    try:
        python = ensure_venv(BUILD)
        src = prepare_source(BUILD)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    # the batches for the longest run (the long probe); every run trains on their first `steps × batch`
    batches = dataclasses.replace(setting, steps=setting.steps * study.LONG_FACTOR)
    data_file, data_setting = BUILD / "data.pt", BUILD / "data.json"
    identity = json.dumps(dataclasses.asdict(batches), sort_keys=True)
    if data_file.is_file() and data_setting.is_file() and data_setting.read_text() == identity:
        data = torch.load(data_file, weights_only=True)
    else:
        data = build_batches(batches, data_file)
        data_setting.write_text(identity)
    failures = execute(plan(setting, args.blocks, data, python, src), args.jobs)
    if failures:
        print("\n".join(f"error: {f}" for f in failures), file=sys.stderr)
        return 1
    result = {}
    if not args.no_study:
        work = study.Plan(setting, data, python, src)
        sweeps: dict = {}
        for models in study.phases():  # each phase swept, then its seeds, before the next
            try:
                sweeps |= study.sweep(work, execute, args.jobs, models)
            except RuntimeError as error:
                print(f"error: {error}", file=sys.stderr)
                return 1
            chosen = {k: row["chosen"] for k, row in sweeps.items()}
            failures = execute([work.run(*run) for run in study.later(work, chosen, models)], args.jobs)
            if failures:
                print("\n".join(f"error: {f}" for f in failures), file=sys.stderr)
                return 1
        result["study"] = study.collect(work, sweeps)
    initial = {  # this project's initialisation, seed 0, of its preset and of the authors' configuration
        family: {b: init_stats(model_from_fields(study.preset_fields(family, b), 0, data)) for b in args.blocks}
        for family in (study.OUR_FAMILY, study.AUTHORS_FAMILY)
    }
    result = {**collect(setting, args.blocks, initial[study.OUR_FAMILY], initial[study.AUTHORS_FAMILY]), **result}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(res.exact_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
