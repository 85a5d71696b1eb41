"""The parity results from the runs' records: exact parity per block, the parameter groups mapped through the
conversion, the initial weights' statistics side by side, and the per-step lead of each simplified block over
Pre-LN from each code's own initialisation. `results.json` holds them; `tables` renders the docs' tables from it."""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

import torch

from modeling_simplified.conversion.original import original_to_simplified
from modeling_simplified.optimization import parameter_groups

#: two float64 trainings of the same model on the same batches agree to this over 100 steps (nats, per-step training
#: loss). Pre-LN agrees to ~1e-15. The shaped blocks start ~1e-10 to 2e-9 apart at the first step (their centring
#: matrix `C` is built in float32 and cast: 1/k off by up to 6e-8 relative), which training amplifies, as it amplifies
#: the two codes' ~1e-6 float32 rounding differences (the float32 columns).
TOLERANCE = 1e-5
#: the lead is read on the mean training loss over the last `TAIL` of the steps (the reproduction's criterion)
TAIL = 0.1
#: the tag of the k-th trainable parameter of theirs in `parameter_map` (above any gain or init value)
_TAG = 1000.0


def max_difference(a: list[float], b: list[float]) -> dict[str, Any]:
    """The largest |a - b| over the steps both have, its step, and the steps compared."""
    n = min(len(a), len(b))
    diffs = [abs(x - y) for x, y in zip(a[:n], b[:n])]
    worst = max(range(n), key=diffs.__getitem__)
    return {
        "max_abs": diffs[worst],
        "at_step": worst + 1,
        "steps": n,
        "first_step_abs": diffs[0],
        "first_100_max_abs": max(diffs[:100]),
    }


def tail_loss(losses: list[float], tail: float = TAIL) -> float:
    """The mean training loss over the last `tail` of the steps."""
    k = max(1, round(len(losses) * tail))
    return statistics.fmean(losses[-k:])


def parameter_map(their_config: dict, their_parameters: dict[str, dict]) -> tuple[dict[str, str], torch.nn.Module]:
    """Their trainable parameter -> ours, through `original_to_simplified`: each of their trainable tensors is filled
    with its own tag, each frozen one with its (constant) initial value, and the converted model's parameters are
    read back by tag. Returns the mapping and the converted model."""
    state, tags = {}, {}
    for k, (name, info) in enumerate(their_parameters.items()):
        if info["trainable"]:
            tags[_TAG + k] = name
            state[name] = torch.full(info["shape"], _TAG + k)
        else:
            if info["init"]["std"] != 0.0:
                raise ValueError(f"their frozen parameter {name} is not constant; it cannot be converted by tag.")
            state[name] = torch.full(info["shape"], info["init"]["mean"])
    model = original_to_simplified(their_config, state)
    mapping = {}
    for ours, p in model.named_parameters():
        values = torch.unique(p.detach())
        if values.numel() == 1 and float(values) in tags:
            mapping[tags[float(values)]] = ours
    return mapping, model


def compare_groups(their_config: dict, their_parameters: dict[str, dict], weight_decay: float) -> dict[str, Any]:
    """Their AdamW groups (recorded from their `MyTrainer`) against this project's `parameter_groups` on the converted
    model: per trainable parameter of theirs, its weight decay here and there; the parameters that train on one side
    only; and theirs that are trainable but never updated (unused in their forward: the conversion drops them)."""
    mapping, model = parameter_map(their_config, their_parameters)
    ours_decay = {id(p): g["weight_decay"] for g in parameter_groups(model, weight_decay) for p in g["params"]}
    params = dict(model.named_parameters())
    rows, unmapped, unused = [], [], []
    for name, info in their_parameters.items():
        if not info["trainable"]:
            continue
        if name not in mapping:  # a trainable gain their forward never reads (a skip gain set to 0) gets no update
            (unused if info.get("updated") is False else unmapped).append(name)
            continue
        p = params[mapping[name]]
        rows.append(
            {
                "theirs": name,
                "ours": mapping[name],
                "their_weight_decay": info["weight_decay"],
                "our_weight_decay": ours_decay.get(id(p)),
                "trainable_here": p.requires_grad,
            }
        )
    mapped = set(mapping.values())
    only_ours = sorted(n for n, p in params.items() if p.requires_grad and n not in mapped)
    differ = [r for r in rows if r["their_weight_decay"] != r["our_weight_decay"] or not r["trainable_here"]]
    return {
        "trainable": len(rows) + len(unmapped) + len(unused),
        "unused_theirs": unused,
        "decayed_theirs": sorted(r["theirs"] for r in rows if r["their_weight_decay"]),
        "differ": differ,
        "trainable_only_theirs": unmapped,
        "trainable_only_ours": only_ours,
    }


