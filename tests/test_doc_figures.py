"""The docs' figures against the committed JSON (`experiments/doc_figures/`): every generated table is what the
JSON renders, every checked number and verdict of hand-written prose is in its page at its printed precision, a
changed result leaves the docs stale (so CI fails), and `docs/benchmark/` holds the runs the docs cite, no more."""

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from experiments import doc_figures
from experiments.doc_figures import benchruns, claims, data, exempt, prose, vocabulary
from experiments.doc_figures import text as doc_text
from experiments.doc_figures.check import Check
from experiments.doc_figures.pages import FAMILIES
from experiments.doc_figures.pages import reproduction as reproduction_page
from experiments.doc_figures.pages import reproduction_depth as depth_page
from experiments.doc_figures.pages import speed as speed_page

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_json(monkeypatch, tmp_path):
    """A copy of the committed JSON that a test may change; the tool reads the copy."""
    shutil.copytree(data.REPRODUCTION, tmp_path / "reproduction", ignore=shutil.ignore_patterns("*.png"))
    shutil.copytree(data.BENCHMARK, tmp_path / "benchmark", ignore=shutil.ignore_patterns("*.md"))
    monkeypatch.setattr(data, "REPRODUCTION", tmp_path / "reproduction")
    monkeypatch.setattr(data, "BENCHMARK", tmp_path / "benchmark")
    data.clear_cache()
    yield tmp_path
    data.clear_cache()


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("page", doc_figures.PAGES)
def test_every_generated_block_is_rendered_from_the_committed_json(page):
    text = (REPO / page).read_text()
    assert text.count("<!-- generated:") == text.count("<!-- /generated:") == len(doc_figures.blocks_in(text))
    old = {m["name"]: m[0] for m in doc_figures.BLOCK.finditer(text)}
    new = {m["name"]: m[0] for m in doc_figures.BLOCK.finditer(doc_figures.regenerate(text))}
    stale = [name for name in old if old[name] != new[name]]
    assert not stale, f"{page}: run `python -m experiments.doc_figures` (stale: {', '.join(stale)})"


def test_every_block_is_used_and_every_fact_is_in_its_page():
    used = {name for page in doc_figures.PAGES for name in doc_figures.blocks_in((REPO / page).read_text())}
    assert used == set(doc_figures.BLOCKS)
    facts = doc_figures.all_facts()
    assert len(facts) > 50 and {f.page for f in facts} <= set(doc_figures.PAGES)
    missing = Check().missing_facts()
    assert not missing, "\n".join(f"{f.page} lacks: {f.text}" for f in missing)


def test_verdict_words_are_the_committed_verdicts():
    """The generated claims tables carry each committed verdict; a prose verdict is the committed one's word."""
    page = (REPO / "docs" / "reproduction.md").read_text()
    for family in ("codeparrot-tiny", "crammed-bert-tiny"):
        result = data.reproduction(family)
        for setting in ("best_lr", "shared_lr"):
            for row in result["settings"][setting]["claims"]:
                word = doc_text.verdict_word(row["verdict"])
                assert word in ("held", "did not hold", "inconclusive"), row["verdict"]
                cell = reproduction_page.claim_cell(row)
                assert cell.lstrip("*").startswith(word) and cell in page
                # the direction, read from the command's own summary of the claim ("mean 4.0345 vs 4.5443 (-11.22%)")
                (gap,) = re.findall(r"mean [\d.]+ vs [\d.]+ \(([+-][\d.]+)%\)", row["numbers"])
                first, second = (claims.CLAIM_LABELS[b] for b in row["loss"])
                if abs(float(gap)) >= 0.05:
                    way = "ahead of" if float(gap) < 0 else "behind"
                    (by,) = re.findall(rf"{re.escape(f'{first} {way} {second} by ')}([\d.]+)%", cell) or [cell]
                    assert abs(float(by) - abs(float(gap))) <= 0.051, (cell, row["numbers"])
                else:
                    assert f"{first} level with {second}" in cell
                assert not re.search(r": [+−-]?\d", cell), cell  # no bare signed figure: the words say which way
                if word == "did not hold" and " within " in row["claim"]:
                    assert cell.endswith(", not matched")
    for row in data.reproduction(data.DEPTH)["claims"]:
        cell = depth_page.claim_cell_across(row)
        assert cell.lstrip("*").startswith(doc_text.verdict_word(row["verdict"])) and cell in page
    assert not Check().unchecked(), "\n".join(Check().unchecked())
    assert doc_text.verdict_word("did NOT hold") == "did not hold"
    assert doc_text.verdict_word("inconclusive (seeds disagree)") == "inconclusive"
    cp = data.reproduction("codeparrot-tiny")
    assert claims.in_both(cp, "SAS-P ahead of SAS") == "did not hold in either setting"
    assert claims.in_both(cp, "SAS ahead of Pre-LN") == "held in both settings"
    assert claims.in_both(cp, "SAS-P within 2% of the parallel") == (
        "did not hold at the blocks' own best lrs, inconclusive at Pre-LN's"
    )


