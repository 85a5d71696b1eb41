"""`simplified-train` as a user meets it: suggestions for misspelt fields and presets (the config's own difflib
helper), output that pipes (`--list-presets | head`) and reads (`--show`, the final summary), local datasets behind a
firewall (`--dataset DIR`, `--eval-dataset`), the one-line bf16 warning on a CPU and the rule it is derived from."""

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from modeling_simplified.training import cli, data
from modeling_simplified.training.api import SUMMARY_KEYS, TrainResult
from modeling_simplified.training.cli import build_parser, main, plan_from_args
from modeling_simplified.training.presets import available_presets, load_preset

REPO = Path(__file__).resolve().parents[1]
#: `--set` arguments that shrink the CodeParrot preset to seconds (as tests/test_hub_datasets.py does)
SHRINK = [
    "num_hidden_layers=2",
    "hidden_size=64",
    "num_attention_heads=4",
    "intermediate_size=64",
    "vocab_size=512",
    "data.tokenizer_train_samples=30",
    "data.max_eval_samples=8",
    "training.per_device_train_batch_size=4",
    "training.per_device_eval_batch_size=8",
]


def _error_line(capsys) -> str:
    """The one line the command printed (beside `datasets`' progress bars of a local folder), and no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "simplified-train" in line]
    assert len(lines) == 1 and lines[0].startswith("simplified-train: error: ") and "Traceback" not in err, err
    return lines[0]


# -- suggestions ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "assignment, meant",
    [
        ("hiden_size=256", "hidden_size"),  # a letter off
        ("learning_rate=1e-3", "training.learning_rate"),  # a field of another section, its prefix forgotten
        ("seq_len=64", "data.seq_len"),
        ("training.learnig_rate=1e-3", "training.learning_rate"),
        ("trainig.learning_rate=1e-3", "training.learning_rate"),  # the section misspelt
        ("training.hidden_size=64", "hidden_size"),  # a model field under a section
        ("data.eval_datasett=x", "data.eval_dataset"),
    ],
)
def test_a_set_typo_gets_did_you_mean_on_one_short_line(tmp_path, capsys, assignment, meant):
    argv = ["--preset", "codeparrot-tiny-sas_p", "--set", assignment, "--output-dir", str(tmp_path / "run")]
    assert main(argv) == 2
    line = _error_line(capsys)
    assert f"did you mean {meant!r}?" in line and len(line) < 250, line
    assert not (tmp_path / "run").exists()


def test_a_set_key_like_no_field_still_lists_the_allowed_fields(tmp_path, capsys):
    assert main(["--preset", "codeparrot-tiny-sas_p", "--set", "zzz=1", "--output-dir", str(tmp_path / "r")]) == 2
    line = _error_line(capsys)
    assert "did you mean" not in line and "allowed model fields: block_type" in line and "training.<field>" in line


def test_a_near_miss_preset_name_gets_the_nearest_names(tmp_path, capsys):
    assert main(["--preset", "codeparrot-tiny-sasp", "--output-dir", str(tmp_path / "run")]) == 2
    line = _error_line(capsys)
    assert line.startswith("simplified-train: error: unknown preset 'codeparrot-tiny-sasp'; did you mean ")
    assert "'codeparrot-tiny-sas_p'" in line.split("?")[0] and "--list-presets" in line and len(line) < 250
    assert main(["--show", "glue-tinny"]) == 2
    assert "did you mean 'glue-tiny'?" in _error_line(capsys)


# -- output a user can pipe and read -------------------------------------------------------------------------------
def test_list_presets_prints_one_short_row_per_preset(capsys):
    assert main(["--list-presets"]) == 0
    rows = capsys.readouterr().out.splitlines()
    # a row: the longest name (codeparrot-tiny-authors-value_skipinit), task and dataset, each column padded
    assert len(rows) == len(available_presets()) and max(map(len, rows)) <= 105
    for row, name in zip(rows, available_presets()):
        preset = load_preset(name, check=False)
        assert row.split()[:3] == [name, preset.task, preset.data.dataset]


def test_list_presets_survives_a_closed_pipe():
    """`simplified-train --list-presets | head -1`: the reader goes away before the rows are written; the command
    ends quietly instead of with a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "modeling_simplified.training.cli", "--list-presets"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the first row
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert stderr == "", stderr


def test_show_prints_the_setting_and_every_field(capsys):
    assert main(["--show", "codeparrot-tiny-sas_p"]) == 0
    out = capsys.readouterr().out
    preset = load_preset("codeparrot-tiny-sas_p")
    head, fields = out.split("\n{", 1)
    assert head.startswith("codeparrot-tiny-sas_p: causal-lm") and preset.paper in head
    shown = json.loads("{" + fields)
    assert shown["training"]["learning_rate"] == preset.training.learning_rate and shown["model"] == preset.model


