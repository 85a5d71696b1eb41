"""docs/reproduction.md's depth family (Fig. 6 in miniature, `codeparrot-depth`): its lr sweeps, claims and
initialisation diagnostics, its setting and run time, and how fast its runs can train on this host."""

from __future__ import annotations

import statistics
from typing import Any

from experiments.reproduce import depth as depth_family
from modeling_simplified.training.presets import load_preset

from ..claims import claim_gaps, matched
from ..data import DEPTH, reproduction
from ..registry import block, facts, table
from ..text import common, lr_text, num, pct, signed, span, verdict_word
from .reproduction import claim_cell, final_cell, sweep_cells

PAGE = "docs/reproduction.md"


@block("reproduction-depth-sweep")
def sweep_table() -> str:
    """Per depth and variant: the lrs swept, the chosen one and its neighbours, the final eval loss [per seed]."""
    rows = []
    for layers, at in reproduction(DEPTH)["per_depth"].items():
        for name, row in at["lr_sweep"].items():
            swept = ", ".join(lr_text(p["lr"]) for p in row["points"] if p["swept"])
            rows.append([layers, name, swept, *sweep_cells(row), final_cell(at["table"], name)])
    head = [
        "blocks",
        "variant",
        "lrs swept",
        "chosen lr",
        "bracketed by (training loss at the end)",
        "final eval loss [per seed]",
    ]
    return table(head, rows)


def _seed_pcts(values: list[float]) -> str:
    return f"seeds {', '.join(pct(v) for v in values)}"


def claim_cell_across(row: dict[str, Any]) -> str:
    """A depth claim's verdict, its figure on the seed means and per seed (%): the change with depth, the gap to
    Pre-LN, or V-SkipInit's gap to the others at each depth; V-SkipInit's rows then name, per depth and seed, the
    variants it was ahead of and behind."""
    if "change_pct" not in row and "gap_pct" not in row:
        return claim_cell(row)
    word = verdict_word(row["verdict"])
    word = f"**{word}**" if word in ("held", "did not hold") else word
    if "change_pct" in row:
        shallow, deep = row["loss"]
        mean = row["change_pct_mean"]
        figure = (
            f"{abs(mean):.1f}% {'lower' if mean < 0 else 'higher'} at {deep} blocks than at {shallow} "
            f"({_seed_pcts(row['change_pct'])})"
        )
    else:
        (low, a), (high, b) = row["gap_pct"].items()
        gap = lambda k, v: f"{pct(statistics.fmean(v))} at {k} blocks ({_seed_pcts(v)})"  # noqa: E731
        figure = f"V-SkipInit's loss over the others' mean {gap(low, a)} → {gap(high, b)}"
    if "untestable" in word:
        figure += f"; in this setting: {verdict_word(row['verdict_in_setting'])}"
    return f"{word}: {figure}{_versus_text(row.get('versus', {}))}"


def _versus_text(versus: dict[str, dict[str, dict[str, float]]]) -> str:
    """'; V-SkipInit at 2 blocks, seed 0: ahead of pre_ln (−1.2%), behind sas (+0.3%); …' (ahead: a lower loss)."""
    parts = []
    for layers, by_seed in versus.items():
        for seed, gaps in by_seed.items():
            ahead = [f"{n} ({pct(g)})" for n, g in gaps.items() if g < 0]
            behind = [f"{n} ({pct(g)})" for n, g in gaps.items() if g >= 0]
            side = [f"ahead of {', '.join(ahead)}"] * bool(ahead) + [f"behind {', '.join(behind)}"] * bool(behind)
            parts.append(f"V-SkipInit at {layers} blocks, seed {seed}: {', '.join(side)}")
    return "".join(f"; {p}" for p in parts)


@block("reproduction-depth-claims")
def claims_table() -> str:
    rows = [
        [
            row["claim"],
            claim_cell_across(row),
            depth_family.regime_text(row["regime"]) if "regime" in row else "not recorded",
            row["source"],
        ]
        for row in reproduction(DEPTH)["claims"]
    ]
    return table(["claim", "verdict: mean (per seed)", "setting", "the paper"], rows)


