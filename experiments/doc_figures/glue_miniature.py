"""The GLUE miniature (`python -m experiments.glue_tiny`) as docs/fine_tuning.md and docs/reproduction.md both state
it, from the committed glue.json of every setting it ran: which pretrained run, how many fine-tuning seeds, the
control, what pre-training adds on each task and Table 2's verdict. One place, so that both pages say the same thing
about the same runs."""

from __future__ import annotations

from typing import Any

from experiments.glue_verdicts import BASELINE, points

from .data import glue_tiny, glue_tiny_settings
from .registry import table
from .text import COUNTS, common, lr_text, seeds_text, signed, verdict_word


def _lr(glue: dict[str, Any], task: str) -> str:
    """The lr a row fine-tuned `task` at: App. D.2's, or the one its sweep chose."""
    lrs = glue["lrs"][task]
    chosen = "–" if lrs["chosen"] is None else lr_text(lrs["chosen"])
    return chosen if lrs["sweep_seed"] is None else f"{chosen} (swept)"


def label(setting: str) -> str:
    """A setting as the pages name it: its folder's name (the default setting's own name for the default)."""
    return setting or glue_tiny()["setting"]["name"]


def _gates() -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(setting's folder, its glue.json, task, the task's gate) for every setting and task, the default first."""
    return [
        (name, glue_tiny(name), task, gate)
        for name in glue_tiny_settings()
        for task, gate in glue_tiny(name)["pretraining_counts"]["tasks"].items()
    ]


def control_table() -> str:
    """What pre-training adds on each task in every setting tried: Pre-LN pretrained against from scratch, per seed."""
    rows = []
    for name, glue, task, gate in _gates():
        row = gate["blocks"][BASELINE]
        rows.append(
            [
                f"`{label(name)}`",
                task,
                f"{_lr(glue['blocks'][BASELINE], task)} / {_lr(glue['controls'][BASELINE], task)}",
                points(row["pretrained"]),
                points(row["control"]),
                "–" if row["gain"] is None else signed(100 * row["gain"], 1),
                gate["verdict"].split(":")[0],
            ]
        )
    head = [
        "pre-training",
        "task",
        "fine-tuning lr (pretrained / from scratch)",
        f"{BASELINE} pretrained, accuracy % per seed",
        "from scratch, per seed",
        "gain (points)",
        "verdict",
    ]
    return table(head, rows)


def settings_list() -> str:
    """Each setting tried: its pre-training (steps, corpus with its size and licence), its fine-tuning lr, its
    departures from the reproduction and App. D.2, and its command."""
    lines = []
    for name in glue_tiny_settings():
        glue = glue_tiny(name)
        setting, pretraining = glue["setting"], glue["setting"]["pretraining"]
        lrs = setting["finetune_lrs"]
        lr = f"App. D.2's lr ({lr_text(lrs[0])}) for every task" if len(lrs) == 1 else "an lr swept per task and row"
        others = [d for d in setting["departures"] if pretraining["corpus"] not in d]  # the corpus is named already
        lines.append(
            f"- `{label(name)}`{' (the default)' if not name else ''}: {pretraining['steps']} masked-LM steps on "
            f"{pretraining['corpus']}; fine-tuning at {lr}"
            + (f"; departures: {'; '.join(others)}" if others else "")
            + f". `{glue['command']}`"
        )
    return "\n".join(lines)


#: the blocks Table 2 compares with the baseline, in its order
COMPARED = ("Parallel", "SAS", "SAS-P")


def table2_table() -> str:
    """Table 2 in miniature in each setting where a task passed its control: each block's score per fine-tuning seed
    (its mean accuracy over those tasks), their mean ± std and the block's match against Pre-LN (Welch's t-test)."""
    rows = []
    for name in glue_tiny_settings():
        t2 = glue_tiny(name)["table2"]
        for block, score in t2.get("scores", {}).items():
            match = t2["verdicts"][block]["verdict"] if block in t2["verdicts"] else "the baseline"
            rows.append(
                [
                    f"`{label(name)}`",
                    ", ".join(t2["tasks"]),
                    block,
                    points(list(score["per_seed"].values())),
                    f"{100 * score['mean']:.1f}±{100 * score['std']:.1f}",
                    match,
                ]
            )
    head = ["pre-training", "tasks that passed", "block", "score per seed", "mean ± std", f"against {BASELINE}"]
    return table(head, rows)


def _table2_words(setting: str) -> str:
    """One setting's Table 2 in words: each compared block's verdict word, or that it is not fine-tuned there."""
    verdicts = glue_tiny(setting)["table2"].get("verdicts", {})
    words = []
    for block in COMPARED:
        if block not in verdicts:
            words.append(f"{block} not fine-tuned in it yet")
            continue
        verdict = verdicts[block]["verdict"]
        words.append(f"{block} **{'matched' if verdict.startswith('matched') else 'did not match'}** {BASELINE}")
    return ", ".join(words)


def _plural(n: int, noun: str) -> str:
    return f"{COUNTS[n]} {noun}{'' if n == 1 else 's'}"


def statements() -> list[str]:
    """The sentences both pages state about the miniature's runs and verdicts."""
    default = glue_tiny()
    pretraining = default["setting"]["pretraining"]
    seeds = common(
        [" ".join(map(str, g["seeds"])) for g in (*default["blocks"].values(), *default["controls"].values())]
    )
    gates = _gates()
    rule = [g["blocks"][BASELINE] for name, _, _, g in gates if not name]  # the default setting's, every task
    chance = common([row["chance"] for row in rule])
    sizes = common([(len(row["pretrained"]), len(row["control"])) for row in rule])
    passed: dict[str, list[str]] = {}  # each setting's folder → the tasks that passed their control there
    for name, _, task, gate in gates:
        if gate["enters_claim"]:
            passed.setdefault(name, []).append(task)
    verdicts = [  # a setting where no task passed says why ("untestable here: ...")
        verdict_word(glue_tiny(name)["table2"].get("verdict", "").split(":")[0]) for name in glue_tiny_settings()
    ]
    return [
        f"{BASELINE}'s pretrained run (pre-training seed {pretraining['seed']}, {pretraining['steps']} masked-LM "
        f"steps) and, as the control, the same architecture and tokenizer from a random initialisation, each "
        f"fine-tuned with seeds {seeds_text(seeds.split())}",
        f"on the {COUNTS[len(default['tasks'])]} labelled tasks available offline",
        "only where pre-training beats its control beyond the seeds' spread: every fine-tuning seed of the pretrained "
        f"run above every seed from scratch, an order that comes by chance 1 time in {round(1 / chance)} for "
        f"{sizes[0]} seeds against {sizes[1]} were pre-training to add nothing",
        f"Pre-training beat its control beyond the seeds' spread on {COUNTS[sum(map(len, passed.values()))]} of "
        f"the {_plural(len(gates), 'task')} in the {_plural(len(glue_tiny_settings()), 'setting')} tried",
        *(
            [f"on {' and '.join(tasks)} in `{label(name)}`: " + _table2_words(name) for name, tasks in passed.items()]
            or [f"Table 2 in miniature is **{common(verdicts)}**"]  # the same in every setting
        ),
    ]