def test_a_changed_reproduction_result_leaves_its_tables_and_prose_stale(fresh_json):
    """A rerun that changes one claim's verdict and one RaPTr loss: the claims table, the RaPTr table and the prose
    that quotes them no longer match the pages."""
    readme = (REPO / "README.md").read_text()
    reproduction = (REPO / "docs" / "reproduction.md").read_text()
    assert doc_figures.regenerate(reproduction) == reproduction and not Check().missing_facts()

    def change(result):
        (row,) = [c for c in result["settings"]["best_lr"]["claims"] if c["claim"].startswith("SAS-P ahead of SAS")]
        row["verdict"] = "held"
        result["raptr"]["equal_steps"]["raptr_minus_full_mean"] = -0.25

    _edit(fresh_json / "reproduction" / "codeparrot-tiny" / "results.json", change)
    data.clear_cache()
    regenerated = doc_figures.regenerate(reproduction)
    assert regenerated != reproduction and "**held**: SAS-P behind SAS by 1.3% (seeds 2.3%, 0.2%)" in regenerated
    missing = {(f.page, f.text) for f in Check().missing_facts()}
    assert any(page == "README.md" and "−0.250" in text for page, text in missing)
    assert any(
        page == "docs/reproduction.md" and "SAS-P ahead of SAS at equal time held" in text for page, text in missing
    )
    assert doc_figures.regenerate(readme) == readme  # the README has no reproduction table


def test_a_claim_whose_blocks_swap_places_reads_the_other_way_in_table_and_prose(fresh_json):
    """SAS and Pre-LN's losses swapped in one claim: its cell says SAS is behind, and the prose that says the
    simplified blocks are ahead in every seed no longer matches the page."""
    page = (REPO / "docs" / "reproduction.md").read_text()

    def change(result):
        row = claims.claim(result, "best_lr", "SAS within 2% of Pre-LN")
        row["loss"] = dict(zip(row["loss"], reversed(list(row["loss"].values()))))

    _edit(fresh_json / "reproduction" / "codeparrot-tiny" / "results.json", change)
    data.clear_cache()
    regenerated = doc_figures.regenerate(page)
    assert "**did not hold**: SAS behind Pre-LN by 12." in regenerated and regenerated != page
    missing = [f.text for f in Check().missing_facts() if f.page == "docs/reproduction.md"]
    assert any(text.startswith("they are NEITHER ahead nor behind of it") for text in missing), missing


