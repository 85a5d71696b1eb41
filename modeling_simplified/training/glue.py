"""GLUE as He & Hofmann (ICLR 2024) report it: every task fine-tuned from one pretrained run with the `glue-finetune`
preset (App. D.2, as cramming: 5 epochs, the same hyper-parameters for every task), several seeds, each task scored
by its own metrics (`metrics.py`), the seeds' mean and spread, the GLUE score, and Table 2's table.

`run_glue` trains each (task, seed) as one `simplified-train` run (`api.train`) in `<output>/<task>/seed<k>/` and
writes `<output>/glue.json` and `<output>/glue.md` after each one. A run that finished (its `metrics.json` written)
with the same settings is reused, so an interrupted benchmark resumes at the task it stopped in; a run folder that
holds a finished run of other settings is refused before anything is trained. A task that fails stops the benchmark
with one error (`GlueTaskFailed`) after `glue.json` has recorded every finished run.

**The GLUE score** follows cramming (Geiping & Goldstein 2023), whose fine-tuning protocol the paper uses: the tasks
of its evaluation config `cramming/config/eval/GLUE_sane.yaml` (CoLA, MNLI, MRPC, QNLI, QQP, RTE, SST-2, STS-B; WNLI
commented out) with the target metric of each task's `cramming/config/eval/tasks/<task>.yaml` (QQP F1, STS-B Pearson,
MNLI accuracy on matched and on mismatched, "accuracy, accuracy_extra"), in the repository JonasGeiping/cramming.
The score is the mean of Table 2's nine numbers: MNLI-m, MNLI-mm, SST-2, STS-B (Pearson), RTE, QNLI, QQP (F1), MRPC
(F1), CoLA (Matthews). Table 2's rows reproduce their GLUE column this way (Pre-LN: 710.3 / 9 = 78.9; SAS-P: 78.3; every row within 0.07),
and not with MNLI averaged first (78.6). WNLI is fine-tuned and reported when asked for, never averaged. Any other
task (a labelled folder or the embedded `stdlib-topic`, given as `name=dataset`) enters with its main metric.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .glue_tasks import DISPLAY, GLUE, GLUE_TASKS, NOT_SCORED, TABLE2_TASKS
from .plan import TrainPlan
from .presets import EMBEDDED, UsageError, apply_override, first_line, load_preset, validate
from .runs import pretrained_dir

#: the fine-tuning recipe (configuration/glue.json): App. D.2's, as cramming's
PRESET = "glue-finetune"
#: the column suffix of an evaluation split (Table 2's "MNLI-m" and "MNLI-mm")
SPLIT_SUFFIX = {"validation_matched": "m", "validation_mismatched": "mm"}
CONVENTION = (
    "mean over the scored tasks' main metric on each evaluation split (MNLI-m and MNLI-mm count as two entries; "
    "QQP and MRPC F1, STS-B Pearson, CoLA Matthews correlation, the others accuracy; WNLI excluded), as cramming's "
    "GLUE_sane.yaml and tasks/*.yaml (github.com/JonasGeiping/cramming, cramming/config/eval/); per seed, then the "
    "mean and sample standard deviation over seeds"
)


class GlueTaskFailed(Exception):
    """A task's fine-tuning failed; every finished run is in glue.json."""


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One task: `name` (its folder and column), the dataset it is read from and its config (a GLUE task name for
    `nyu-mll/glue`; None for a dataset with one config, a local folder or `embedded`)."""

    name: str
    dataset: str
    config: str | None

    @property
    def label(self) -> str:
        return DISPLAY.get(self.name, self.name)


def parse_task(text: str, dataset: str = GLUE) -> GlueTask:
    """`TASK` (a GLUE task of `dataset`) or `NAME=DATASET` (a labelled dataset of its own: a Hub id, a local folder
    or `embedded`, the offline stdlib-topic task) as a `GlueTask`."""
    name, sep, source = text.partition("=")
    name = name.strip()
    if sep:
        if not name or not source.strip() or "/" in name:
            raise UsageError(f"--tasks {text!r}: expected NAME=DATASET (a folder name, then a dataset id or folder).")
        return GlueTask(name, source.strip(), None)
    if name not in GLUE_TASKS:
        raise UsageError(
            f"--tasks {text!r}: not a GLUE task; allowed values: {', '.join(GLUE_TASKS)}, or NAME=DATASET for a "
            f"labelled dataset of your own (NAME={EMBEDDED} for the offline stdlib-topic task)."
        )
    return GlueTask(name, dataset, name)


def task_plan(
    task: GlueTask,
    seed: int,
    init_from: str | Path,
    output_dir: Path,
    overrides: Sequence[str] = (),
    max_steps: int | None = None,
) -> TrainPlan:
    """The `simplified-train` run of one task and seed: the `glue-finetune` preset on the task's data from
    `init_from`, the overrides applied, no export."""
    preset = load_preset(PRESET, check=False)
    preset.data.dataset, preset.data.dataset_config = task.dataset, task.config
    preset.training.init_from, preset.training.seed = str(init_from), seed
    for assignment in overrides:
        apply_override(preset, assignment)
    if max_steps is not None:
        preset.training.max_steps, preset.training.num_train_epochs = max_steps, None
    return TrainPlan(preset=preset, output_dir=output_dir / task.name / f"seed{seed}", overwrite=True, export=False)


def finished_metrics(plan: TrainPlan) -> dict[str, Any] | None:
    """The metrics of the finished run in the plan's folder when it was trained with the plan's settings; None when
    the folder holds no finished run. A finished run of other settings is a `UsageError` (it is never replaced)."""
    out = plan.output_dir
    if not (out / "metrics.json").is_file() or not (out / "preset.json").is_file():
        return None
    saved = json.loads((out / "preset.json").read_text())
    saved.pop("name", None)
    now = json.loads(json.dumps(plan.preset.to_dict()))
    changed = sorted(
        f"{section}.{key}"
        for section in ("model", "training", "data")
        for key in set(saved.get(section, {})) | set(now[section])
        if saved.get(section, {}).get(key) != now[section].get(key)
    )
    if changed:
        raise UsageError(
            f"{out} holds a finished run with other settings ({', '.join(changed)}); choose another --output, or "
            "remove that folder to train it again."
        )
    return json.loads((out / "metrics.json").read_text())


# -- aggregating -----------------------------------------------------------------------------------------------
def spread(values: Sequence[float]) -> dict[str, float | int]:
    """Mean, sample standard deviation (0 for one value), min and max of `values`."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(values), "max": max(values), "n": n}