@block("reproduction-depth-init")
def init_table() -> str:
    """After the first block and the last, at initialisation: the tokens' cosine similarity and effective rank."""
    rows = []
    for layers, at in reproduction(DEPTH)["init_diagnostics"].items():
        for name, row in at.items():
            cells = [layers, name]
            for key in ("token_cosine", "effective_rank"):
                last = f"{num(row[key][-1])} [{', '.join(num(v) for v in row[f'{key}_last_per_seed'])}]"
                cells += [num(row[key][0]), last]
            rows.append(cells)
    head = [
        "blocks",
        "variant",
        "cosine after block 1",
        "cosine after the last [per seed]",
        "effective rank after block 1",
        "effective rank after the last [per seed]",
    ]
    return table(head, rows)


def _depth_claim(result: dict[str, Any], start: str) -> dict[str, Any]:
    (row,) = [c for c in result["claims"] if c["claim"].startswith(start)]
    return row


def _higher(values: list[float]) -> str:
    return common(["higher" if v > 0 else "lower" for v in values])


def _control(row: dict[str, Any]) -> str:
    """What the Pre-LN control's depth claim means for the family's claims across depths."""
    if row["held"] is True:
        return "The Pre-LN control improved with depth (held), so the claims across depths are tested here"
    reason = row["verdict"].split(" (", 1)[1].rstrip(")")
    return (
        f"{reason[0].upper()}{reason[1:]}, so this setting cannot test Fig. 6's claims across depths: each reads "
        f"{verdict_word(row['verdict'])}"
    )


def _vskip_standing(versus: dict[str, dict[str, dict[str, float]]]) -> str:
    """Whom V-SkipInit was ahead of or behind in every seed at every depth: "It is ahead of pre_ln and behind sas,
    sas_p in every seed at both depths" (a variant it was on both sides of is named as mixed)."""
    others = list(next(iter(next(iter(versus.values())).values())))
    gaps = {n: [g[n] for by_seed in versus.values() for g in by_seed.values()] for n in others}
    ahead = [n for n, v in gaps.items() if all(g < 0 for g in v)]
    behind = [n for n, v in gaps.items() if all(g >= 0 for g in v)]
    mixed = [n for n in others if n not in ahead and n not in behind]
    parts = [f"ahead of {', '.join(ahead)}"] * bool(ahead) + [f"behind {', '.join(behind)}"] * bool(behind)
    text = f"It is {' and '.join(parts)} in every seed at both depths" if parts else "It is"
    return text + (f"; on both sides of {', '.join(mixed)}" if mixed else "")


