"""docs/reproduction.md's results besides the depth family: the two block comparisons in miniature (causal and
masked LM: lr sweeps, final losses, the paper's claims), RaPTr, fine-tuning on MR, and the training parity with the
authors' code."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from experiments.authors_parity import results as authors_parity
from experiments.reproduce.analysis import Z

from .. import glue_miniature
from ..claims import (
    CLAIM_LABELS,
    SETTINGS,
    ahead_by,
    bracketed,
    claim,
    claim_gaps,
    family_steps,
    in_both,
    matched,
    raptr_lead,
    training_hours,
    way,
    which_way,
)
from ..data import AUTHORS, reproduction
from ..registry import block, facts, table
from ..text import COUNTS, common, lr_text, num, seeds_text, signed, span, verdict_word

PAGE = "docs/reproduction.md"
#: He & Hofmann's Table 1: micro-batch steps per 24 hours against Pre-LN's (2080Ti), a quoted constant
PAPER_TABLE1_SPEED = {"pre_ln": "1", "parallel": "1.05", "sas": "1.09", "sas_p": "1.16", "simplest": "1.20"}
#: the RaPTr comparisons as the tables name them
RAPTR_SETTINGS = {
    "equal_steps": "equal steps",
    "equal_flops": "equal layer FLOPs",
    "same_schedule": "equal steps, the full model on RaPTr's stagewise lr schedule too",
}


def claim_cell(row: dict[str, Any]) -> str:
    """A claim's verdict and which way it went: "**did not hold**: SAS ahead of Pre-LN by 11.2% (seeds 9.9%,
    12.5%), not matched" (a claim of a match that did not hold says so)."""
    if row["verdict"] == "not run":
        return "not run"
    word = row["verdict"].replace("did NOT hold", "did not hold")
    unmatched = ", not matched" if word == "did not hold" and " within " in row["claim"] else ""
    word = f"**{word}**" if word in ("held", "did not hold") else word
    return f"{word}: {which_way(row)}{unmatched}"


def claims_table(family: str) -> str:
    result = reproduction(family)
    rows = [
        [f"{best['claim']} ({best['source']})", claim_cell(best), claim_cell(claim(result, "shared_lr", best["claim"]))]
        for best in result["settings"]["best_lr"]["claims"]
    ]
    return table(["claim (where the paper makes it: its sentence)", "its best lr", "Pre-LN's lr"], rows)


def _sweep_cell(lr: float, loss: float) -> str:
    return f"{lr_text(lr)} ({'diverged' if loss == float('inf') else num(loss)})"


def sweep_cells(row: dict[str, Any]) -> list[str]:
    """A variant's chosen lr and the lrs either side of it, with the training loss at the end (criterion seed)."""
    seed = str(row["criterion_seed"])
    loss = {p["lr"]: p["train_loss_end"][seed] for p in row["points"] if p["swept"]}
    below = [lr for lr in sorted(loss) if lr < row["chosen"]]
    above = [lr for lr in sorted(loss) if lr > row["chosen"]]
    sides = ", ".join(_sweep_cell(lr, loss[lr]) for lr in (below[-1:] + above[:1]))
    return [_sweep_cell(row["chosen"], loss[row["chosen"]]), sides if row["bracketed"] else "NOT bracketed"]


def sweep_table(family: str) -> str:
    """Each variant's chosen lr and the lrs either side of it, with the training loss at the end (seed 0)."""
    rows = [[name, *sweep_cells(row)] for name, row in reproduction(family)["lr_sweep"].items()]
    return table(["variant", "chosen lr", "bracketed by (training loss at the end)"], rows)


def final_cell(table_rows: dict[str, Any], name: str) -> str:
    """A variant's final eval loss: mean [per seed]."""
    row = table_rows[name]
    return f"{num(row['eval_loss@100%'][0])} [{', '.join(num(v) for v in row['eval_loss_per_seed'])}]"


