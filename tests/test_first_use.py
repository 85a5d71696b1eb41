"""What a new user meets first: the tokenizer of an export or a conversion loads in a fresh process without a
prompt, every snippet of the docs that loads one passes the flag it needs, a passing test session leaves nothing in
the temp folder, `exports/` (the docs' path) is ignored by git, and `make demo` never overwrites a previous run."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tiny_config

from modeling_simplified import SimplifiedForCausalLM

REPO = Path(__file__).resolve().parents[1]

LOAD = r"""
import sys, time
from transformers import AutoTokenizer
for folder in sys.argv[1:]:
    began = time.time()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    print(type(tokenizer).__name__, len(tokenizer), round(time.time() - began, 2))
"""


def test_tokenizer_of_an_export_and_a_conversion_loads_without_a_prompt(tmp_path, bpe_tokenizer):
    """As docs/inference.md and docs/conversion.md show it, in a fresh interpreter that never imports this package,
    with stdin closed and a timeout: no "Do you wish to run the custom code?" prompt (15 s at a terminal), no
    warning, the tokenizer's own vocabulary."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from modeling_simplified.conversion.cli import main as convert
    from modeling_simplified.hub_cards.export import export_model

    config = tiny_config("sas_p", vocab_size=len(bpe_tokenizer))
    export = export_model(SimplifiedForCausalLM(config), tmp_path / "export", tokenizer=bpe_tokenizer)
    assert json.loads((export / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    gpt2 = GPT2Config(
        n_layer=1, n_embd=32, n_head=4, vocab_size=len(bpe_tokenizer), n_positions=64, bos_token_id=0, eos_token_id=0
    )
    GPT2LMHeadModel(gpt2).save_pretrained(tmp_path / "gpt2")
    bpe_tokenizer.save_pretrained(tmp_path / "gpt2")
    assert convert(["gpt2-to-simplified", str(tmp_path / "gpt2"), str(tmp_path / "converted")]) == 0
    assert "auto_map" in json.loads((tmp_path / "converted" / "config.json").read_text())

    proc = subprocess.run(
        [sys.executable, "-c", LOAD, str(export), str(tmp_path / "converted")],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "always"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Do you wish" not in proc.stdout + proc.stderr
    assert proc.stderr.strip() == ""  # no warning of transformers' or Python's
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert [row[:2] for row in rows] == [["TokenizersBackend", str(len(bpe_tokenizer))]] * 2
    assert all(float(row[2]) < 10 for row in rows)  # the prompt's wait is 15 s


def _doc_texts() -> dict[str, str]:
    from modeling_simplified.hub_cards.card import usage_snippet

    texts = {
        str(p.relative_to(REPO)): p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    }
    texts["card snippet"] = usage_snippet("SimplifiedForCausalLM", "your-name/x", has_tokenizer=True)
    return texts


def test_every_tokenizer_load_the_docs_show_passes_trust_remote_code():
    """A folder of this family has `auto_map` in config.json, which `AutoTokenizer` reads first: without
    `trust_remote_code=True` it prompts (docs/inference.md)."""
    calls = [
        (where, line.strip())
        for where, text in _doc_texts().items()
        for line in text.splitlines()
        if re.search(r"AutoTokenizer\.from_pretrained\(", line)
    ]
    assert calls
    bare = [(where, line) for where, line in calls if "trust_remote_code" not in line and "**kw" not in line]
    assert bare == []


@pytest.mark.slow  # a pytest session in a fresh process
def test_a_passing_test_session_leaves_nothing_in_the_temp_folder(tmp_path):
    """A passing session, its tmp_path folders, HF_HOME (the remote-code module cache) and torch's inductor cache
    included, leaves the system temp folder as it found it: pytest kept every test's tmp_path folder of the last 3
    sessions (474 MB after `make test`), and the inductor cache stayed in it too."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    tests = ["tests/test_first_use.py", "-k", "ignored_by_git or keeps_a_previous_run"]  # one writes to tmp_path
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    assert sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*")) == []


def test_exports_folder_the_docs_use_is_ignored_by_git():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    proc = subprocess.run(
        ["git", "check-ignore", "-q", "exports/sas_p-tiny/model.safetensors"], cwd=REPO, capture_output=True
    )
    assert proc.returncode == 0, "exports/ is not ignored by git"


def test_the_demo_keeps_a_previous_run(tmp_path):
    """`make demo` replaced runs/demo silently; now a previous run is kept and the new one goes beside it, with a
    note saying where (or replaces it with --overwrite)."""
    from examples.demo import output_dir_for

    demo = tmp_path / "demo"
    assert output_dir_for(demo) == (demo, None)
    demo.mkdir()
    assert output_dir_for(demo) == (demo, None)  # empty
    (demo / "metrics.json").write_text("{}")
    path, note = output_dir_for(demo)
    assert path == tmp_path / "demo-2"
    assert f"{demo} holds a previous run (kept): this run goes to {path}" in note and "--overwrite" in note
    path.mkdir()
    (path / "metrics.json").write_text("{}")
    assert output_dir_for(demo)[0] == tmp_path / "demo-3"
    assert output_dir_for(demo, overwrite=True) == (demo, None)


# ------------------------------------------------------------------------------------------------------------------
# the docs a new user reads
# ------------------------------------------------------------------------------------------------------------------
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_docs_reaches_its_file_and_heading():
    """A link to a page of the checkout names a file that exists and, with `#anchor`, one of its headings (GitHub's
    anchors; links inside code blocks are code)."""
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+\s+(.*)$", dest.read_text(), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


def test_the_recipes_table_of_training_md_names_every_preset():
    """docs/training.md's Recipes table has a row for every preset `--list-presets` prints: by name, a family's
    `<family>-<block>` row, or `-<row>` after a name of the same family."""
    from modeling_simplified.training.presets import _catalogue

    catalogue = _catalogue()
    text = (REPO / "docs" / "training.md").read_text()
    table = text[text.index("## Recipes") :].split("\n## ")[0]
    named = set()
    for row in re.findall(r"^\| (.*?) \|", table, re.M):
        family = None
        for name in re.findall(r"`([^`]+)`", row):
            if name.endswith("-<block>"):
                family = name.removesuffix("-<block>")
                named |= {p for p, (f, _) in catalogue.items() if f == family}
            elif name.startswith("-") and family:
                named.add(f"{family}{name}")
            elif name in catalogue:
                family = catalogue[name][0]
                named.add(name)
    assert sorted(set(catalogue) - named) == []


def test_the_demo_sample_of_training_md_shows_the_summary_keys_of_today():
    """The summary line `make demo` prints, as docs/training.md shows it, names today's keys in today's order (those
    of a causal-LM run: `SUMMARY_KEYS`)."""
    from modeling_simplified.training.api import SUMMARY_KEYS

    text = (REPO / "docs" / "training.md").read_text()
    (line,) = re.findall(r"^simplified-train: done in runs/demo: (.*)$", text, re.M)
    causal = ("steps", "tokens_seen", "train_loss", "train_loss_mean", "eval_loss", "perplexity")
    expected = [name for key, name in SUMMARY_KEYS.items() if key in (*causal, "training_precision", "wall_time_s")]
    assert re.findall(r'"(\w+)":', line) == expected


def test_the_readme_says_how_to_reach_the_commands_after_make_demo():
    """The commands live in .venv: the README says so (activate it, or call .venv/bin/...) before its first
    `simplified-train`, which a fresh shell otherwise answers with "command not found"."""
    text = (REPO / "README.md").read_text()
    first_command = text.index("simplified-train --")
    assert "source .venv/bin/activate" in text[:first_command] and ".venv/bin/simplified-train" in text[:first_command]