def test_a_changed_depth_result_leaves_its_tables_and_prose_stale(fresh_json):
    """The depth family: a changed verdict changes the generated claims table and the prose that quotes it, a
    changed run time the prose of both pages."""
    page = (REPO / "docs" / "reproduction.md").read_text()

    def change(result):
        result["claims"][-1]["verdict"] = "inconclusive (seeds disagree)"
        result["run_time"]["training_s"] += 600

    _edit(fresh_json / "reproduction" / data.DEPTH / "results.json", change)
    data.clear_cache()
    gap = data.reproduction(data.DEPTH)["claims"][-1]["claim"]
    assert f"| {gap} | inconclusive:" in doc_figures.regenerate(page)
    missing = {(f.page, f.text) for f in Check().missing_facts()}
    assert any(p == "docs/reproduction.md" and "(inconclusive). It is" in text for p, text in missing)
    assert any(p == "docs/reproduction.md" and "minutes of training" in text for p, text in missing)


def test_a_depth_family_whose_control_fails_reads_its_claims_as_untestable(fresh_json):
    """The committed family's Pre-LN control gained from depth: the page says its claims across depths are tested.
    Had the control failed, the same prose would have to say that the setting cannot test them, and the page no
    longer matches."""
    page = " ".join((REPO / "docs" / "reproduction.md").read_text().split())
    assert "The Pre-LN control improved with depth (held), so the claims across depths are tested here" in page

    def change(result):
        control = result["claims"][0]
        control["verdict"] = "untestable in this setting (the Pre-LN control did not gain from depth)"
        control["held"], control["verdict_in_setting"] = None, "did not hold"

    _edit(fresh_json / "reproduction" / data.DEPTH / "results.json", change)
    data.clear_cache()
    missing = {text for p, text in ((f.page, f.text) for f in Check().missing_facts()) if p.endswith("reproduction.md")}
    assert any("so this setting cannot test Fig. 6's claims across depths" in text for text in missing)
    assert any("So Fig. 6's contrast does not hold in miniature" in text for text in missing)


def test_a_changed_benchmark_run_leaves_the_speed_tables_and_prose_stale(fresh_json):
    speed = (REPO / "docs" / "speed.md").read_text()
    _edit(fresh_json / "benchmark" / "run16.json", lambda run: run["raptr"].update(half_over_full_median=0.7))
    data.clear_cache()
    assert "| 0.673 | 0.644 | 0.640 | 0.700 |" in doc_figures.regenerate(speed)
    missing = [f for f in Check().missing_facts() if f.page == "docs/raptr.md"]
    assert [f.text for f in missing] and all("0.640–0.700" in f.text for f in missing)


def test_a_changed_run_meta_leaves_the_host_prose_stale(fresh_json):
    """The host figures come from a run's `meta`: a precision run whose bf16 peak is above its float32 one changes the
    words of docs/speed.md and docs/inference.md, and runs that disagree on the torch version stop the check."""

    def faster_bf16(run):
        run["meta"]["gemm_peak_gflops"] = {"float32": 150.0, "bf16": 600.0}

    _edit(fresh_json / "benchmark" / "bf16precision1.json", faster_bf16)
    _edit(fresh_json / "benchmark" / "bf16decode1.json", faster_bf16)
    data.clear_cache()
    missing = {(f.page, f.text) for f in Check().missing_facts()}
    assert ("docs/inference.md", "On that host the bf16 GEMM peak is NOT below the float32 one") in missing
    assert any(
        page == "docs/speed.md" and "is 4.00 of its float32 one (600 against 150" in text for page, text in missing
    )
    _edit(fresh_json / "benchmark" / "run16.json", lambda run: run["meta"].update(torch="2.14.0+cpu"))
    data.clear_cache()
    with pytest.raises(ValueError, match="reword it"):
        speed_page.protocol()