def eval_table(family: str) -> str:
    """Final eval loss, mean [per seed], at each variant's best lr and at Pre-LN's; the causal side adds the
    generalisation gap, the masked side the measured speed beside Table 1's."""
    result = reproduction(family)
    best, shared = (result["settings"][s]["table"] for s in SETTINGS)
    causal = result["task"] == "causal-lm"
    head = ["variant", "at its best lr", f"at Pre-LN's lr ({lr_text(result['lrs']['shared_lr'])})"]
    head += ["gap at its best lr"] if causal else ["speed vs pre_ln", "Table 1's speed"]
    rows = []
    for name in best:
        same = best[name]["learning_rate"] == result["lrs"]["shared_lr"]
        cells = [name, final_cell(best, name), "(the same runs)" if same else final_cell(shared, name)]
        if causal:
            cells.append(num(best[name]["generalisation_gap"][0], 2))
        else:
            speed = result["timing"]["variants"][name]["speed_vs_pre_ln"]
            low_high = span([speed["ratio_low"], speed["ratio_high"]])
            cells.append("1" if name == "pre_ln" else f"{num(speed['ratio_median'])} ({low_high})")
            cells.append(PAPER_TABLE1_SPEED[name])
        rows.append(cells)
    return table(head, rows)


def _register(family: str, side: str) -> None:
    """A comparison's three tables: its lr sweep, final losses and claims."""
    block(f"reproduction-{side}-sweep")(lambda: sweep_table(family))
    block(f"reproduction-{side}-eval")(lambda: eval_table(family))
    block(f"reproduction-{side}-claims")(lambda: claims_table(family))


_register("codeparrot-tiny-authors", "causal-authors")
_register("codeparrot-tiny", "causal")
_register("crammed-bert-tiny", "mlm")


@block("reproduction-raptr")
def raptr_table() -> str:
    rows = []
    for key, row in reproduction("codeparrot-tiny")["raptr"].items():
        row_steps = row["steps"]
        flops = ", ".join(num(x) for x in row["realised_relative_flops"])
        setting = (
            f"{RAPTR_SETTINGS[key]}, {row_steps['full']} full / {row_steps['raptr']} RaPTr steps "
            f"(realised layer FLOPs {flops})"
        )
        paper = row["paper"].split(". Not as in the paper")[0]
        losses = "; ".join(f"{num(f)} → {num(r)}" for f, r in zip(row["full_loss"], row["raptr_loss"]))
        gaps = f"{num(row['raptr_minus_full_mean'])} ({', '.join(num(d) for d in row['raptr_minus_full'])})"
        rows.append([setting, paper, losses, gaps])
    head = ["setting", "the paper", "full → RaPTr, final eval loss (seed 0; seed 1)", "RaPTr − full: mean (per seed)"]
    return table(head, rows)


#: the GLUE miniature's runs and verdicts, as docs/fine_tuning.md states them too
facts(PAGE)(glue_miniature.statements)


@block("reproduction-finetune")
def finetune_table() -> str:
    rows = []
    for name, row in reproduction("crammed-bert-tiny")["finetune"]["table"].items():
        label = "pre_ln from scratch (the control)" if name == "pre_ln_from_scratch" else name
        accuracy = f"{num(row['accuracy'][0], 2)} [{', '.join(num(a, 2) for a in row['accuracy_per_seed'])}]"
        rows.append([label, accuracy, ", ".join(num(v, 2) for v in row["eval_loss_per_seed"])])
    return table(["variant", "accuracy %, mean [seed 0, seed 1]", "final eval loss (seed 0, seed 1)"], rows)


