"""Why the two codes part: the authors' blocks tuned, this project's blocks in the authors' configuration from their
own initialisation, and the walk from this project's presets to that configuration, one difference at a time.

Every model trains in the parity miniature (`settings.Miniature`) on the shared batches with the authors'
`train.yaml` (their side: their `MyTrainer` and script AdamW; ours: `SimplifiedTrainer`):

- **theirs**: each block as their configs define it (`settings.THEIR_BLOCKS`);
- **ours, the walk**: per block of `WALK_BLOCKS`, this project's `codeparrot-tiny-<block>` preset (the reproduction's
  model), then the model after each difference of `WALK` taken from the authors' configuration
  (`codeparrot-tiny-authors-<block>`), in that order; a difference that changes nothing for a block is no step of its
  walk. The last step is the authors' configuration in this code (checked: `walk` raises otherwise). V-SkipInit is
  not walked: its two ends are different blocks (He et al.'s α·I + β·A against their centred shaped attention).

1. **Sweeps**: every model at every lr of `GRID` (seed 0), grown by `FACTOR` past whichever end holds its best until
   the best is bracketed (the reproduction's protocol and criterion: the mean training loss over the last tenth of
   the steps, a diverged run the worst, ties to the smaller lr).
2. **Seeds**: every model at its chosen lr with the other seeds: the lead of a block over the same code's (or walk
   step's) Pre-LN at each one's own best lr, and each difference's effect on it.
3. **Initialisation parity**: their code and ours in their configuration, each from its own initialisation, at lr
   1e-3 (their script's) and at their chosen lr per block, `PARITY_SEEDS` seeds.
4. **The long probe**: their `LONG_BLOCKS` at `LONG_LR` (where their SAS sat on the unigram
   plateau for all 200 steps) for `LONG_FACTOR` times the steps: does it leave it when the run is longer?
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from experiments.reproduce.analysis import extend
from experiments.reproduce.depth import reference_levels
from modeling_simplified.training.presets import build_config, load_preset

from . import results as res
from .runner import BUILD, Run
from .settings import BLOCKS, THEIR_OPTIMIZER, Miniature, their_job

HERE = Path(__file__).resolve().parent
#: this project's presets (the reproduction's models) and the authors' configuration in this code
OUR_FAMILY, AUTHORS_FAMILY = "codeparrot-tiny", "codeparrot-tiny-authors"


@dataclasses.dataclass(frozen=True)
class Difference:
    """One difference between this project's presets and the authors' configuration: the model fields it takes
    from the authors' preset."""

    name: str
    label: str
    fields: tuple[str, ...]


#: the walk's order: positions first (the difference the probes had tried), then the norms, the biases and the gain
WALK: tuple[Difference, ...] = (
    Difference(
        "positions",
        "learned positions (GPT-2's wpe), and ReLU written as their leaky ReLU of slope 0 (the same function)",
        ("position_embedding_type", "max_position_embeddings", "hidden_act", "leaky_relu_slope"),
    ),
    Difference(
        "norm", "block RMSNorm with ε 1e-5 outside the root (ours: 1e-8 inside)", ("norm_eps", "rmsnorm_eps_position")
    ),
    Difference("final_norm", "final LayerNorm (ours: RMSNorm)", ("final_norm", "norm_bias")),
    Difference(
        "qk_bias",
        "trainable query/key bias, every other bias frozen at zero",
        ("attention_bias", "mlp_bias", "frozen_biases"),
    ),
    Difference("mlp_skip_gain", "trainable MLP skip gain αFF (ours: fixed at 1)", ("skip_gains_trainable",)),
)
WALK_BLOCKS = ("pre_ln", "sas", "sas_p")
#: the sweep's start, growth factor and largest number of lrs (the reproduction's)
GRID, FACTOR, MAX_LRS = (1e-3, 2e-3, 4e-3), 2.0, 8
#: the seeds of the initialisation parity (the sweeps and leads: `SEEDS`)
SEEDS, PARITY_SEEDS = (0, 1), (0, 1, 2)
#: their script's lr: an initialisation-parity lr
SCRIPT_LR = 1e-3
LONG_BLOCKS, LONG_LR, LONG_FACTOR = ("sas",), 4e-3, 3