def test_the_summary_names_the_final_and_the_mean_training_loss():
    metrics = {"steps": 300, "train_loss": 3.94671, "train_loss_mean": 4.65812, "eval_loss": 4.396, "x": 1}
    summary = TrainResult(output_dir=Path("."), metrics=metrics, log_history=[]).summary()
    assert summary == {"steps": 300, "train_loss_final": 3.9467, "train_loss_mean": 4.6581, "eval_loss": 4.396}
    assert "train_loss" not in SUMMARY_KEYS.values()


def test_help_names_where_presets_come_from():
    text = " ".join(build_parser().format_help().split())
    assert "a row of a family's table in configuration/<family>.json" in text and "--list-presets" in text
    assert "--eval-dataset" in text and "--show PRESET" in text


# -- local data and behind a firewall ------------------------------------------------------------------------------
def _plan(*argv: str):
    return plan_from_args(build_parser().parse_args(list(argv))).preset.data


def test_dataset_replaces_the_presets_eval_set_and_eval_dataset_names_another(tmp_path):
    """`--dataset DIR` trains on DIR and evaluates on its validation split: the preset's own eval repository and file
    globs go with its training set; `--eval-dataset` (or a later `--set data.…`) names another."""
    spec = _plan("--preset", "codeparrot-sas_p")
    assert spec.eval_dataset == "huggingface-course/codeparrot-ds-valid"
    spec = _plan("--preset", "codeparrot-sas_p", "--dataset", str(tmp_path))
    assert (spec.dataset, spec.eval_dataset, spec.eval_split) == (str(tmp_path), None, "validation")
    spec = _plan("--preset", "crammed-bert-sas_p", "--dataset", str(tmp_path))
    assert spec.train_data_files is None and spec.eval_data_files is None
    spec = _plan("--preset", "codeparrot-sas_p", "--dataset", str(tmp_path), "--eval-dataset", str(tmp_path / "e"))
    assert spec.eval_dataset == str(tmp_path / "e")
    spec = _plan("--preset", "codeparrot-sas_p", "--dataset", str(tmp_path), "--set", "data.eval_dataset=org/valid")
    assert spec.eval_dataset == "org/valid"
    spec = _plan("--preset", "codeparrot-sas_p", "--dataset", "huggingface-course/codeparrot-ds-train")
    assert spec.eval_dataset == "huggingface-course/codeparrot-ds-valid"  # the preset's own dataset: unchanged