@facts(PAGE)
def results() -> list[str]:
    cp, mlm = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny")
    best = cp["settings"]["best_lr"]["table"]
    lrs, shared_lr = cp["lrs"]["best_lr"], cp["lrs"]["shared_lr"]
    timing = cp["timing"]
    speed = {n: v["speed_vs_pre_ln"] for n, v in timing["variants"].items()}
    sweep_sizes = [len(row["points"]) for r in (cp, mlm) for row in r["lr_sweep"].values()]
    gap = {n: row["generalisation_gap"][0] for n, row in best.items()}
    simplified = ("sas", "sas_p", "simplest")
    sas_sweep = {p["lr"]: p["train_loss_end"] for p in cp["lr_sweep"]["sas"]["points"]}
    within = {s: [ahead_by(cp, s, f"{b} within 2% of Pre-LN") for b in ("SAS", "SAS-P")] for s in SETTINGS}
    init = cp["signal_propagation"]["sas_softmax"]["init"]
    raptr = cp["raptr"]
    mlm_gaps = [g for s in SETTINGS for row in mlm["settings"][s]["table"].values() for g in row["gap_per_seed"]]
    mlm_lr_ratio = common([f"{mlm['lrs']['best_lr'][n] / mlm['lrs']['shared_lr']:g}" for n in simplified])
    mlm_ahead = {s: [ahead_by(mlm, s, f"{b} within 2%")[0] for b in ("SAS", "SAS-P")] for s in SETTINGS}
    finetune = mlm["finetune"]
    helped = finetune["pretraining_helped"]
    tuned_verdict = common([verdict_word(c["verdict"]) for c in finetune["claims"]])
    tuned = finetune["table"]
    pretrained_losses = [v for n, row in tuned.items() if n != "pre_ln_from_scratch" for v in row["eval_loss_per_seed"]]
    behind = [-d for c in finetune["claims"] for d in c["difference_per_seed"]]
    significant = sum(
        abs(d) > Z * e for c in finetune["claims"] for d, e in zip(c["difference_per_seed"], c["standard_error"])
    )
    return [
        f"All {COUNTS[len(cp['lr_sweep'])]} variants",
        f"ablation) {bracketed(cp)} their best lr",
        f"Every sweep {bracketed(mlm)} its best lr",
        f"{timing['warmup']} warm-up and {timing['rounds']} timed steps",
        f"{cp['runs'][0]['steps']} steps of {timing['batch']} × {timing['seq']} tokens "
        f"({cp['runs'][0]['tokens_seen'] / 1e6:.1f}M tokens)",
        f"Every causal run sees {common([num(r['epochs'], 2) for r in cp['runs']])} epochs",
        f"the final eval loss sits {span(list(gap.values()), 2)} nats above the training loss at the end "
        f"({num(gap['pre_ln'], 2)} for Pre-LN, {span([gap[n] for n in simplified], 2)} for SAS, SAS-P and "
        "simplest;",
        f"(each variant had {min(sweep_sizes)} to {max(sweep_sizes)} lrs to choose from)",
        f"the validation split ({common([row['eval_examples'] for row in tuned.values()])})",
        "App. D.1's finding that SAS and SAS-P share Pre-LN's best lr "
        f"**{'held' if lrs['sas'] == lrs['sas_p'] == shared_lr else 'did not hold'} here**",
        f"their best lrs are {lrs['sas'] / shared_lr:g}× and {lrs['sas_p'] / shared_lr:g}× Pre-LN's, "
        f"and at Pre-LN's {lr_text(shared_lr)} both seeds of each lie above their best (SAS "
        f"{num(sas_sweep[shared_lr]['0'])} / {num(sas_sweep[shared_lr]['1'])} against "
        f"{num(sas_sweep[lrs['sas']]['0'])} / {num(sas_sweep[lrs['sas']]['1'])})",
        f"median of {timing['rounds']} rounds (range): sas {num(speed['sas']['ratio_median'])} "
        f"({span([speed['sas']['ratio_low'], speed['sas']['ratio_high']])}), sas_p "
        f"{num(speed['sas_p']['ratio_median'])} ({span([speed['sas_p']['ratio_low'], speed['sas_p']['ratio_high']])}), "
        f"simplest {num(speed['simplest']['ratio_median'])}, parallel {num(speed['parallel']['ratio_median'])}, "
        f"normformer {num(speed['normformer']['ratio_median'])}; the per-variant spread over rounds is "
        f"{span([100 * v['spread'] for v in timing['variants'].values()], 0)}%",
        f"by {span([float(m.replace('−', '-')) for m, _ in within['shared_lr']], 1)}% on the seed means at Pre-LN's lr "
        f"({span([float(g.replace('−', '-')) for _, gs in within['shared_lr'] for g in gs], 1)}% per seed) and by "
        f"{span([float(m.replace('−', '-')) for m, _ in within['best_lr']], 1)}% at their own best lrs "
        f"({span([float(g.replace('−', '-')) for _, gs in within['best_lr'] for g in gs], 1)}% per seed)",
        f"the gap is {num(gap['pre_ln'], 2)} nats for Pre-LN and {span([gap[n] for n in simplified], 2)} "
        "for the simplified blocks",
        f"(mean cosine similarity {num(init[0], 2)} after the first block, {num(init[-1], 2)} after the "
        f"fourth, against {span(cp['signal_propagation']['sas']['init'])} for SAS",
        f"{raptr_lead()} of the full model in every setting and seed",
        f"the lead shrinks to {num(raptr['same_schedule']['raptr_minus_full'][0])} in seed 0",
        f"The full-model seeds differ by {num(abs(raptr['equal_steps']['full_loss'][1] - raptr['equal_steps']['full_loss'][0]), 2)}",
        f"the simplified blocks' best lr is {mlm_lr_ratio}× Pre-LN's, "
        + ("not equal to it" if mlm_lr_ratio != "1" else "equal to it"),
        f"every run passes over it {common([num(r['epochs'], 2) for r in mlm['runs']])} times, and the final "
        f"MLM eval loss sits within {num(max(map(abs, mlm_gaps)), 2)} nats of the training loss at the end "
        f"({num(min(mlm_gaps), 2)} to {signed(max(mlm_gaps), 2)})",
        f"(SAS {mlm_ahead['best_lr'][0]}%, SAS-P {mlm_ahead['best_lr'][1]}% on the seed means); at Pre-LN's "
        f"lr they are {mlm_ahead['shared_lr'][0]}% and {mlm_ahead['shared_lr'][1]}% ahead and the verdicts are "
        + common([verdict_word(claim(mlm, "shared_lr", f"{b} within 2%")["verdict"]) for b in ("SAS", "SAS-P")]),
        f"the measured step speed against pre_ln (median of {mlm['timing']['rounds']} rounds, range)",
        "each variant's pretrained runs of seeds "
        + seeds_text([str(s) for s in common([tuple(row["seeds"]) for row in tuned.values()])])
        + " at its best lr, each fine-tuned once with the same seed, and as the control pre_ln's architecture and "
        "tokenizer from scratch with the same seeds",
        f"validation accuracy ({common([row['eval_examples'] for row in tuned.values()])} sentences, majority "
        f"class {common([row['majority_baseline'] for row in tuned.values()]):.0f}%)",
        "scratch ("
        + " and ".join(
            f"{num(d, 2)} ± {Z * e:.1f}" for d, e in zip(helped["pre_ln_minus_from_scratch"], helped["standard_error"])
        )
        + f" points at {Z:g} standard errors)",
        f"Pre-training did {'not ' if not helped['on_every_seed'] else ''}help accuracy",
        f"at an eval loss of {span(pretrained_losses, 2)}, the control at "
        f"{span(tuned['pre_ln_from_scratch']['eval_loss_per_seed'], 2)}",
        f"is **{tuned_verdict}**{'' if tuned_verdict.endswith(' here') else ' here'} for both: SAS and "
        f"SAS-P end {span(behind, 1)} points below pre_ln (significant on {COUNTS[significant]} of the four seed "
        "pairs)",
    ]