def preset_fields(family: str, block: str) -> dict[str, Any]:
    return load_preset(f"{family}-{block}").model


def _config(fields: dict[str, Any]) -> dict[str, Any]:
    """What a model's fields resolve to (every field the block type implies filled in), for comparing two models."""
    return build_config({**fields, "vocab_size": 4096}).to_dict()


@functools.cache  # read-only: every caller shares the rows
def walk(block: str) -> list[dict[str, Any]]:
    """The block's models from this project's preset to the authors' configuration: `{"step", "label", "changed",
    "model"}` per step (the first: the preset; the last: the authors' configuration, `authors: True`)."""
    start, target = preset_fields(OUR_FAMILY, block), preset_fields(AUTHORS_FAMILY, block)
    rows = [{"step": "preset", "label": f"this project's {OUR_FAMILY}-{block}", "changed": {}, "model": start}]
    differences = WALK if block in WALK_BLOCKS else (Difference("authors", "every difference of the walk", ()),)
    for difference in differences:
        current = rows[-1]["model"]
        fields = difference.fields or tuple(sorted(set(current) | set(target)))
        model = {k: v for k, v in {**current, **{f: target.get(f) for f in fields}}.items() if v is not None}
        changed = {f: [current.get(f), model.get(f)] for f in fields if current.get(f) != model.get(f)}
        if _config(model) != _config(current):
            rows.append({"step": difference.name, "label": difference.label, "changed": changed, "model": model})
    if _config(rows[-1]["model"]) != _config(target):
        raise ValueError(f"{block}: the walk does not reach {AUTHORS_FAMILY}-{block}; WALK misses a difference.")
    rows[-1]["authors"] = True
    return rows


def at_step(rows: list[dict[str, Any]], step: str) -> dict[str, Any]:
    """The row of a walk in force after `step` (a step the block's walk skips leaves its previous model)."""
    order = ["preset", *(d.name for d in WALK)]
    return [r for r in rows if order.index(r["step"]) <= order.index(step)][-1]


@dataclasses.dataclass(frozen=True)
class Model:
    """One model of the study: theirs (`step` None) or one step of ours."""

    code: str
    block: str
    step: str | None = None

    @property
    def key(self) -> str:
        return "/".join(x for x in (self.code, self.block, self.step) if x)


def models() -> list[Model]:
    theirs = [Model("theirs", b) for b in BLOCKS]
    return theirs + [Model("ours", b, row["step"]) for b in BLOCKS for row in walk(b)]


def phases() -> list[list[Model]]:
    """The models in the order they are trained: their blocks and the two ends of every walk (this project's
    presets, the authors' configuration) first, then the walks' intermediate steps."""
    ends = [m for m in models() if m.code == "theirs" or m.step == "preset" or m == authors_model(m.block)]
    return [ends, [m for m in models() if m not in ends]]


def authors_model(block: str) -> Model:
    """Ours in the authors' configuration: the last step of the block's walk."""
    return Model("ours", block, walk(block)[-1]["step"])


