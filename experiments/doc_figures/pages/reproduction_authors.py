"""docs/reproduction.md's and the README's results on the authors' configuration: the headline claims trained in it
(`codeparrot-tiny-authors`), and the training parity with the authors' code (`python -m experiments.authors_parity`):
exact parity, the parameter groups and initial weights, their blocks tuned, the initialisation parity in their
configuration, the walk from this project's presets to it, and the long probe."""

from __future__ import annotations

from typing import Any

from experiments.authors_parity import results as parity
from experiments.authors_parity.study import LONG_LR, PLATEAU_MARGIN, PLATEAU_WINDOW
from modeling_simplified.training.presets import load_preset

from ..claims import CLAIM_LABELS, claim, claim_gaps, family_steps, matched, which_way
from ..data import AUTHORS, reproduction
from ..registry import block, facts
from ..text import COUNTS, common, lr_text, num, span, verdict_word

PAGE, README = "docs/reproduction.md", "README.md"
#: the headline family: the paper's model as the authors' code defines it, at the codeparrot-tiny shape
FAMILY, PRESETS = "codeparrot-tiny-authors", "codeparrot-tiny"

# the parity package's tables
for name, render in {
    "exact": parity.exact_table,
    "init": parity.init_table,
    "sweeps": parity.sweep_table,
    "leads": parity.leads_table,
    "walk": parity.walk_table,
    "parity": parity.parity_table,
}.items():
    block(f"reproduction-authors-{name}")(lambda render=render: render(reproduction(AUTHORS)))


@facts(PAGE)
def exact() -> list[str]:
    """The exact-parity runs ("Exact parity")."""
    r = reproduction(AUTHORS)
    sci = parity._sci
    rows = r["exact"]
    simplified = [b for b in rows if b != "pre_ln"]
    hf = [row["their_adamw_hf_vs_torch"]["max_abs"] for row in rows.values()]
    steps = common([row["ours_vs_theirs_torch_adamw"]["steps"] for row in rows.values()])
    groups = [row["comparison"] for row in r["parameter_groups"].values()]
    return [
        f"agree to within {sci(max(row['float64']['max_abs'] for row in rows.values()))} nats for "
        f"{common([row['float64']['steps'] for row in rows.values()])} steps in every block, and the "
        + (
            "lr is the same"
            if all(row["lr_max_abs_difference"] == 0 for row in rows.values())
            else "lr is NOT the same"
        )
        + " at every step",
        f"after {steps} steps the simplified blocks differ by at most "
        f"{sci(max(rows[b]['ours_vs_theirs_torch_adamw']['max_abs'] for b in simplified))} and Pre-LN by "
        f"{sci(rows['pre_ln']['ours_vs_theirs_torch_adamw']['max_abs'])}",
        f"moves their own float32 curves by {sci(min(hf))}–{sci(max(hf))} within {steps} steps",
        "a difference training then amplifies, "
        f"{CLAIM_LABELS[max(simplified, key=lambda b: rows[b]['float64']['max_abs'])]}'s the most",
        f"in all {COUNTS[len(groups)]} blocks it is {'the same' if not any(c['differ'] for c in groups) else 'NOT the same'} "
        f"for every parameter, and {'no' if not any(c[f'trainable_only_{s}'] for c in groups for s in ('theirs', 'ours')) else 'NOT no'} "
        "parameter trains on one side only",
    ]


def verdict(result: dict[str, Any], setting: str, name: str) -> str:
    """A claim's verdict and which block ended ahead: "did not hold: SAS-P ahead of Pre-LN by 2.4% (seeds ...)"."""
    row = claim(result, setting, name)
    return f"{verdict_word(row['verdict'])}: {which_way(row)}"


def lead_added(name: str) -> str:
    """How many points of a per-step claim's gap (at each block's best lr, seed means) the presets add to the authors'
    configuration's: positive where the presets' block is further ahead."""
    ours, theirs = (claim_gaps(claim(reproduction(f), "best_lr", name))[0] for f in (PRESETS, FAMILY))
    return num(theirs - ours, 1)


def _lead(d: dict[str, Any]) -> str:
    return f"{parity._pct(d['mean'])} ({', '.join(parity._pct(x) for x in d['per_seed'])})"


@facts(PAGE)
@facts(README)
def headline() -> list[str]:
    """The headline claims in the authors' configuration, and the lead this project's presets add."""
    r = reproduction(FAMILY)
    within, ahead = "within 2% of Pre-LN at equal steps", "ahead of Pre-LN at equal time"
    return [
        f"SAS within 2% of Pre-LN per step (Fig. 23) is {verdict(r, 'best_lr', f'SAS {within}')}",
        f"SAS-P within 2% {verdict(r, 'best_lr', f'SAS-P {within}')}",
        f"SAS ahead of Pre-LN at equal measured time (Fig. 5) {verdict(r, 'best_lr', f'SAS {ahead}')}",
        f"SAS-P ahead of Pre-LN at equal measured time {verdict(r, 'best_lr', f'SAS-P {ahead}')}",
        f"the presets add {lead_added(f'SAS {within}')} and {lead_added(f'SAS-P {within}')} points",
    ]