def compare_init(their_stats: dict[str, dict], our_stats: dict[str, dict], mapping: dict[str, str]) -> list[dict]:
    """Each of their parameters beside ours of the same role (by the conversion's mapping): std, mean, absmax."""
    rows = []
    for theirs, ours in mapping.items():
        if ours in our_stats:
            rows.append({"theirs": theirs, "ours": ours, "their": their_stats[theirs], "our": our_stats[ours]})
    return rows


def lead(curves: dict[str, list[list[float]]], block: str, base: str = "pre_ln") -> dict[str, Any]:
    """The relative difference of `block`'s tail training loss from `base`'s, per seed (negative: `block` ahead)."""
    per_seed = [tail_loss(b) / tail_loss(a) - 1 for a, b in zip(curves[base], curves[block])]
    return {"per_seed": per_seed, "mean": statistics.fmean(per_seed)}


# -- tables ----------------------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%".replace("-", "−")


def _common(values: list) -> Any:
    if len(set(values)) != 1:
        raise ValueError(f"the blocks' runs differ in length: {values}")
    return values[0]


def _sci(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:.1e}".replace("e-0", "e-").replace("-", "−")


def exact_table(result: dict[str, Any]) -> str:
    steps = _common([row["ours_vs_theirs_torch_adamw"]["steps"] for row in result["exact"].values()])
    steps64 = _common([row["float64"]["steps"] for row in result["exact"].values()])
    lines = [
        f"| block | float64, step 1 | float64, {steps64} steps | float32, {steps} steps (at step) "
        "| float32, first 100 steps "
        "| float32: Δ final eval loss | float32: ours against theirs with their script's AdamW "
        "| float32: theirs, their script's AdamW against torch's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for block, row in result["exact"].items():
        same = row["ours_vs_theirs_torch_adamw"]
        lines.append(
            f"| {block} | {_sci(row['float64']['first_step_abs'])} | {_sci(row['float64']['max_abs'])} | "
            f"{_sci(same['max_abs'])} ({same['at_step']}) | "
            f"{_sci(same['first_100_max_abs'])} | {_sci(row['eval_difference'])} | "
            f"{_sci(row['ours_vs_theirs_hf_adamw']['max_abs'])} | {_sci(row['their_adamw_hf_vs_torch']['max_abs'])} |"
        )
    return "\n".join(lines)


def _seeds(values: list[float], fmt=_pct) -> str:
    return ", ".join(fmt(x) for x in values)


def _lead(d: dict[str, Any]) -> str:
    """A lead as the tables write it: its mean and, in brackets, each seed's."""
    return f"{_pct(d['mean'])} ({_seeds(d['per_seed'])})"


def _lr(x: float) -> str:
    """An lr as the docs write it: 1e-3, 2.5e-4, 1.6e-2."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


#: the study's models by the name the tables give them
CODES = {"theirs": "theirs", "ours/authors": "ours, the authors' configuration", "ours/preset": "ours, our preset"}


def _model_key(study: dict[str, Any], code: str, block: str) -> str:
    """The study's model key of `code` (a `CODES` key) for `block`."""
    if code == "theirs":
        return f"theirs/{block}"
    rows = study["walk"][block]
    return f"ours/{block}/{(rows[-1] if code == 'ours/authors' else rows[0])['step']}"


def sweep_cell(sweep: dict[str, Any]) -> tuple[str, str]:
    """(the chosen lr with its training loss at the end, the lrs either side with theirs)."""
    points = {float(lr): t for lr, t in sweep["points"].items()}
    lrs, chosen = sorted(points), sweep["chosen"]
    i = lrs.index(chosen)
    loss = lambda lr: "diverged" if not math.isfinite(points[lr]) else f"{points[lr]:.3f}"  # noqa: E731
    near = [
        f"{_lr(lr)} ({loss(lr)})" for lr in (lrs[i - 1] if i else None, lrs[i + 1] if i + 1 < len(lrs) else None) if lr
    ]
    return f"{_lr(chosen)} ({loss(chosen)})", ", ".join(near) + ("" if sweep["bracketed"] else " (not bracketed)")


def sweep_table(result: dict[str, Any]) -> str:
    """Each block's chosen lr in their code, in this project's code in their configuration and in this project's
    preset, with the lrs that bracket it."""
    study = result["study"]
    lines = ["| block | model | chosen lr (training loss at the end) | bracketed by |", "|---|---|---|---|"]
    for block in study["walk"]:
        for code, label in CODES.items():
            chosen, near = sweep_cell(study["sweeps"][_model_key(study, code, block)])
            lines.append(f"| {block} | {label} | {chosen} | {near} |")
    return "\n".join(lines)


def leads_table(result: dict[str, Any]) -> str:
    """The lead over the same model's Pre-LN (tail training loss, each block at its own chosen lr), per code."""
    study = result["study"]
    lines = [
        "| model | SAS: lead over Pre-LN (seeds) | SAS-P: lead over Pre-LN (seeds) | V-SkipInit: lead over Pre-LN (seeds) |",
        "|---|---|---|---|",
    ]
    keys = {"theirs": "theirs", "ours/authors": f"ours/{_last_step(study)}", "ours/preset": "ours/preset"}
    for code, label in CODES.items():
        leads = study["leads"][keys[code]]
        cells = [_lead(leads[b]) for b in ("sas", "sas_p")] + [_lead(study["value_skipinit"][code])]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _last_step(study: dict[str, Any]) -> str:
    """The walk's last step (every walked block is then in the authors' configuration)."""
    return study["effects"]["sas"][-1]["difference"]


def walk_table(result: dict[str, Any]) -> str:
    """The walk from this project's presets to the authors' configuration: after each difference, each block's
    chosen lr, and SAS's and SAS-P's lead over Pre-LN with the difference's effect on it (per seed)."""
    study = result["study"]
    labels = {"preset": "this project's preset"} | {
        r["step"]: r["label"] for rows in study["walk"].values() for r in rows[1:]
    }
    lines = [
        "| after | chosen lr: pre_ln, sas, sas_p | SAS's lead (seeds) | its change (seeds) "
        "| SAS-P's lead (seeds) | its change (seeds) |",
        "|---|---|---|---|---|---|",
    ]
    steps = ["preset", *(row["difference"] for row in study["effects"]["sas"])]
    for i, step in enumerate(steps):
        lrs = []
        for block in ("pre_ln", "sas", "sas_p"):
            key = _step_key(study, block, step)
            lrs.append(_lr(study["sweeps"][key]["chosen"]))
        cells = []
        for block in ("sas", "sas_p"):
            lead = study["leads"][f"ours/{step}"][block]
            if i == 0:
                cells += [_lead(lead), "—"]
            else:
                row = study["effects"][block][i - 1]
                change = (
                    "none (same models)"
                    if not row["changes"]
                    else _lead({"mean": row["effect_mean"], "per_seed": row["effect_per_seed"]})
                )
                cells += [_lead(lead), change]
        lines.append(f"| {labels[step]} | {', '.join(lrs)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _step_key(study: dict[str, Any], block: str, step: str) -> str:
    """The model key of `block`'s walk in force after `step`."""
    order = ["preset", *(row["difference"] for row in study["effects"]["sas"])]
    rows = [r for r in study["walk"][block] if order.index(r["step"]) <= order.index(step)]
    return f"ours/{block}/{rows[-1]['step']}"


def parity_table(result: dict[str, Any]) -> str:
    """Initialisation parity: their code and ours in their configuration, each from its own initialisation."""
    study = result["study"]
    lines = [
        "| block | lr | theirs: training loss at the end (seeds) | ours: (seeds) | steps where the codes' means differ "
        "by less than the seeds' spread | largest excess over the spread (at step) |",
        "|---|---|---|---|---|---|",
    ]
    for row in study["init_parity"]:
        tails = [_seeds(row["tail_loss"][c], lambda x: f"{x:.3f}") for c in ("theirs", "ours")]
        worst = row["worst"]
        excess = abs(worst["difference"]) - worst["spread"]
        beyond = "none" if excess <= 0 else f"{excess:.3f} ({worst['step']})"
        lines.append(
            f"| {row['block']} | {_lr(row['lr'])} | {tails[0]} | {tails[1]} | {row['steps_within_spread']} of "
            f"{row['steps']} | {beyond} |"
        )
    return "\n".join(lines)


def _role(name: str) -> str:
    return re.sub(r"\.(h|layers)\.\d+\.", ".*.", name)


def _describe(stats: list[dict]) -> str:
    """A role's initial values over its layers: the constant, or the std (a range where layers differ)."""
    if all(s["std"] == 0.0 for s in stats):
        values = sorted({round(s["mean"], 4) for s in stats})
        return "= " + ", ".join(f"{v:g}" for v in values)
    stds = sorted({f"{s['std']:.2g}" for s in stats}, key=float)  # two figures: the draws' own spread is ~1%
    return "std " + (stds[0] if len(stds) == 1 else f"{stds[0]}–{stds[-1]}")


def differing_roles(rows: list[dict]) -> list[tuple[str, str, str]]:
    """(our parameter role, their initial values, ours) for the roles of a `compare_init` list whose initial values
    differ (a role stands for its layers)."""
    roles: dict[str, dict[str, list]] = {}
    for row in rows:
        entry = roles.setdefault(_role(row["ours"]), {"their": [], "our": []})
        entry["their"].append(row["their"])
        entry["our"].append(row["our"])
    described = ((role, _describe(e["their"]), _describe(e["our"])) for role, e in roles.items())
    return [(role, theirs, ours) for role, theirs, ours in described if theirs != ours]


def init_rows(result: dict[str, Any], block: str) -> list[tuple[str, str, str]]:
    """(our parameter role, their initial values, ours) for the roles whose initialisation differs between their
    model and this project's block preset, and the trainable roles that exist on one side only."""
    init = result["init"][block]
    rows = differing_roles(init["theirs_vs_our_preset"])
    params = result["parameter_groups"][block]["their_parameters"]
    used = [n for n in init["only_theirs"] if params[n]["trainable"] and params[n].get("updated", True)]
    only_theirs = sorted({_role(n) for n in used})
    only_ours = sorted({_role(n) for n in init["only_ours"]})
    rows += [
        (f"{r} (theirs only)", _describe([params[n]["init"] for n in used if _role(n) == r]), "—") for r in only_theirs
    ]
    rows += [
        (f"{r} (ours only)", "—", _describe([s for n, s in init["only_ours"].items() if _role(n) == r]))
        for r in only_ours
    ]
    return rows


def init_table(result: dict[str, Any]) -> str:
    lines = ["| block | parameter | their initialisation | this project's preset |", "|---|---|---|---|"]
    for block in result["init"]:
        for role, theirs, ours in init_rows(result, block):
            lines.append(f"| {block} | `{role}` | {theirs} | {ours} |")
    return "\n".join(lines)