def _code_folder(folder: Path, splits=("train", "validation")) -> Path:
    """A local dataset folder in the documented format: one JSON-lines file per split, a `content` column."""
    from olah_hub import code_documents

    docs = code_documents(24)
    folder.mkdir()
    for split, rows in zip(splits, (docs[:16], docs[16:])):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def firewall(monkeypatch):
    """No Hub: not offline mode (a user behind a firewall), and every connection to the endpoint fails."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(data, "_host_reachable", lambda timeout=3.0: False)
    loaded = []
    load = data.load_remote

    def spy(dataset_id, config, split, *args, **kwargs):
        loaded.append((dataset_id, split))
        return load(dataset_id, config, split, *args, **kwargs)

    monkeypatch.setattr(data, "load_remote", spy)
    return loaded


def test_a_paper_preset_trains_on_a_local_folder_behind_a_firewall(tmp_path, capsys, firewall):
    """...evaluated on another local folder (`--eval-dataset`), which metrics.json and the card name as the eval set;
    and the console names its two training losses (the Trainer's last line the mean, the summary both); the run's
    precision is in metrics.json and the card."""
    from huggingface_hub import ModelCard

    folder = _code_folder(tmp_path / "localds")
    eval_folder = _code_folder(tmp_path / "evalds")
    run = tmp_path / "run"
    shrink = [arg for a in SHRINK for arg in ("--set", a)]
    argv = ["--preset", "codeparrot-sas_p", "--dataset", str(folder), "--eval-dataset", str(eval_folder)]
    assert main([*argv, "--max-steps", "2", *shrink, "--output-dir", str(run)]) == 0
    assert firewall == [(str(folder), "train"), (str(eval_folder), "validation")]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["dataset"] == str(folder) and metrics["steps"] == 2
    assert (metrics["eval_dataset"], metrics["eval_split"]) == (str(eval_folder), "validation")
    assert metrics["training_precision"] == "float32"
    card = (run / "export" / "README.md").read_text()
    assert "| training precision | float32 |" in card
    assert f"| evaluation data | {eval_folder} (split validation) |" in card
    results = ModelCard(card).data.eval_results
    assert {(r.dataset_name, r.dataset_split) for r in results} == {(str(eval_folder), "validation")}
    out = capsys.readouterr().out
    trainer_line = next(line for line in out.splitlines() if "train_steps_per_second" in line)
    assert "'train_loss_mean'" in trainer_line and "'train_loss'" not in trainer_line
    summary = json.loads(out.split(f"simplified-train: done in {run}: ", 1)[1].splitlines()[0])
    assert summary["train_loss_final"] == round(metrics["train_loss"], 4)
    assert summary["train_loss_mean"] == round(metrics["train_loss_mean"], 4) and "train_loss" not in summary


def test_an_unreachable_eval_set_names_the_flag_that_replaces_it(tmp_path, capsys, firewall):
    folder = _code_folder(tmp_path / "localds")
    argv = ["--preset", "codeparrot-sas_p", "--dataset", str(folder), "--output-dir", str(tmp_path / "run")]
    assert main([*argv, "--set", "data.eval_dataset=huggingface-course/codeparrot-ds-valid"]) == 2
    line = _error_line(capsys)
    assert "cannot load dataset 'huggingface-course/codeparrot-ds-valid', split 'validation'" in line
    assert "unreachable" in line and "--eval-dataset DIR" in line
    only_train = _code_folder(tmp_path / "trainonly", splits=("train",))
    argv = ["--preset", "codeparrot-sas_p", "--dataset", str(only_train), "--output-dir", str(tmp_path / "run")]
    assert main(argv) == 2
    line = _error_line(capsys)
    assert "the dataset has the splits train" in line and "--eval-dataset" in line
    assert not (tmp_path / "run").exists()


def test_local_folders_of_code_or_text_files_get_one_line_naming_the_layout(tmp_path, capsys, firewall):
    """A folder of .py files (no data file `datasets` reads) is one line naming the layout a local folder needs, and
    no connection advice (none was tried); a folder of .txt files loads one document per line under a `text`
    column: the missing `content` column, and with `data.text_column=text` lines too short for a window, are one line
    that says so."""
    shrink = [arg for a in SHRINK for arg in ("--set", a)]
    code = tmp_path / "code"
    code.mkdir()
    for i in range(3):
        (code / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    argv = ["--preset", "codeparrot-sas_p", "--max-steps", "1", *shrink, "--output-dir", str(tmp_path / "run")]
    assert main([*argv, "--dataset", str(code)]) == 2
    line = _error_line(capsys)
    assert "train.jsonl and validation.jsonl" in line and "'content'" in line and "connection" not in line
    text = tmp_path / "text"
    text.mkdir()
    for split in ("train", "validation"):
        (text / f"{split}.txt").write_text("".join(f"a short line of text number {i}\n" for i in range(40)))
    assert main([*argv, "--dataset", str(text)]) == 2
    line = _error_line(capsys)
    assert "no 'content' column" in line and "its columns: text" in line
    assert "Each line of a .txt file is its own document" in line
    assert main([*argv, "--dataset", str(text), "--set", "data.text_column=text"]) == 2
    line = _error_line(capsys)
    assert "yields no full" in line and "Each line of a .txt file is its own document" in line
    assert not (tmp_path / "run").exists()


# -- bf16 on a CPU -------------------------------------------------------------------------------------------------
def test_the_bf16_rule_is_the_committed_measurement():
    """`BF16_CPU_SLOWER_UP_TO` is the widest width `benchmarks/bf16_crossover.py` measured bf16 slower at."""
    from benchmarks.bf16_crossover import slower_up_to

    measured = json.loads((REPO / "docs" / "benchmark" / "bf16_crossover.json").read_text())
    assert slower_up_to(measured["rows"]) == measured["bf16_slower_up_to_hidden_size"] == cli.BF16_CPU_SLOWER_UP_TO
    rows = [r for r in measured["rows"] if r["hidden_size"] <= cli.BF16_CPU_SLOWER_UP_TO and r["batch"] == 8]
    assert rows and any(r["bf16_over_float32"] > 1 for r in rows if r["hidden_size"] == cli.BF16_CPU_SLOWER_UP_TO)


def test_bf16_at_a_shape_measured_slower_warns_in_one_line(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run = tmp_path / "run"
    (run / "checkpoint-1").mkdir(parents=True)  # another run's folder: refused after the warning, before training
    assert main(["--preset", "codeparrot-tiny-sas_p", "--bf16", "--output-dir", str(run)]) == 2
    warning, error = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("simplified-train: warning: --bf16 at hidden_size 128 on a CPU: a training step")
    assert error.startswith("simplified-train: error: ")
    wide = cli.BF16_CPU_SLOWER_UP_TO + 1
    for argv, warns in [([], False), (["--bf16"], True), (["--bf16", "--set", f"hidden_size={wide}"], False)]:
        preset = plan_from_args(build_parser().parse_args(["--preset", "codeparrot-tiny-sas_p", *argv])).preset
        assert (cli.bf16_warning(preset) is not None) == warns, argv
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    preset = plan_from_args(build_parser().parse_args(["--preset", "codeparrot-tiny-sas_p", "--bf16"])).preset
    assert cli.bf16_warning(preset) is None