def test_the_check_command_passes_on_the_committed_docs_and_rewrites_nothing():
    before = {page: (REPO / page).read_text() for page in doc_figures.PAGES}
    done = subprocess.run(
        [sys.executable, "-m", "experiments.doc_figures", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert {page: (REPO / page).read_text() for page in doc_figures.PAGES} == before


def test_an_unknown_block_is_refused_by_name():
    with pytest.raises(KeyError, match="unknown generated block 'nope'"):
        doc_figures.regenerate("<!-- generated:nope -->\n| x |\n<!-- /generated:nope -->")


def test_docs_benchmark_holds_the_runs_the_docs_cite_and_every_cited_file_exists():
    """Every file of docs/benchmark/ is named by a current page or tool (older runs live in git history and the
    CHANGELOG), and every docs/benchmark/ file a page or tool names is there."""
    sources = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").rglob("*.py")]
    sources += [*(REPO / "experiments" / "doc_figures").rglob("*.py"), REPO / "tests" / "test_benchmark.py"]
    text = "\n".join(p.read_text() for p in sources)
    runs = {*benchruns.CURRENT_RUNS, *benchruns.DECODE_RUNS, *benchruns.FAST_HOST_RUNS, *benchruns.BF16_RUNS}
    runs |= set(re.findall(r'\brun\("(\w+)"\)', text))  # the files the tool reads by name: `run("gemv")`
    for path in sorted((REPO / "docs" / "benchmark").iterdir()):
        cited = path.name in text or path.stem in runs  # a run cited by the tool: its JSON and its tables
        assert cited, f"docs/benchmark/{path.name} is cited by no page or tool"
    for name in set(re.findall(r"benchmark/([\w.]+\.(?:json|md))", text)):
        assert (REPO / "docs" / "benchmark" / name).exists(), name


def test_every_page_is_read_the_changelog_and_every_docs_page_among_them():
    assert doc_figures.PAGES[:2] == ("README.md", "CHANGELOG.md")
    assert {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")} <= set(doc_figures.PAGES)


def test_every_result_of_every_page_is_checked_exempt_by_a_named_rule_or_counted_as_pending():
    assert not Check().unchecked(), "\n".join(Check().unchecked())


def test_the_pending_ledger_counts_exactly_what_is_unchecked():
    """`exempt.PENDING` is exact: each (page, kind) it lists holds that many unchecked results, and no other page or
    kind holds any, so a covered result must be struck off and a new unchecked one fails the check."""
    counted = Counter(
        (p.page, p.kind.removeprefix("a ").removesuffix(" neither checked nor exempt")) for p in Check().pending()
    )
    assert dict(counted) == exempt.PENDING


def _page(text: str, facts: tuple[str, ...] = ()) -> prose.Page:
    return prose.Page.read("p.md", text, list(facts), doc_figures.BLOCK)


def _unchecked(text: str, kind: str, facts: tuple[str, ...] = ()) -> list[str]:
    return [p.found for p in _page(text, facts).unchecked() if p.kind == f"a {kind} neither checked nor exempt"]


@pytest.mark.parametrize(
    ("text", "exempt_"),
    [
        ("run `simplified-train --max-steps 200`", True),
        ('the paper says "throughput increases of 16%"', True),
        ("as Fig. 6 and Table 1 show, and §4.2, App. D.1, eq. 5", True),
        ("transformers 5.24 and torch 2.13.0, on 2026-11-27", True),
        ("12 blocks, d = 64, lr 2e-3, 4 heads", True),
        ("GPT-2's head, SST-2, SmolLM2-135M, flash-attention-2, SHA-256, Apache-2.0", True),
        ("GPT-2 at 1.3", False),
        ("see [8.1](#81-checkpoint-conversion) and [1 Layers](#1-layers-of-the-package)", True),
        ("GPT-2 and SmolLM2-135M in run 14 and runs 9–12", True),
        ("runs 1.1–1.7× faster", False),
        ("seeds 0 and 1, seed 0 / 1, [seed 0, seed 1]", True),
        ("GPT-2's config, SST-2, SHA-256", True),
        ("seeds 10%, 12%", False),
        ("two seeds differ by 3", False),
        ("sas_p / pre_ln is 1.123", False),
        ("an effective rank 0.98 after the last block", False),
        ("SAS ahead by 11%", False),
        ("about 4× Pre-LN's", False),
        ("205K tokens", False),
    ],
)
def test_a_number_is_exempt_only_by_a_rule(text, exempt_):
    assert (not _unchecked(text, vocabulary.NUMBER)) == exempt_


@pytest.mark.parametrize(
    ("text", "kind", "found"),
    [
        (
            "It did NOT hold; Held; INCONCLUSIVE; held-out; the lr held constant",
            vocabulary.VERDICT,
            ["did NOT hold", "Held", "INCONCLUSIVE"],
        ),
        (
            "in both seeds, two attention calls, about two-thirds; one-row product, one by one",
            vocabulary.NUMBER_WORD,
            ["both", "two", "two-thirds"],
        ),
        (
            "sas is slower, ahead of Pre-LN, no more than that; each other",
            vocabulary.COMPARISON,
            ["slower", "ahead", "more"],
        ),
        (
            "the table pools `bf16run3` and bf16run4.json, runs 13–16; `--max-steps 200`",
            vocabulary.RUN_NAME,
            ["bf16run3", "bf16run4", "runs 13–16"],
        ),
        ('"the paper shows it", see [the runs](#held), `sas faster`', vocabulary.VERDICT, []),
    ],
)
def test_words_and_run_names_are_results_unless_a_rule_exempts_them(text, kind, found):
    assert _unchecked(text, kind) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # a distributive ranges over what it names; before a claim, run, seed, lr or sweep it is a result
        ("each block's own lr, every field, Each of them", []),
        (
            "every run meets, each seed ended, every claim, each lr, every sweep",
            ["every", "each", "every", "each", "every"],
        ),
        # one as a pronoun, the code's output as a unit, a method one thing at a time
        ("this one goes, the float32 one, each one's, the first one registers, let one tell", []),
        ("raises one `ValueError`, one such line, one error, one difference at a time", []),
        # one as a count stays a result
        ("in one seed, one run, the one gap left, one module", ["one", "one", "one", "one"]),
    ],
)
def test_the_distributive_and_pronoun_rules_exempt_no_count(text, found):
    assert _unchecked(text, vocabulary.NUMBER_WORD) == found


@pytest.mark.parametrize(
    ("text", "kind", "found"),
    [
        # a place on the page, a statistic named by its code, ε's place: exempt; a comparison of results: not
        ("the sections below, as above, [above](#x), the tables below are generated", vocabulary.COMPARISON, []),
        ("the largest `|f(X) − X|`, RMSNorm with ε outside the root", vocabulary.COMPARISON, []),
        ("sas_p is above its bound, 1.07 is below.", vocabulary.COMPARISON, ["above", "below"]),
        # half the bytes is bf16's size; half a result is a result
        ("where half the bytes would allow `2×`; half the runs met it", vocabulary.NUMBER_WORD, ["half"]),
        # a benchmark's module is code; the run of the same name is a result
        ("`python -m benchmarks.stream_resume` wrote `stream_resume`", vocabulary.RUN_NAME, ["stream_resume"]),
        # settings: rounds, warm-ups, a row, a process of a thread
        ("three rounds after one warm-up, one row, one process of two threads", vocabulary.NUMBER_WORD, []),
        # what a comparison holds fixed and the determinism invariant: exempt; an outcome stated the same way: not
        (
            "at equal measured time, in the same run, on the same cores, where every token is the same; `generate` "
            "is bit-identical across processes",
            vocabulary.COMPARISON,
            [],
        ),
        (
            "the lr is the same at every step, bit-identical logits, equal to the kernel's, a different order",
            vocabulary.COMPARISON,
            ["same", "identical", "equal", "different"],
        ),
        (
            "they are not matched, pre-training did not beat it, it helped",
            vocabulary.VERDICT,
            ["not matched", "did not beat", "helped"],
        ),
    ],
)
def test_the_rules_for_places_statistics_formats_modules_and_settings(text, kind, found):
    assert _unchecked(text, kind) == found


def test_no_longer_and_if_at_all_compare_nothing_but_longer_does():
    assert _unchecked("no longer does, pays if at all, a longer run", vocabulary.COMPARISON) == ["longer"]


def test_a_fact_checks_the_words_it_holds():
    assert not _page("SAS ahead of Pre-LN did not hold.", ("SAS ahead of Pre-LN did not hold",)).unchecked()


def test_every_exempt_rule_is_named_and_exempts_something_on_some_page():
    """The rules are the list in docs/development.md, and none is dead: each exempts a result of some page."""
    check = Check()
    used = {rule.why for page in doc_figures.PAGES for rule, spans in check.page(page).rules if spans}
    assert used == {rule.why for rule in exempt.EXEMPT}


def test_a_mutation_changes_every_result_wherever_it_stands():
    page = _page(
        "x: SAS is 1.25 faster in both seeds, it held; `bf16run3`", ("SAS is 1.25 faster in both seeds, it held",)
    )
    found = {(m.kind, m.old, m.new) for m in prose.mutations(page)}
    assert found == {
        ("number", "1.25", "1.26"),
        ("number word", "both", "neither"),
        ("verdict", "held", "did not hold"),
        ("comparison", "faster", "slower"),
        ("run name", "bf16run3", "bf16run1"),
    }
    first = min(prose.mutations(page), key=lambda m: m.at)
    assert first.apply(page.text).startswith("x: SAS is 1.26 faster")
    assert vocabulary.bump("0.99") == "0.98" and vocabulary.bump("−0.050") == "−0.051"


def test_a_result_outside_the_checked_text_is_missed():
    """The harness itself: a comparison word written beside a fact, outside it, is a result no check reads."""
    check = Check()
    text = (REPO / "docs" / "fine_tuning.md").read_text()
    fact = check.facts["docs/fine_tuning.md"][0]
    text = text.replace(fact, fact + " ahead", 1)
    assert [p for p in check.problems("docs/fine_tuning.md", text) if p.found == "ahead"]
    found = check.coverage("docs/fine_tuning.md", text)
    assert [m for m in found.pending if m.kind == "comparison" and m.old == "ahead"]


def test_the_check_catches_a_sample_of_the_mutations_of_checked_results():
    """The fast sample: every 40th mutation of a checked result, over every page, is caught."""
    found = Check().coverage_of_every_page(every=40)
    assert sum(found.caught.values()) > 50 and not found.missed, "\n".join(
        f"{m.page}: {m.kind} {m.old!r} → {m.new!r} in …{m.context}…" for m in found.missed
    )


@pytest.mark.slow
def test_the_check_catches_every_mutation_of_a_result():
    """Every result of every page changed in turn: each is caught, exempt by a rule, or counted by exempt.PENDING
    (and so missed); a checked result whose change the check misses fails this test."""
    found = Check().coverage_of_every_page()
    assert sum(found.caught.values()) > 1000 and len(found.pending) == sum(exempt.PENDING.values())
    assert not found.missed, "\n".join(
        f"{m.page}: {m.kind} {m.old!r} → {m.new!r} in …{m.context}…" for m in found.missed
    )


def test_the_tool_is_small_modules_and_no_page_family_imports_another():
    """Every module of the package stays under 800 lines, and a page family's module imports only the shared
    mechanism and modules of its own family, so that one page's facts are read in one place."""
    package = REPO / "experiments" / "doc_figures"
    for path in package.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 800, path
    for modules in FAMILIES.values():
        own = {m.__name__.rsplit(".", 1)[1] for m in modules}
        for module in modules:
            siblings = set(re.findall(r"^from \.(\w+) import", Path(module.__file__).read_text(), re.MULTILINE))
            assert siblings <= own, (module.__name__, siblings - own)
    listed = {m.__name__.rsplit(".", 1)[1] for modules in FAMILIES.values() for m in modules}
    assert listed == {p.stem for p in (package / "pages").glob("*.py") if p.stem != "__init__"}