@facts(PAGE)
def results() -> list[str]:
    """The depth family's prose: run time, seed spread, the claims' figures and words, the init diagnostics."""
    result = reproduction(DEPTH)
    command = f"the committed results: `{result['command']}`"
    shallow, deep = map(str, result["depths"])
    runs, minutes = result["run_time"]["runs"], num(result["run_time"]["training_s"] / 60, 0)
    spread = [
        100 * abs(a - b) / statistics.fmean((a, b))
        for at in result["per_depth"].values()
        for row in at["table"].values()
        for a, b in [row["eval_loss_per_seed"]]
    ]
    better = [_depth_claim(result, f"{n} better at") for n in ("pre_ln", "sas", "sas_p")]
    means, per_seed = [c["change_pct_mean"] for c in better], [g for c in better for g in c["change_pct"]]
    direction = _higher(means + per_seed)  # one sign throughout, else the sentence needs rewording
    magnitude = [abs(m) for m in means]
    paid = (
        "Depth paid in both seeds for Pre-LN, SAS and SAS-P: they end"
        if direction == "lower"
        else "Pre-LN, SAS and SAS-P end"
    )
    per_block = [result["per_depth"][k]["table"] for k in (shallow, deep)]
    apart = all(
        max(per_block[1][n]["eval_loss_per_seed"]) < min(per_block[0][n]["eval_loss_per_seed"])
        for n in ("pre_ln", "sas", "sas_p")
    )
    vskip = _depth_claim(result, "value_skipinit worse at")
    grows = _depth_claim(result, "V-SkipInit's gap")
    gap_low, gap_high = (statistics.fmean(v) for v in grows["gap_pct"].values())
    across = [*better, vskip, grows]
    match = [
        _depth_claim(result, f"{n} within 2% of Pre-LN at equal steps at {k}")
        for k in (shallow, deep)
        for n in ("sas", "sas_p")
    ]
    ahead = [claim_gaps(c) for c in match]
    ratio = [
        result["per_depth"][shallow]["lrs"][n] / result["per_depth"][deep]["lrs"][n]
        for n in result["per_depth"][deep]["lrs"]
    ]
    spread_at = [[abs(a - b) for row in table.values() for a, b in [row["eval_loss_per_seed"]]] for table in per_block]
    wider = all(d > s for s, d in zip(*spread_at, strict=True))
    seed_1_above = all(b > a for row in per_block[1].values() for a, b in [row["eval_loss_per_seed"]])
    init = result["init_diagnostics"]
    pre_ln = {k: init[k]["pre_ln"] for k in (shallow, deep)}
    others = [init[k][n] for k in (shallow, deep) for n in ("sas", "sas_p", "value_skipinit")]
    jobs = result["run_time"]["jobs"]  # recorded by experiments/reproduce/run.py
    return [
        command,
        f"its {runs} runs took {minutes} minutes of training (the sum of the runs' training times",
        f"the two seeds of one block end up to {num(max(spread), 1)}% of their mean apart at its chosen lr",
        f"{paid} {', '.join(num(m, 1) + '%' for m in magnitude[:2])} and {num(magnitude[2], 1)}% {direction} "
        f"at {deep} blocks than at {shallow} on the seed means ({span([abs(g) for g in per_seed], 1)}% per seed)"
        + f", each seed at {deep} blocks below both seeds at {shallow}" * apart
        + f". {_control(better[0])}",
        f"V-SkipInit ends {num(vskip['change_pct_mean'], 1)}% {_higher([vskip['change_pct_mean']])} at {deep} "
        f'blocks ({span(vskip["change_pct"], 1)}% per seed; "trains slower per update" when deeper: '
        f"{verdict_word(vskip['verdict'])}), and its gap to the other three grows from {signed(gap_low, 1)}% to "
        f"{signed(gap_high, 1)}% ({verdict_word(grows['verdict'])}). {_vskip_standing(vskip['versus'])}",
        "So Fig. 6's contrast "
        + ("holds in miniature" if all(c["held"] is True for c in across) else "does not hold in miniature")
        + ": the normalised Pre-LN and the shaped blocks gain from depth, V-SkipInit loses",
        f"SAS and SAS-P are ahead of Pre-LN by {span([-m for m, _ in ahead], 1)}% on the seed means "
        f"({span([-g for _, seeds in ahead for g in seeds], 1)}% per seed) at both depths, so within 2% "
        f"{common([verdict_word(c['verdict']) for c in match])} at either depth",
        f"every variant's chosen lr is {span(ratio, 0)}× lower at {deep} blocks than at {shallow}",
        f"they are {matched(c['verdict'] for c in match)} with Pre-LN per step but "
        + ("ahead of" if all(g < 0 for _, seeds in ahead for g in seeds) else "NOT ahead of")
        + " it",
        f"The seeds differ {'more' if wider else 'not always more'} at {deep} blocks than at {shallow}"
        + ": seed 1 ends above seed 0 for every block there" * seed_1_above,
        f"Pre-LN's mean cosine similarity after the last block is {num(pre_ln[shallow]['token_cosine'][-1])} at "
        f"{shallow} blocks and {num(pre_ln[deep]['token_cosine'][-1])} at {deep}, and its effective rank falls "
        f"to {num(pre_ln[shallow]['effective_rank'][-1])} and {num(pre_ln[deep]['effective_rank'][-1])}",
        f"cosine {span([o['token_cosine'][-1] for o in others])}, effective rank "
        f"{span([o['effective_rank'][-1] for o in others])} after the last block at both depths",
        f"{runs} runs, {minutes} minutes of training, {'two' if jobs == 2 else jobs} runs at a time on "
        f"{result['environment']['cpu_count']} cores",
    ]