@facts(PAGE)
def headline_details() -> list[str]:
    r, presets = reproduction(FAMILY), reproduction(PRESETS)
    lrs = r["lrs"]["best_lr"]
    preset = load_preset(f"{FAMILY}-pre_ln")
    within = "SAS-P within 2% of Pre-LN at equal steps"
    gaps = [-claim_gaps(claim(x, "best_lr", within))[0] for x in (r, presets)]
    learned = all(row["bracketed"] for row in r["lr_sweep"].values())
    ahead = "ahead of" if gaps[0] > 0 else "NOT ahead of"
    timed = claim(r, "best_lr", "SAS-P ahead of Pre-LN at equal time")["verdict"]
    return [
        f"every sweep {'bracketed' if learned else 'did NOT all bracket'} its best lr: Pre-LN at "
        f"{lr_text(lrs['pre_ln'])}, SAS and SAS-P at {lr_text(common([lrs['sas'], lrs['sas_p']]))}",
        f"at Pre-LN's lr ({lr_text(r['lrs']['shared_lr'])}) SAS-P ahead of Pre-LN at equal time "
        f"{verdict(r, 'shared_lr', 'SAS-P ahead of Pre-LN at equal time')}",
        f"SAS-P ahead of SAS at equal time {verdict(r, 'best_lr', 'SAS-P ahead of SAS at equal time')}",
        f"{family_steps(r)} steps of {preset.training.per_device_train_batch_size} × {preset.data.seq_len} tokens), "
        "the same",
        f"SAS-P is slightly {ahead} Pre-LN per step at its own best lr ({matched([claim(r, 'best_lr', within)['verdict']], '*')}: by "
        f"{num(gaps[0], 1)}%, against {num(gaps[1], 1)}% in this project's presets) "
        + ("and" if timed == "held" else "but NOT")
        + " at equal measured time",
        f"{'Most' if 0 < gaps[0] < gaps[1] / 2 else 'NOT most'} of that lead is the presets' own: in the authors' "
        f"configuration the same protocol finds SAS-P {ahead} Pre-LN by {num(gaps[0], 1)}% at its own best lr, "
        f"against {num(gaps[1], 1)}% here",
    ]