class Plan:
    """The runs of the study: a model at one seed, lr and length, as a `Run` of `runner`."""

    def __init__(self, setting: Miniature, data: dict, python: Path, src: Path):
        self.setting, self.data, self.python, self.src = setting, data, python, src
        self.walks = {b: walk(b) for b in BLOCKS}

    def run(self, model: Model, seed: int, lr: float, steps: int | None = None) -> Run:
        steps = steps or self.setting.steps
        lr = float(f"{lr:.6g}")
        at = dataclasses.replace(self.setting, learning_rate=lr, steps=steps)
        tail = f"-s{seed}-lr{lr:g}" + ("" if steps == self.setting.steps else f"-n{steps}")
        base = {"setting": dataclasses.asdict(at), "data": str(BUILD / "data.pt"), "threads": 1, "seed": seed}
        if model.code == "theirs":
            name = f"theirs-{model.block}{tail}"
            job = {
                **base,
                **their_job(at, self.data, self.src),
                "name": name,
                "overrides": self.setting.their_overrides(model.block),
                "optims": [THEIR_OPTIMIZER],
                "save_init": False,
                "out": str(BUILD / "runs" / name),
            }
            return Run(name, job, (f"{THEIR_OPTIMIZER}.json",), [str(self.python), str(HERE / "their_side.py")])
        name = f"ours-{model.block}-{model.step}{tail}"
        row = next(r for r in self.walks[model.block] if r["step"] == model.step)
        job = {
            **base,
            "kind": "model",
            "block": model.block,
            "step": model.step,
            "model": row["model"],
            "out": str(BUILD / "runs" / name / "record.json"),
        }
        return Run(name, job, ("record.json",), [sys.executable, "-m", "experiments.authors_parity.our_side"])


def tail_of(record: dict) -> float:
    """The sweep's criterion: the mean training loss over the last tenth (a diverged run: +inf)."""
    value = res.tail_loss(record["train_loss"])
    return value if math.isfinite(value) else math.inf


def choose(points: dict[float, float]) -> dict[str, Any]:
    """The sweep's choice among `{lr: tail}`: the lowest tail loss, ties to the smaller lr; bracketed when a smaller
    and a larger lr were tried."""
    chosen = min(points, key=lambda lr: (points[lr], lr))
    return {"chosen": chosen, "bracketed": min(points) < chosen < max(points)}


def sweep(plan: Plan, execute, jobs: int, chosen_models: list[Model]) -> dict[str, dict[str, Any]]:
    """Every model's lr sweep on seed 0, grown until bracketed (or `MAX_LRS`); `execute(runs, jobs)` trains."""
    grid = {m.key: list(GRID) for m in chosen_models}
    while True:
        runs = {(m.key, lr): plan.run(m, SEEDS[0], lr) for m in chosen_models for lr in grid[m.key]}
        failures = execute(list(runs.values()), jobs)
        if failures:
            raise RuntimeError("; ".join(failures))
        out = {}
        for m in chosen_models:
            points = {lr: tail_of(runs[m.key, lr].record()) for lr in grid[m.key]}
            out[m.key] = {"points": {f"{lr:g}": t for lr, t in sorted(points.items())}, **choose(points)}
        rows = {
            k: {**row, "points": [{"lr": float(lr), "swept": True} for lr in row["points"]]} for k, row in out.items()
        }
        more = extend(rows, FACTOR, MAX_LRS)
        new = {k: [float(f"{lr:.6g}") for lr in lrs if float(f"{lr:.6g}") not in grid[k]] for k, lrs in more.items()}
        if not any(new.values()):
            return out
        for k, lrs in new.items():
            grid[k] += lrs


def later(plan: Plan, chosen: dict[str, float], among: list[Model]) -> list[tuple[Model, int, float, int | None]]:
    """After the sweeps of the models `among`, as (model, seed, lr, steps): each at its chosen lr with the other
    seeds; where their blocks are among them, the initialisation parity (their code and ours in their configuration
    at their script's lr and at their chosen lr, `PARITY_SEEDS`) and the long probe."""
    out = [(m, s, chosen[m.key], None) for m in among for s in SEEDS[1:]]
    if Model("theirs", BLOCKS[0]) not in among:
        return out
    for block in BLOCKS:
        for m in (Model("theirs", block), authors_model(block)):
            for lr in sorted({SCRIPT_LR, chosen[Model("theirs", block).key]}):
                out += [(m, s, lr, None) for s in PARITY_SEEDS]
    for block in LONG_BLOCKS:  # at the usual length too, every seed (the sweep has only the first)
        out += [
            (Model("theirs", block), s, LONG_LR, n) for s in SEEDS for n in (None, plan.setting.steps * LONG_FACTOR)
        ]
    return out