@facts(PAGE)
def in_short() -> list[str]:
    """The "In short" paragraph: the claims' verdicts and directions in a few sentences."""
    cp, mlm = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny")
    lrs, shared_lr = cp["lrs"]["best_lr"], cp["lrs"]["shared_lr"]
    gaps = [row["generalisation_gap"][0] for row in cp["settings"]["best_lr"]["table"].values()]
    softmax = [claim_gaps(claim(cp, s, "skipless softmax"))[0] for s in SETTINGS]
    lead = {s: [ahead_by(cp, s, f"{b} within 2% of Pre-LN")[0] for b in ("SAS", "SAS-P")] for s in SETTINGS}
    mlm_ahead = [ahead_by(mlm, "best_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    mlm_shared = common([verdict_word(claim(mlm, "shared_lr", f"{b} within 2%")["verdict"]) for b in ("SAS", "SAS-P")])
    finetune = common([verdict_word(c["verdict"]) for c in mlm["finetune"]["claims"]])
    return [
        f"On next-token prediction every sweep {bracketed(cp)} its optimum",
        "SAS and SAS-P within 2% of Pre-LN per step (Fig. 23) "
        + common([in_both(cp, f"{b} within 2% of Pre-LN") for b in ("SAS", "SAS-P")]),
        f"by {lead['best_lr'][0]}% and {lead['best_lr'][1]}% on the seed means at their own best lrs "
        f"({lrs['sas'] / shared_lr:g}× and {lrs['sas_p'] / shared_lr:g}× Pre-LN's",
        f"by {lead['shared_lr'][0]}% and {lead['shared_lr'][1]}% at Pre-LN's",
        "SAS and SAS-P ahead of Pre-LN at equal measured time (Fig. 5) "
        + common([in_both(cp, f"{b} ahead of Pre-LN") for b in ("SAS", "SAS-P")]),
        f"SAS-P ahead of SAS at equal time {in_both(cp, 'SAS-P ahead of SAS')}"
        + (
            " (SAS-P ended behind)"
            if all(claim_gaps(claim(cp, s, "SAS-P ahead of SAS"))[0] > 0 for s in SETTINGS)
            else ""
        ),
        f"trails SAS by {span(softmax, 0)}% (§4.1)",
        f"(SAS {mlm_ahead[0]}%, SAS-P {mlm_ahead[1]}% ahead of Pre-LN at equal time); at Pre-LN's lr the "
        f"verdicts are {mlm_shared}",
        f"fine-tuning on MR is {finetune}",
        f"a {span(gaps, 2)}-nat generalisation gap",
    ]


def _seed_ways(result: dict[str, Any], name: str) -> str:
    """Which way each seed of a claim went, where it reads the same in both settings: "V-SkipInit behind by 1.6% in
    seed 0, ahead by 3.1% in seed 1"."""

    def ways(setting: str) -> str:
        row = claim(result, setting, name)
        first = CLAIM_LABELS[next(iter(row["loss"]))]
        _, gaps = claim_gaps(row)
        return f"{first} " + ", ".join(
            f"{way(g).split()[0]} by {abs(g):.1f}% in seed {s}" for s, g in zip(row["seeds"], gaps)
        )

    return common([ways(s) for s in SETTINGS])


@facts(PAGE)
def settings_and_parity() -> list[str]:
    """docs/reproduction.md's settings as the committed records hold them, the verdicts' directions in its prose and
    the parity section's figures of the first steps."""
    cp, mlm, authors = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(AUTHORS)
    steps, mlm_steps = family_steps(cp), family_steps(mlm)
    params = {name: [run["parameters"] / 1e6 for run in r["runs"]] for name, r in (("causal", cp), ("masked", mlm))}
    nearly = [g for s in SETTINGS for g in claim_gaps(claim(cp, s, "no norms (simplest) slightly"))[1]]
    mlm_shared = [ahead_by(mlm, "shared_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    behind = [-d for c in mlm["finetune"]["claims"] for d in c["difference_per_seed"]]
    (sentences,) = re.findall(r"([\d,]+) sentences", mlm["finetune"]["data"])
    tuned_seeds = common([len(c["seeds"]) for c in mlm["finetune"]["claims"]])
    setting, exact = authors["setting"], authors["exact"]
    # the float32 rounding of 1/k, k up to the sequence length: the centring matrix's entries as their code casts them
    rounding = max(abs(float(np.float32(1 / k)) - 1 / k) * k for k in range(1, setting["seq_len"] + 1))
    return [
        f"d=128, {steps} steps, embedded data; resumable; its runs' training times sum to "
        f"{training_hours(cp, mlm):.1f} hours",
        f"{span(params['causal'], 2)}M parameters on the causal side",
        f"{span(params['masked'], 2)}M on the masked side",
        f"{mlm_steps} micro-batch steps on the masked side",
        f"the sentences SST-2 was built from: {sentences} of them",
        f"One task and {tuned_seeds} seeds",
        f"Final eval loss after {steps} steps",
        f"Final eval loss after {family_steps(reproduction('codeparrot-tiny-authors'))} steps",  # their config's table
        f"V-SkipInit behind Pre-LN per step ({in_both(cp, 'V-SkipInit behind Pre-LN')}: {_seed_ways(cp, 'V-SkipInit behind Pre-LN')})",
        f"slightly behind SAS-P per step ({in_both(cp, 'no norms (simplest) slightly')}: within "
        f"{max(map(abs, nearly)):.1f}% of SAS-P in every seed)",
        f"the verdicts are {common([verdict_word(claim(mlm, 'shared_lr', f'{b} within 2%')['verdict']) for b in ('SAS', 'SAS-P')])}, "
        f"with SAS and SAS-P {mlm_shared[0]}% and {mlm_shared[1]}% ahead",
        f"fine-tuning on MR is {common([verdict_word(c['verdict']) for c in mlm['finetune']['claims']])} (SAS and "
        f"SAS-P end {span(behind, 1)} points below pre_ln in accuracy), as pre-training did "
        + ("not beat" if not mlm["finetune"]["pretraining_helped"]["on_every_seed"] else "beat")
        + " the same architecture trained from scratch in accuracy",
        f"{mlm_steps} micro-batch steps, the batch ramped",
        f"Final MLM eval loss after {mlm_steps} steps",
        f"{mlm_steps} steps of masked-LM on Python's docstrings",
        f"seq {setting['seq_len']}, batch {setting['batch']}, {setting['steps']} steps, on the reproduction's data "
        f"(the embedded stdlib code, a byte-level BPE of vocab {setting['vocab_size']})",
        f"{setting['steps']} steps instead of an epoch",
        f"(`1/k` off by up to {rounding:.0e} relative)".replace("e-0", "e-"),
        f"they start up to {authors_parity._sci(max(row['float64']['first_step_abs'] for row in exact.values()))} apart at the "
        "first step",
        "the differences of up to "
        f"{authors_parity._sci(max(row['ours_vs_theirs_torch_adamw']['first_step_abs'] for row in exact.values()))} at the first "
        "step",
    ]


def _swapped_order(table: dict[str, Any]) -> str:
    """Whether the variants order alike by training loss at the end and by eval loss (seed 0), naming the pairs that
    swap, the lower training loss first."""
    train = {n: row["train_loss_end"][0] for n, row in table.items()}
    evals = {n: row["eval_loss@100%"][0] for n, row in table.items()}
    names = sorted(train, key=train.get)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if evals[a] > evals[b]]
    if not pairs:
        return "The blocks order the same way by training loss at the end as by eval loss"
    swaps = "; ".join(f"{a} and {b}" for a, b in pairs)
    return (
        "The blocks order the same way by training loss at the end as by eval loss, except "
        f"{swaps}, which swap (training loss {num(train[pairs[0][0]])} against {num(train[pairs[0][1]])}, eval loss "
        f"{num(evals[pairs[0][0]])} against {num(evals[pairs[0][1]])})"
    )


def _every_seed_way(result: dict[str, Any], names: list[str], settings: tuple[str, ...] = SETTINGS) -> str:
    """ "ahead" where the first block of every named claim is ahead in every seed and setting, "behind" where it is
    behind in all, else "NEITHER ahead nor behind"."""
    gaps = [g for s in settings for name in names for g in claim_gaps(claim(result, s, name))[1]]
    return "ahead" if all(g < 0 for g in gaps) else "behind" if all(g > 0 for g in gaps) else "NEITHER ahead nor behind"


@facts(PAGE)
def directions() -> list[str]:
    """The words of docs/reproduction.md that say which way a checked figure points, from the committed records."""
    cp, mlm, authors = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(AUTHORS)
    within = [f"{b} within 2% of Pre-LN" for b in ("SAS", "SAS-P")]
    best = [ahead_by(cp, "best_lr", name)[0] for name in within]
    mlm_best = [ahead_by(mlm, "best_lr", f"{b} within 2%")[0] for b in ("SAS", "SAS-P")]
    exact = authors["exact"]
    simplified = [b for b in exact if b != "pre_ln"]
    steps = common([row["ours_vs_theirs_torch_adamw"]["steps"] for row in exact.values()])
    more = all(
        exact[b]["their_adamw_hf_vs_torch"]["max_abs"] > exact[b]["ours_vs_theirs_torch_adamw"]["max_abs"]
        for b in simplified
    )
    tuned = mlm["finetune"]["table"]
    pretrained = [v for n, row in tuned.items() if n != "pre_ln_from_scratch" for v in row["eval_loss_per_seed"]]
    lowered = max(pretrained) < min(tuned["pre_ln_from_scratch"]["eval_loss_per_seed"])
    variants = cp["timing"]["variants"].values()
    # the blocks whose medians the paragraph prints: each one's spread over rounds against their medians' range
    printed = [cp["timing"]["variants"][n] for n in ("pre_ln", "sas", "sas_p", "simplest", "parallel", "normformer")]
    medians = [v["speed_vs_pre_ln"]["ratio_median"] for v in printed]
    wider = "wider" if min(v["spread"] for v in printed) > max(medians) - min(medians) else "NOT wider"
    mlm_within = [f"{b} within 2%" for b in ("SAS", "SAS-P")]
    return [
        f"the per-variant spread over rounds is {span([100 * v['spread'] for v in variants], 0)}%, {wider} than the "
        "differences between these medians",
        f"on the causal side the spread over rounds is {wider} than the blocks' differences",
        f"{COUNTS[len(mlm['lr_sweep'])].capitalize()} variants: Pre-LN, parallel, SAS and SAS-P",
        f"at their own best lrs the simplified blocks are {_every_seed_way(mlm, mlm_within, ('best_lr',))} of Pre-LN "
        "rather than matched with it",
        f"they are {_every_seed_way(cp, within)} of it in both seeds, by {best[0]}% and {best[1]}% on the seed means",
        f"the simplified blocks are {_every_seed_way(mlm, [f'{b} within 2%' for b in ('SAS', 'SAS-P')], ('best_lr',))} "
        f"at their own best lrs too (SAS {mlm_best[0]}%, SAS-P {mlm_best[1]}%",
        f"So, in these presets at this scale: the simplified blocks are {matched((claim(cp, 'best_lr', n)['verdict'] for n in within), '*')} with "
        f"Pre-LN per step, they are {_every_seed_way(cp, within)} of it in every seed, by",
        _swapped_order(cp["settings"]["best_lr"]["table"]),
        f"within {steps} steps, {'more' if more else 'NOT more'} than the two codes' float32 rounding in every "
        "simplified block",
        f"It did {'lower' if lowered else 'NOT lower'} the loss: every pretrained run ends",
    ]
