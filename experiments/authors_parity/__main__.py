"""`python -m experiments.authors_parity`: this project's training against the authors' own code
(`bobby-he/simplified_transformers`), in a miniature, on the CPU.

    python -m experiments.authors_parity [--steps 200] [--seeds 0 1] [--jobs 2] [--blocks pre_ln sas sas_p ...]

1. Sets up `build/authors-parity/venv` (transformers 4.30.2, their pins; `venv.REQUIREMENTS`) and their source
   (vendored at a pinned commit, CPU patch applied: `venv.py`), and the shared batches (`settings.build_batches`).
2. **Exact parity.** Per block, their model is built from seed 0 by their code and trained by their `MyTrainer`
   twice: with torch's AdamW (`optim="adamw_torch"`, the optimizer this project's Trainer uses) and with the AdamW
   their script gets (transformers' own, the 4.30 default). Its initial weights go through `simplified-convert
   original` and this project's Trainer trains them with their hyper-parameters. Same batches, same order.
3. **Initialisation parity.** Per block and seed, their model from their initialisation (their script's AdamW) and
   this project's block preset (`codeparrot-tiny-<block>`: the reproduction's model) from its own.
4. Writes `docs/reproduction/authors-parity/results.json`; `python -m experiments.doc_figures` renders its tables.

Resumable: each run writes `build/authors-parity/runs/<run>/`; a run whose job is unchanged is not run again. Each
run is one process with one torch thread; `--jobs` runs that many at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from . import results as res
from .settings import BLOCKS, THEIR_OPTIMIZER, TORCH_OPTIMIZER, Miniature, build_batches
from .venv import COMMIT, CPU_PATCH, REPOSITORY, REQUIREMENTS, SetupError, ensure_venv, prepare_source

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build" / "authors-parity"
RESULTS = REPO / "docs" / "reproduction" / "authors-parity" / "results.json"
HERE = Path(__file__).resolve().parent
#: the initialisation-parity runs' further lr: 4e-3, the Pre-LN lr at which the reproduction's SAS and SAS-P lead by
#: 6-13% (`codeparrot-tiny`), for the blocks of that claim
EXTRA_LRS = (4e-3,)
LEAD_BLOCKS = ("pre_ln", "sas", "sas_p")
#: the float64 exact-parity runs' length
FLOAT64_STEPS = 100


@dataclasses.dataclass
class Run:
    """One process: `cmd` with `job` written to `folder/job.json`; done when `outputs` exist for the same job."""

    name: str
    job: dict
    outputs: tuple[str, ...]
    cmd: list[str]
    after: tuple[str, ...] = ()

    def folder(self) -> Path:
        return BUILD / "runs" / self.name

    def done(self) -> bool:
        saved = self.folder() / "job.json"
        return (
            saved.is_file()
            and json.loads(saved.read_text()) == self.job
            and all((self.folder() / o).is_file() for o in self.outputs)
        )


def their_job(setting: Miniature, data: dict, src: Path) -> dict:
    """The fields of a job of `their_side.py` that the setting, its batches and their source fix."""
    return {
        "src": str(src),
        "steps": setting.steps,
        "batch": setting.batch,
        "learning_rate": setting.learning_rate,
        "vocab_size": int(data["vocab_size"]),
        "seq_len": setting.seq_len,
        "bos_token_id": int(data["bos_token_id"]),
        "eos_token_id": int(data["eos_token_id"]),
    }


def plan(
    setting: Miniature,
    blocks: list[str],
    seeds: list[int],
    data: dict,
    python: Path,
    src: Path,
    extra_lrs: tuple[float, ...] = (),
    lead_blocks: tuple[str, ...] = (),
) -> list[Run]:
    """Every run: per block, their seeds (the first with both AdamWs and the saved init), ours from their converted
    init, our preset per seed; then, at each of `extra_lrs`, their and our `lead_blocks` per seed."""
    base = {
        "setting": dataclasses.asdict(setting),
        "data": str(BUILD / "data.pt"),
        "threads": 1,
    }
    their = their_job(setting, data, src)
    runs = []
    for block in blocks:
        for seed in seeds:
            optims = [TORCH_OPTIMIZER, THEIR_OPTIMIZER] if seed == seeds[0] else [THEIR_OPTIMIZER]
            name = f"theirs-{block}-s{seed}"
            job = {
                **base,
                **their,
                "name": name,
                "overrides": setting.their_overrides(block),
                "seed": seed,
                "optims": optims,
                "save_init": seed == seeds[0],
                "out": str(BUILD / "runs" / name),
            }
            runs.append(Run(name, job, tuple(f"{o}.json" for o in optims), [str(python), str(HERE / "their_side.py")]))
    for block in blocks:
        name, source = f"ours-converted-{block}", f"theirs-{block}-s{seeds[0]}"
        job = {
            **base,
            "kind": "converted",
            "block": block,
            "seed": seeds[0],
            "their_init": str(BUILD / "runs" / source / "init"),
            "converted": str(BUILD / "runs" / name / "converted"),
            "out": str(BUILD / "runs" / name / "record.json"),
        }
        runs.append(
            Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"], (source,))
        )
        for seed in seeds:
            name = f"ours-preset-{block}-s{seed}"
            job = {
                **base,
                "kind": "preset",
                "block": block,
                "seed": seed,
                "out": str(BUILD / "runs" / name / "record.json"),
            }
            runs.append(Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"]))
    for block in blocks:  # exact parity below float32's rounding: both codes in float64, `FLOAT64_STEPS` steps
        name, source = f"theirs-{block}-s{seeds[0]}-float64", f"theirs-{block}-s{seeds[0]}"
        job = {
            **base,
            **their,
            "steps": FLOAT64_STEPS,
            "name": name,
            "overrides": setting.their_overrides(block),
            "seed": seeds[0],
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
            "seed": seeds[0],
            "dtype": "float64",
            "their_init": str(BUILD / "runs" / source / "init"),
            "converted": str(BUILD / "runs" / name / "converted"),
            "out": str(BUILD / "runs" / name / "record.json"),
        }
        runs.append(
            Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"], (source,))
        )
    for lr in extra_lrs:
        at_lr = dataclasses.replace(setting, learning_rate=lr)
        for block in lead_blocks:
            for seed in seeds:
                name = f"theirs-{block}-s{seed}-lr{lr:g}"
                job = {
                    **base,
                    **their,
                    "setting": dataclasses.asdict(at_lr),
                    "learning_rate": lr,
                    "name": name,
                    "overrides": setting.their_overrides(block),
                    "seed": seed,
                    "optims": [THEIR_OPTIMIZER],
                    "save_init": False,
                    "out": str(BUILD / "runs" / name),
                }
                runs.append(Run(name, job, (f"{THEIR_OPTIMIZER}.json",), [str(python), str(HERE / "their_side.py")]))
                name = f"ours-preset-{block}-s{seed}-lr{lr:g}"
                job = {
                    **base,
                    "setting": dataclasses.asdict(at_lr),
                    "kind": "preset",
                    "block": block,
                    "seed": seed,
                    "out": str(BUILD / "runs" / name / "record.json"),
                }
                runs.append(
                    Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"])
                )
    return runs


def execute(runs: list[Run], jobs: int) -> list[str]:
    """Run what is not done, `jobs` at a time, each after the runs it needs; returns the failures (one line each)."""
    by_name = {r.name: r for r in runs}
    pending = [r for r in runs if not r.done()]
    print(f"{len(runs) - len(pending)} of {len(runs)} runs done before; {len(pending)} to run", flush=True)
    failures: list[str] = []
    finished: set[str] = {r.name for r in runs if r.done()}

    def one(run: Run) -> None:
        while any(a not in finished for a in run.after):
            if any(a in {f.split(":")[0] for f in failures} for a in run.after):
                failures.append(f"{run.name}: skipped (a run it needs failed)")
                return
            time.sleep(2)
        folder = run.folder()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.json").unlink(missing_ok=True)
        job_file = folder / "job.pending.json"
        job_file.write_text(json.dumps(run.job, indent=1))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        started = time.time()
        with open(folder / "log.txt", "w") as log:
            rc = subprocess.run(
                [*run.cmd, str(job_file)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            ).returncode
        if rc or not all((folder / o).is_file() for o in run.outputs):
            failures.append(f"{run.name}: exit {rc}; see {folder / 'log.txt'}")
            return
        job_file.rename(folder / "job.json")
        finished.add(run.name)
        print(f"{run.name}: {time.time() - started:.0f} s", flush=True)

    # the runs others need first
    order = sorted(pending, key=lambda r: (not any(r.name in o.after for o in by_name.values()), bool(r.after)))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, order))
    return failures


def lead_runs(lr: float, blocks: list[str], seeds: list[int], suffix: str, load) -> dict:
    """The initialisation-parity runs at one lr: per code, block and seed the training-loss curve, the final eval loss,
    the tail loss, and each block's lead over the same code's Pre-LN."""
    out = {"learning_rate": lr, "blocks": blocks, "seeds": seeds}
    paths = {"theirs": "theirs-{b}-s{s}{x}/" + f"{THEIR_OPTIMIZER}.json", "ours": "ours-preset-{b}-s{s}{x}/record.json"}
    for code, path in paths.items():
        records = {b: [load(path.format(b=b, s=s, x=suffix)) for s in seeds] for b in blocks}
        curves = {b: [r["train_loss"] for r in records[b]] for b in blocks}
        out[code] = {
            "curves": curves,
            "eval_loss": {b: [r["eval_loss"] for r in records[b]] for b in blocks},
            "tail_loss": {b: [res.tail_loss(c) for c in curves[b]] for b in blocks},
            "lead": {b: res.lead(curves, b) for b in blocks if b != "pre_ln" and "pre_ln" in blocks},
        }
    return out


def collect(
    setting: Miniature,
    blocks: list[str],
    seeds: list[int],
    extra_lrs: tuple[float, ...] = (),
    lead_blocks: tuple[str, ...] = (),
) -> dict:
    """results.json from the runs' records."""

    def load(path: str) -> dict:
        return json.loads((BUILD / "runs" / path).read_text())

    exact, groups, inits = {}, {}, {}
    for block in blocks:
        theirs_torch = load(f"theirs-{block}-s{seeds[0]}/{TORCH_OPTIMIZER}.json")
        theirs_hf = load(f"theirs-{block}-s{seeds[0]}/{THEIR_OPTIMIZER}.json")
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
                load(f"theirs-{block}-s{seeds[0]}-float64/{TORCH_OPTIMIZER}.json")["train_loss"],
            ),
        }
        their_params = {n: {k: v for k, v in i.items()} for n, i in theirs_torch["parameters"].items()}
        groups[block] = {
            "their_config": theirs_torch["config"],
            "their_parameters": their_params,
            "comparison": res.compare_groups(theirs_torch["config"], their_params, 0.1),
        }
        mapping, _ = res.parameter_map(theirs_torch["config"], their_params)
        preset = load(f"ours-preset-{block}-s{seeds[0]}/record.json")
        inits[block] = {
            "converted_equals_theirs": all(
                abs(ours["init"][o]["std"] - their_params[t]["init"]["std"]) < 1e-6 for t, o in mapping.items()
            ),
            "theirs_vs_our_preset": res.compare_init(
                {n: i["init"] for n, i in their_params.items()}, preset["init"], mapping
            ),
            "only_ours": {n: s for n, s in preset["init"].items() if n not in set(mapping.values())},
            # their parameters with no counterpart in the preset (unmapped, or mapped to a name the preset lacks)
            "only_theirs": sorted(n for n in their_params if mapping.get(n) not in preset["init"]),
        }
    init_parity = [lead_runs(setting.learning_rate, blocks, seeds, "", load)]
    init_parity += [lead_runs(lr, list(lead_blocks), seeds, f"-lr{lr:g}", load) for lr in extra_lrs]
    versions = load(f"theirs-{blocks[0]}-s{seeds[0]}/{THEIR_OPTIMIZER}.json")["versions"]
    return {
        "authors": {"repository": REPOSITORY, "commit": COMMIT, "venv": list(REQUIREMENTS), "versions": versions},
        "cpu_patch": [{"file": f, "theirs": o.strip(), "patched": n.strip(), "why": w} for f, o, n, w in CPU_PATCH],
        "setting": dataclasses.asdict(setting),
        "tolerance": res.TOLERANCE,
        "exact": exact,
        "parameter_groups": groups,
        "init": inits,
        "init_parity": init_parity,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.authors_parity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--blocks", nargs="+", default=list(BLOCKS), choices=BLOCKS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--steps", type=int, default=Miniature.steps, help="training steps of every run (>= 100)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each one process, one torch thread)")
    parser.add_argument(
        "--extra-lrs",
        nargs="*",
        type=float,
        default=list(EXTRA_LRS),
        help="further lrs of the initialisation-parity runs (default: the reproduction's Pre-LN lr)",
    )
    parser.add_argument("--lead-blocks", nargs="+", default=list(LEAD_BLOCKS), choices=BLOCKS)
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
    data_file, data_setting = BUILD / "data.pt", BUILD / "data.json"
    identity = json.dumps(dataclasses.asdict(setting), sort_keys=True)
    if data_file.is_file() and data_setting.is_file() and data_setting.read_text() == identity:
        data = torch.load(data_file, weights_only=True)
    else:
        data = build_batches(setting, data_file)
        data_setting.write_text(identity)
    extra = (tuple(args.extra_lrs), tuple(b for b in args.lead_blocks if b in args.blocks))
    runs = plan(setting, args.blocks, args.seeds, data, python, src, *extra)
    failures = execute(runs, args.jobs)
    if failures:
        print("\n".join(f"error: {f}" for f in failures), file=sys.stderr)
        return 1
    result = collect(setting, args.blocks, args.seeds, *extra)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(res.exact_table(result))
    print(res.lead_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