@facts(PAGE)
def setting() -> list[str]:
    """The depth family's shape, steps, tokens, epochs, βFF and match threshold where the prose states them."""
    result = reproduction(DEPTH)
    shallow, deep = result["depths"]
    shape, steps = result["shape"], result["steps"]
    tokens = common([f"{run['tokens_seen'] / 1e3:.0f}K" for run in result["runs"]])
    beta = {int(k): v for k, v in result["beta_ff_init"].items()}
    base = load_preset(f"{DEPTH}-sas")
    epochs = common([num(c["regime"]["epochs"], 2) for c in result["claims"]])
    threshold = f"{100 * result['match_threshold']:g}%"
    mlp = "2d" if shape["intermediate_size"] == 2 * shape["hidden_size"] else str(shape["intermediate_size"])
    return [
        f"at {shallow} and {deep} blocks (d={shape['hidden_size']}, MLP {mlp}, {steps} steps), the lr swept at "
        f"{shallow} blocks and re-checked at {deep} around each best",
        f"at {shallow} and {deep} blocks ({deep / shallow:g}× deeper), d = {shape['hidden_size']}, "
        f"{shape['heads']} heads, ReLU MLP {shape['intermediate_size']} = {mlp}",
        f"sequence {shape['seq_len']}, batch {shape['batch']}, {steps} steps ({tokens} tokens)",
        f"(`max_train_samples={base.data.max_train_samples}`: {epochs} epochs",
        f"βFF starts at {beta[shallow]:.3g} at {shallow} blocks and {beta[deep]:.3g} at {deep}:",
        f"from the preset's {base.model['beta_ff_init']:g} at {base.model['num_hidden_layers']} blocks",
        f"within {threshold} of Pre-LN's: the paper gives no number, and {threshold} is the threshold",
        f"so {threshold} can only be met where the seeds agree",
        f"{tokens} tokens is a small part of the data Fig. 6's models train on",
        f"their first {steps} updates",
        f"{shallow} and {deep} blocks of width {shape['hidden_size']}, against 18 blocks and 72 blocks of width "
        f"768; {steps} steps of batch {shape['batch']}, seq {shape['seq_len']}",
    ]


@facts(PAGE)
def speed() -> list[str]:
    """How fast the depth family's runs can train on this host (`experiments.depth_speed`'s committed JSON)."""
    speed = reproduction(DEPTH, "speed.json")
    family = reproduction(DEPTH)
    shallow, deep = map(str, family["depths"])

    def ratios(name: str, at: str) -> str:
        return span(speed[at][name]["ratio"], 2)

    threads = "threads: 2 processes x 1 thread / 1 process x 2 threads"
    compile_s = [t for at in (shallow, deep) for t in speed[at]["compiled / eager"]["compile_s"]]
    peaks = speed["gemm_peak_gflops"]
    # the family's own layout (two single-thread runs at a time) against each change it did not make
    layout = "the faster" if min(r for at in (shallow, deep) for r in speed[at][threads]["ratio"]) > 1 else "not the"
    changes = {"batch 32 / batch 16": "batch 32", "bf16 / float32": "bf16", "compiled / eager": "`torch.compile`"}
    faster = [
        (label, at) for name, label in changes.items() for at in (shallow, deep) if min(speed[at][name]["ratio"]) > 1
    ]
    if faster != [("`torch.compile`", deep)]:
        raise ValueError(f"the prose names `torch.compile` at {deep} blocks as the one faster change, not {faster}")
    eager_s = statistics.fmean(r["train_time_s"] for r in family["runs"] if r["layers"] == int(deep))
    compiled = speed[deep]["compiled / eager"]
    compiled_s = eager_s / statistics.median(compiled["ratio"]) + statistics.fmean(compiled["compile_s"])
    return [
        f"`{speed['command']}`",
        f"So two runs at a time is {layout} layout here, and of the changes only `torch.compile` at {deep} blocks "
        f"measured faster in every repeat: the committed runs are eager, and a compiled {deep}-block run would "
        f"take about {num(100 * (1 - compiled_s / eager_s), 0)}% less time, its compile included",
        f"two processes of one thread make {ratios(threads, shallow)}× (at {shallow} blocks) and "
        f"{ratios(threads, deep)}× (at {deep}) the tokens per second of one process of two threads; batch 32 "
        f"{ratios('batch 32 / batch 16', shallow)}× and {ratios('batch 32 / batch 16', deep)}× batch 16's; bf16 "
        f"autocast {ratios('bf16 / float32', shallow)}× and {ratios('bf16 / float32', deep)}× float32's (this "
        f"host's bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one); "
        f"`torch.compile` {ratios('compiled / eager', shallow)}× and {ratios('compiled / eager', deep)}× eager, "
        f"after {span(compile_s, 0)} s of compiling",
    ]


@facts("CHANGELOG.md")
def control_in_changelog() -> list[str]:
    """The CHANGELOG's word on the depth family's shape: the Pre-LN control gained from depth in every seed."""
    change = _depth_claim(reproduction(DEPTH), "pre_ln better at")["change_pct"]
    gained = "gained" if all(g < 0 for g in change) else "did NOT gain"
    return [f"the Pre-LN control {gained} from depth in {'both' if len(change) == 2 else 'NOT both'} seeds"]