def score_entries(task: str, metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(column, split, metric) of the numbers a run of `task` enters the GLUE score with: its main metric (the first
    of `metrics.py`'s names) on every evaluation split; MNLI's are MNLI-m and MNLI-mm."""
    label = DISPLAY.get(task, task)
    splits = list(metrics["eval_metrics"])
    main = next(iter(metrics["eval_metrics"][splits[0]]))
    if len(splits) == 1:
        return [(label, splits[0], main)]
    return [(f"{label}-{SPLIT_SUFFIX.get(split, split)}", split, main) for split in splits]


def summarise(tasks: Sequence[GlueTask], seeds: Sequence[int], runs: dict[str, dict[int, dict]]) -> dict[str, Any]:
    """glue.json's `tasks` and `glue_score` from the finished runs (`runs[task][seed]`: the run's metrics.json)."""
    table: dict[str, Any] = {}
    for task in tasks:
        done = runs.get(task.name, {})
        row: dict[str, Any] = {"dataset": task.dataset, "config": task.config, "label": task.label, "seeds": {}}
        for seed, metrics in sorted(done.items()):
            row["seeds"][str(seed)] = {
                "eval_metrics": metrics["eval_metrics"],
                "baseline": metrics.get("baseline"),
                "steps": metrics["steps"],
                "train_time_s": metrics["train_time_s"],
                "run_dir": metrics["run_dir"],
            }
        if done:
            first = next(iter(done.values()))
            row["entries"] = [list(e) for e in score_entries(task.name, first)]
            row["summary"] = {
                split: {name: spread([done[s]["eval_metrics"][split][name] for s in sorted(done)]) for name in values}
                for split, values in first["eval_metrics"].items()
            }
            row["baseline"] = first.get("baseline")
        table[task.name] = row
    scored = [task for task in tasks if task.name not in NOT_SCORED]
    complete = [s for s in seeds if all(s in runs.get(t.name, {}) for t in scored)]
    per_seed = {}
    for seed in complete:
        numbers = [
            runs[t.name][seed]["eval_metrics"][split][metric]
            for t in scored
            for _, split, metric in score_entries(t.name, runs[t.name][seed])
        ]
        per_seed[str(seed)] = sum(numbers) / len(numbers)
    columns = [column for t in scored if "entries" in table[t.name] for column, _, _ in table[t.name]["entries"]]
    score = {"convention": CONVENTION, "columns": columns, "per_seed": per_seed}
    if per_seed:
        score.update(spread(list(per_seed.values())))
    return {"tasks": table, "glue_score": score}


# -- the table ---------------------------------------------------------------------------------------------------
def _cell(summary: dict[str, Any], ranges: bool) -> str:
    text = f"{100 * summary['mean']:.1f}"
    if ranges and summary["n"] > 1:
        text += f" ({100 * summary['min']:.1f}–{100 * summary['max']:.1f})"
    return text


def render_table(rows: dict[str, dict[str, Any]], ranges: bool = True) -> str:
    """A Markdown table in the layout of the paper's Table 2: one row per glue.json in `rows` (by row name), the
    GLUE score (mean ± std over seeds; "Score" when a task is not GLUE's) first, then each task's main metric ×100, mean over seeds (with `ranges`, the
    seeds' min–max in brackets); MNLI as matched/mismatched. Columns: Table 2's tasks that any row has, in its order,
    then the others."""
    present = [name for glue in rows.values() for name in glue["tasks"] if "summary" in glue["tasks"][name]]
    order = [t for t in TABLE2_TASKS if t in present] + list(dict.fromkeys(t for t in present if t not in TABLE2_TASKS))
    # the score of other tasks than GLUE's is no GLUE score
    score_name = "GLUE" if all(t in GLUE_TASKS for t in order) else "Score"
    head = ["", score_name] + [DISPLAY.get(t, t) + (" (m/mm)" if t == "mnli" else "") for t in order]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row_name, glue in rows.items():
        score = glue["glue_score"]
        cells = [row_name]
        if "mean" in score:
            cells.append(f"{100 * score['mean']:.1f}±{100 * score['std']:.1f}")
        else:
            cells.append("–")
        for task in order:
            entry = glue["tasks"].get(task, {})
            if "summary" not in entry:
                cells.append("–")
                continue
            cells.append(
                "/".join(_cell(entry["summary"][split][metric], ranges) for _, split, metric in entry["entries"])
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def metric_legend(glue: dict[str, Any]) -> str:
    """Which metric each column shows (the main metric of each task, as glue.json's entries name it)."""
    parts = []
    for entry in glue["tasks"].values():
        if "entries" in entry:
            parts.append(f"{entry['label']}: {entry['entries'][0][2].replace('_', ' ')}")
    return "; ".join(parts)


# -- the benchmark -----------------------------------------------------------------------------------------------
def run_glue(
    init_from: str | Path,
    tasks: Sequence[GlueTask | str] = TABLE2_TASKS,
    seeds: Sequence[int] = (0, 1, 2),
    output_dir: str | Path | None = None,
    overrides: Sequence[str] = (),
    max_steps: int | None = None,
    dataset: str = GLUE,
    name: str | None = None,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Fine-tune `init_from` on every task with every seed (reusing finished runs), write glue.json and glue.md to
    `output_dir` (default `runs/glue/<init_from's folder name>`) after each run and return glue.json's content.
    Bad input raises `UsageError` before anything is trained; a failing run raises `GlueTaskFailed`."""
    from .api import train  # the Trainer and datasets: only for a run

    tasks = [t if isinstance(t, GlueTask) else parse_task(t, dataset) for t in tasks]
    names = [t.name for t in tasks]
    if not tasks:
        raise UsageError("--tasks: no task given.")
    if len(set(names)) != len(names):
        raise UsageError(f"--tasks: each task once, got {' '.join(names)}.")
    if not seeds or len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds must be one or more distinct seeds, got {list(seeds)}.")
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"--max-steps must be >= 1, got {max_steps}.")
    pretrained = pretrained_dir(str(init_from))  # a UsageError unless a model of this family is there
    out = Path(output_dir) if output_dir is not None else Path("runs") / "glue" / Path(init_from).resolve().name
    # seed by seed, so that every finished seed has a GLUE score
    plans = {(t.name, s): task_plan(t, s, init_from, out, overrides, max_steps) for s in seeds for t in tasks}
    runs: dict[str, dict[int, dict]] = {}
    for (task_name, seed), plan in plans.items():  # every plan checked, and every finished run found, first
        validate(plan.preset)
        metrics = finished_metrics(plan)
        if metrics is not None:
            runs.setdefault(task_name, {})[seed] = {**metrics, "run_dir": str(plan.output_dir)}
    header = {
        "name": name or Path(init_from).resolve().name,
        "init_from": str(init_from),
        "pretrained": str(pretrained),
        "preset": PRESET,
        "overrides": list(overrides),
        "max_steps": max_steps,
        "seeds": list(seeds),
    }

    def write() -> dict[str, Any]:
        glue = {**header, **summarise(tasks, seeds, runs)}
        glue["complete"] = all(len(runs.get(t, {})) == len(seeds) for t in names)
        out.mkdir(parents=True, exist_ok=True)
        partial = out / "glue.json.partial"  # renamed when written: glue.json is whole or the previous one
        partial.write_text(json.dumps(glue, indent=1) + "\n")
        partial.replace(out / "glue.json")
        table = render_table({glue["name"]: glue})
        (out / "glue.md").write_text(f"{table}\n{metric_legend(glue)}; ×100, mean over seeds (min–max).\n")
        return glue

    glue = write()
    total = len(plans)
    for index, ((task_name, seed), plan) in enumerate(plans.items(), 1):
        where = f"[{index}/{total}] {task_name} seed {seed}"
        if seed in runs.get(task_name, {}):
            progress(f"{where}: finished before, reused ({plan.output_dir})")
            continue
        progress(f"{where}: fine-tuning in {plan.output_dir}")
        started = time.time()
        try:
            result = train(plan)
        except Exception as err:  # noqa: BLE001 - one message; the finished runs are in glue.json already
            kind = "" if isinstance(err, UsageError) else f"{type(err).__name__}: "
            raise GlueTaskFailed(
                f"task {task_name} (seed {seed}) failed: {kind}{first_line(err)}; the {sum(map(len, runs.values()))} "
                f"finished runs are in {out / 'glue.json'} and are reused when the command runs again."
            ) from err
        runs.setdefault(task_name, {})[seed] = {**result.metrics, "run_dir": str(plan.output_dir)}
        scores = ", ".join(
            f"{split} {metric} {value:.4f}"
            for split, values in result.metrics["eval_metrics"].items()
            for metric, value in values.items()
        )
        progress(f"{where}: {scores} ({time.time() - started:.0f} s)")
        glue = write()
    return glue