@facts(PAGE)
def study() -> list[str]:
    """The parity study's prose: sweeps, leads, initialisation parity, the walk, the long probe."""
    r = reproduction(AUTHORS)
    s = r["study"]
    sweeps, leads = s["sweeps"], s["leads"]
    every = all(row["bracketed"] for row in sweeps.values())
    theirs = {b: sweeps[f"theirs/{b}"]["chosen"] for b in s["walk"]}
    last = s["effects"]["sas"][-1]["difference"]
    ours = {b: sweeps[f"ours/{b}/{s['walk'][b][-1]['step']}"]["chosen"] for b in s["walk"]}
    parity_at = {(row["block"], row["lr"]): row for row in s["init_parity"]}
    script = min(lr for _, lr in parity_at)
    chosen = common(list(theirs.values()))
    sas_low, sas_high = (parity_at["sas", lr] for lr in (script, chosen))
    apart = [(b, lr) for (b, lr), row in parity_at.items() if not row["tail_ranges_overlap"]]
    walk = {b: {row["difference"]: row for row in s["effects"][b]} for b in ("sas", "sas_p")}
    others = [row for b in walk for d, row in walk[b].items() if d != "positions" and row["changes"]]
    long = s["long"]["runs"]
    differing = [
        b for b, init in r["init"].items() if parity.differing_roles(init["theirs_vs_ours_in_their_configuration"])
    ]
    within = [row["steps_within_spread"] for (b, lr), row in parity_at.items() if lr == chosen]
    ratio = max(
        sweeps[f"ours/{b}/preset"]["chosen"] / sweeps[f"ours/{b}/{s['walk'][b][-1]['step']}"]["chosen"]
        for b in s["walk"]
    )
    return [
        f"this project's presets chose up to {ratio:g}× more",
        f"the study's {len(s['runs'])} runs, two at a time",
        "its lrs start at " + ", ".join(lr_text(lr) for lr in s["grid"]) + " and grow",
        f"At lr {lr_text(LONG_LR)} both codes' SAS in their configuration sit on the unigram plateau for the whole "
        f"miniature (the sweep table: {span([sweeps[k]['points'][f'{LONG_LR:g}'] for k in ('theirs/sas', f'ours/sas/{last}')])} in both)",
        f"the mean of its last {PLATEAU_WINDOW} training losses",
        f"Every sweep of both codes {'bracketed' if every else 'did NOT bracket'} its chosen lr",
        f"every block chose {lr_text(chosen)} in their code and "
        + ("the same" if ours == theirs else "NOT the same")
        + " in this code in their configuration",
        f"their SAS ends {_way(leads['theirs']['sas'])} their Pre-LN ({_lead(leads['theirs']['sas'])}) and their SAS-P "
        f"{_way(leads['theirs']['sas_p'])} it ({_lead(leads['theirs']['sas_p'])})",
        f"this code in their configuration: SAS {_lead(leads[f'ours/{last}']['sas'])}, SAS-P "
        f"{_lead(leads[f'ours/{last}']['sas_p'])}",
        f"{'no' if not differing else COUNTS[len(differing)]} parameter role whose initial values differ from theirs",
        f"at their chosen lr ({lr_text(chosen)}) the two codes' seed means differ by less than the seeds' spread at "
        f"{span(within, 0)} of {common([row['steps'] for row in s['init_parity']])} steps in every block",
        f"their SAS's training loss at the end spans {span(sas_high['tail_loss']['theirs'])} and ours "
        f"{span(sas_high['tail_loss']['ours'])}",
        f"at {lr_text(script)} this code's SAS ends "
        + (
            "lower"
            if all(o < t for o, t in zip(*(sas_low["tail_loss"][c] for c in ("ours", "theirs"))))
            else "NOT lower"
        )
        + f" in every seed ({span(sas_low['tail_loss']['ours'])} against "
        f"{span(sas_low['tail_loss']['theirs'])}; within the seeds' spread at {sas_low['steps_within_spread']} of "
        f"{sas_low['steps']} steps)",
        "the ranges are apart only for " + (", ".join(f"{b} at {lr_text(lr)}" for b, lr in apart) or "NONE"),
        f"learned positions take {num(100 * walk['sas']['positions']['effect_mean'], 1)} points off SAS's lead "
        f"(seeds {', '.join(num(100 * x, 1) for x in walk['sas']['positions']['effect_per_seed'])}) and "
        f"{num(100 * walk['sas_p']['positions']['effect_mean'], 1)} off SAS-P's (seeds "
        f"{', '.join(num(100 * x, 1) for x in walk['sas_p']['positions']['effect_per_seed'])})",
        f"every other difference moves either lead by at most {num(100 * max(abs(r['effect_mean']) for r in others), 1)} "
        f"points on the seed means ({num(100 * max(abs(x) for r in others for x in r['effect_per_seed']), 1)} in "
        "one seed)",
        f"sits on the unigram plateau for all {r['setting']['steps']} steps in "
        + ("both seeds" if all(x["short_leaves_plateau_at"] is None for x in long) else "NOT both seeds")
        + f", leaves it at steps {' and '.join(str(x['leaves_plateau_at']) for x in long)} of a "
        f"{s['long']['steps']}-step run and ends at {' and '.join(num(x['tail_loss']) for x in long)}",
        f"{num(PLATEAU_MARGIN, 1)} nats below the unigram level of the training tokens "
        f"({num(s['levels']['train_unigram'])})",
    ]


def _way(lead: dict[str, Any]) -> str:
    """Where a lead puts the block against Pre-LN: behind in every seed, ahead in every seed, or neither."""
    seeds = lead["per_seed"]
    return (
        "behind"
        if all(x > 0 for x in seeds)
        else "ahead of"
        if all(x < 0 for x in seeds)
        else "NEITHER ahead of nor behind"
    )


def positions_share() -> str:
    """How much of the walk's change to SAS's and SAS-P's lead the learned positions carry: "most" where they carry
    more than half of it for both blocks."""
    s = reproduction(AUTHORS)["study"]
    shares = []
    for b in ("sas", "sas_p"):
        effects = {row["difference"]: row for row in s["effects"][b]}
        last = s["effects"][b][-1]["difference"]
        total = s["leads"][f"ours/{last}"][b]["mean"] - s["leads"]["ours/preset"][b]["mean"]
        shares.append(effects["positions"]["effect_mean"] / total)
    return "most" if all(x > 0.5 for x in shares) else "NOT most"


@facts(README)
def positions_in_readme() -> list[str]:
    return [f"lead over Pre-LN, {positions_share()} of it from the positions"]


@facts("CHANGELOG.md")
def study_in_changelog() -> list[str]:
    """The CHANGELOG's entry for the study: its seeds, the walk's sweeps, the long probe, what the positions carry."""
    r = reproduction(AUTHORS)
    s = r["study"]
    every = all(row["bracketed"] for key, row in s["sweeps"].items() if key.startswith("ours/"))
    longer = s["long"]["steps"] > r["setting"]["steps"]
    return [
        f"from each one's own initialisation ({COUNTS[len(s['parity_seeds'])]} seeds)",
        f"one difference at a time (each step's lr {'bracketed' if every else 'NOT bracketed'}, "
        f"{COUNTS[len(s['seeds'])]} seeds), and a {'longer' if longer else 'NOT longer'} run of their SAS",
        f"Learned positions carry {positions_share()} of the presets' lead",
    ]