# -- the results ------------------------------------------------------------------------------------------------------
def _brief(record: dict) -> dict[str, Any]:
    return {"train_loss": [round(x, 5) for x in record["train_loss"]], "eval_loss": round(record["eval_loss"], 5)}


def lead_per_seed(tails: dict[str, list[float]], block: str) -> dict[str, Any]:
    """`block`'s tail loss relative to Pre-LN's, per seed (negative: ahead), their mean and range."""
    per_seed = [b / a - 1 for a, b in zip(tails["pre_ln"], tails[block])]
    return {"per_seed": per_seed, "mean": statistics.fmean(per_seed), "range": [min(per_seed), max(per_seed)]}


#: a run has left the unigram plateau once its running mean training loss over `PLATEAU_WINDOW` steps is this far
#: below the unigram level of the training tokens (nats)
PLATEAU_MARGIN, PLATEAU_WINDOW = 0.2, 10


def plateau_exit(losses: list[float], unigram: float) -> int | None:
    """The first step at which the running mean of the training loss falls `PLATEAU_MARGIN` below the unigram level
    after having been above it (None: it never does)."""
    above = False
    for i in range(PLATEAU_WINDOW, len(losses) + 1):
        mean = statistics.fmean(losses[i - PLATEAU_WINDOW : i])
        above = above or mean >= unigram
        if above and mean < unigram - PLATEAU_MARGIN:
            return i
    return None


def agreement(theirs: list[list[float]], ours: list[list[float]]) -> dict[str, Any]:
    """How two codes' per-step training-loss curves (one per seed each) compare with their seeds' spread: per step,
    the difference of the seed means against the larger of the two codes' seed ranges; the tail losses' ranges."""
    steps = min(min(map(len, theirs)), min(map(len, ours)))
    within, worst = 0, {"step": 0, "difference": 0.0, "spread": 0.0}
    for i in range(steps):
        a, b = [c[i] for c in theirs], [c[i] for c in ours]
        diff = statistics.fmean(b) - statistics.fmean(a)
        spread = max(max(a) - min(a), max(b) - min(b))
        within += abs(diff) <= spread
        if abs(diff) - spread > abs(worst["difference"]) - worst["spread"]:
            worst = {"step": i + 1, "difference": diff, "spread": spread}
    tails = {"theirs": [res.tail_loss(c) for c in theirs], "ours": [res.tail_loss(c) for c in ours]}
    return {
        "steps": steps,
        "steps_within_spread": within,
        "worst": worst,
        "tail_loss": tails,
        "tail_ranges_overlap": max(map(min, tails.values())) <= min(map(max, tails.values())),
    }


def collect(plan: Plan, sweeps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The study's section of `results.json`: the walks (each step's changed fields), every run's curve, the sweeps,
    the leads at each model's own best lr, the walk's effects, the initialisation parity and the long probe."""
    chosen = {k: row["chosen"] for k, row in sweeps.items()}
    runs: dict[str, dict[str, Any]] = {}

    def record(m: Model, seed: int, lr: float, steps: int | None = None) -> dict:
        run = plan.run(m, seed, lr, steps)
        if run.name not in runs:
            at = run.job["setting"]
            runs[run.name] = {"model": m.key, "seed": seed, "lr": at["learning_rate"], "steps": at["steps"]}
            runs[run.name].update(_brief(run.record()))
        return runs[run.name]

    every = models()
    for m in every:  # every run of the sweeps, then of the later phases, in the table of runs
        for lr in sweeps[m.key]["points"]:
            record(m, SEEDS[0], float(lr))

    def tails(m: Model) -> list[float]:
        return [tail_of(record(m, s, chosen[m.key])) for s in SEEDS]

    leads = {}
    order = ["preset", *(d.name for d in WALK)]
    for key, step in (("theirs", None), *((f"ours/{s}", s) for s in order)):
        per_block = {
            b: tails(Model("theirs", b) if step is None else Model("ours", b, at_step(plan.walks[b], step)["step"]))
            for b in WALK_BLOCKS
        }
        leads[key] = {b: lead_per_seed(per_block, b) for b in WALK_BLOCKS if b != "pre_ln"}
    # V-SkipInit beside Pre-LN in their code, in this project's presets and in the authors' configuration here
    value_skipinit = {
        key: lead_per_seed({"pre_ln": tails(pre_ln), "value_skipinit": tails(vsi)}, "value_skipinit")
        for key, pre_ln, vsi in (
            ("theirs", Model("theirs", "pre_ln"), Model("theirs", "value_skipinit")),
            ("ours/preset", Model("ours", "pre_ln", "preset"), Model("ours", "value_skipinit", "preset")),
            ("ours/authors", authors_model("pre_ln"), authors_model("value_skipinit")),
        )
    }
    effects = {}
    for block in WALK_BLOCKS[1:]:
        rows = []
        for before, after in zip(order, order[1:]):
            a, b = leads[f"ours/{before}"][block], leads[f"ours/{after}"][block]
            moved = [y - x for x, y in zip(a["per_seed"], b["per_seed"])]
            changes = [blk for blk in ("pre_ln", block) if at_step(plan.walks[blk], after)["step"] == after]
            rows.append(
                {
                    "difference": after,
                    "changes": changes,
                    "lead_before": a,
                    "lead_after": b,
                    "effect_per_seed": moved,
                    "effect_mean": statistics.fmean(moved),
                }
            )
        effects[block] = rows
    parity = []
    for block in BLOCKS:
        for lr in sorted({SCRIPT_LR, chosen[Model("theirs", block).key]}):
            pair = (Model("theirs", block), authors_model(block))
            curves = [[record(m, s, lr)["train_loss"] for s in PARITY_SEEDS] for m in pair]
            parity.append({"block": block, "lr": lr, "seeds": list(PARITY_SEEDS), **agreement(*curves)})
    long_steps = plan.setting.steps * LONG_FACTOR
    train_ids = plan.data["train"].tolist()
    unigram = reference_levels(train_ids, train_ids, int(plan.data["vocab_size"]))["unigram"]
    long = [
        {
            "model": m.key,
            "seed": s,
            "tail_loss": tail_of(record(m, s, LONG_LR, long_steps)),
            "short_tail_loss": tail_of(record(m, s, LONG_LR)),
            "leaves_plateau_at": plateau_exit(record(m, s, LONG_LR, long_steps)["train_loss"], unigram),
            "short_leaves_plateau_at": plateau_exit(record(m, s, LONG_LR)["train_loss"], unigram),
        }
        for m in (Model("theirs", block) for block in LONG_BLOCKS)
        for s in SEEDS
    ]
    for args in later(plan, chosen, models()):  # the rest of the later runs (seeds of models no comparison above reads)
        record(*args)
    eval_ids, vocab = plan.data["eval"].tolist(), int(plan.data["vocab_size"])
    return {
        "grid": list(GRID),
        "seeds": list(SEEDS),
        "parity_seeds": list(PARITY_SEEDS),
        "levels": {
            "train_unigram": unigram,
            "eval": reference_levels(train_ids, eval_ids, vocab),
        },
        "walk": {b: [{k: v for k, v in r.items() if k != "model"} for r in plan.walks[b]] for b in BLOCKS},
        "sweeps": sweeps,
        "leads": leads,
        "value_skipinit": value_skipinit,
        "effects": effects,
        "init_parity": parity,
        "long": {"lr": LONG_LR, "steps": long_steps, "runs": long},
        "runs": runs,
    }
