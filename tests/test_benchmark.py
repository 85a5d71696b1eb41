"""The benchmark suite (`make bench`): its statistics, its FLOP bound, its sections and smoke runs at a tiny shape.
Speed itself is measured by `make bench`, never asserted by a test."""

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import transformers

from benchmarks import before_after, benchmark, common, gemv, parallel_gemm, targets
from benchmarks.common import (
    CPU_FLAGS,
    QUICK,
    Context,
    build,
    ids,
    matmul_flops_per_token,
    optimizer_for,
    ratios,
    train_step,
)
from benchmarks.sections import SECTIONS, generate, mfu, profile
from benchmarks.sections.allocator import MALLOC_KEEP
from benchmarks.sections.train import ANCHORS, TRAIN_GROUPS
from modeling_simplified.configuration_simplified import BLOCK_TYPES

ROOT = Path(__file__).resolve().parent.parent


def test_ratios_are_per_round_and_of_minimum_times():
    results = {
        "pre_ln": {"times_s": [2.0, 4.0, 3.0], "min_s": 2.0},
        "sas_p": {"times_s": [1.0, 4.0, 2.0], "min_s": 1.0},
    }
    r = ratios(results, "pre_ln")["sas_p"]
    assert r["ratio_median"] == pytest.approx(1.5)  # per round: 2.0, 1.0, 1.5
    assert (r["ratio_low"], r["ratio_high"]) == (1.0, 2.0)
    assert r["ratio_of_min"] == 2.0


def test_host_record_is_the_one_record_of_where_a_measurement_ran(monkeypatch):
    """`benchmarks.benchmark`'s meta and `experiments.depth_speed`'s JSON both start from `common.host_record`: the
    command, the machine with its CPU count, the versions, the commit, the load, malloc's environment, the CPU flags
    and a GEMM peak per precision."""
    from experiments import depth_speed

    assert benchmark.host_record is depth_speed.host_record is common.host_record
    peaks = {"float32": 1.0, "bf16": 0.5}
    monkeypatch.setattr(common, "gemm_peaks", lambda device: peaks)  # (minutes on a loaded 2-core host)
    record = common.host_record("python -m x --jobs 2")
    assert record["command"] == "python -m x --jobs 2" and f", {os.cpu_count()} CPUs, " in record["machine"]
    assert (record["torch"], record["transformers"]) == (torch.__version__, transformers.__version__)
    assert len(record["load_average_at_start"]) == 3 and record["malloc_env"] == common.malloc_env()
    assert set(record["cpu_flags"]) <= set(CPU_FLAGS) and record["gemm_peak_gflops"] is peaks
    assert record["commit"] is None or record["commit"] == common.commit()


@pytest.mark.slow
def test_train_process_times_its_own_steps_and_reports_its_model():
    """Each model trains in a process of its own; its steps are timed there and its build is reported, and a
    worker that cannot build its model raises the error in the parent instead of hanging the round-robin."""
    worker = common.TrainProcess("pre_ln", QUICK)
    try:
        with torch.device("meta"):
            model = build("pre_ln", QUICK)
        assert worker.info == {
            "params": sum(p.numel() for p in model.parameters()),
            "flops": matmul_flops_per_token(model, QUICK),
            "malloc_env": common.malloc_env(),
        }
        results = common.round_robin({"pre_ln": worker}, lambda _name, w: w.step(), rounds=2)
        assert len(results["pre_ln"]["times_s"]) == 2 and results["pre_ln"]["min_s"] > 0
        assert results["pre_ln"]["cpu_median_s"] > 0
    finally:
        worker.close()
    with pytest.raises(ValueError, match="block_type"):
        common.TrainProcess("no_such_block", QUICK)


def test_flop_bound_counts_the_removed_value_and_projection_matrices():
    """At the CodeParrot shape SAS-P drops 2d² of 12d² block weights (plus layer 1 keeping its eq. 6 W^V):
    the bound is about 1.14, and GPT-2 and our pre_ln have the same GEMMs."""
    shape = common.Shape()
    flops = {}
    for name in ("gpt2", "pre_ln", "sas_p", "llama", "pre_ln_llama"):
        with torch.device("meta"):
            flops[name] = matmul_flops_per_token(build(name, shape), shape)
    assert flops["gpt2"] == flops["pre_ln"] and flops["llama"] == flops["pre_ln_llama"]
    assert 1.13 < flops["pre_ln"] / flops["sas_p"] < 1.15


@pytest.mark.slow  # about a minute on 2 cores: the default suite keeps the unit tests above
def test_quick_run_prints_and_writes_every_section(tmp_path, capsys):
    out = tmp_path / "bench.json"
    sections = "train,mfu,generate,score,kv_cache,memory,step_memory,profile,raptr,packing,loss,allocator"
    assert benchmark.main(["--quick", "--sections", sections, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    titles = (
        "Training step, eager",
        "MFU",
        "Cached generate()",
        "Scoring (forward only",
        "KV cache per token",
        "Peak memory",
        "glibc trimming freed memory",
        "Profile of one eager",
        "RaPTr",
        "Packing",
        "Fused LM head",
        "glibc malloc",
    )
    for title in titles:
        assert title in printed
    result = json.loads(out.read_text())
    meta = result["meta"]
    assert meta["shape"]["layers"] == QUICK.layers and meta["transformers"] == transformers.__version__
    assert meta["finished"] >= meta["date"] and len(meta["load_average_at_end"]) == 3
    train = result["train"]
    assert set(train) == {name for group in TRAIN_GROUPS for name in group}
    assert train["pre_ln"]["vs_pre_ln"]["ratio_median"] == 1.0 and "vs_gpt2" in train["pre_ln"]
    assert "vs_llama" in train["pre_ln_llama"] and train["pre_ln_llama"]["params_M"] == train["llama"]["params_M"]
    assert train["pre_ln_llama"]["flop_bound_vs_llama"] == 1.0
    assert all(len(row["times_s"]) == 2 for row in train.values())
    mfu = result["mfu"]
    assert 0 < mfu["sas_p"]["mfu"] < 1 and mfu["sas_p"]["gemm_calls"] > 0 and 0 < mfu["sas_p"]["gemm_time_share"]
    assert len({row["peak_gflops"] for row in mfu.values()}) == 1  # one peak for every model
    assert set(result["generate"]) == {"batch_1", "batch_8"}
    assert result["generate"]["batch_1"]["gpt2"]["weight_bound_vs_gpt2"] == 1.0
    assert 1.05 < result["generate"]["batch_1"]["sas_p"]["weight_bound_vs_gpt2"] < 1.2  # no value, no projection
    score = result["score"]
    assert set(score) == {"2x32", "1x64"} and score["2x32"]["pre_ln"]["vs_pre_ln"]["ratio_median"] == 1.0
    assert score["2x32"]["sas_p"]["flop_bound_vs_pre_ln"] > 1.0 and score["2x32"]["gpt2"]["flop_bound_vs_gpt2"] == 1.0
    assert set(result["memory"]) == {"64", "128"} and result["memory"]["128"]["eager_MiB"] > 0
    kv = result["kv_cache"]
    assert set(kv) == {"gpt2", *BLOCK_TYPES} and kv["gpt2"]["vs_gpt2"] == 1.0
    assert kv["gpt2"]["bytes_per_token"] == 2 * QUICK.layers * QUICK.width * 4  # keys and values, float32
    step = result["step_memory"]
    assert set(step) == {"gpt2", "pre_ln", "sas_p"} and all(r["peak_growth_MiB"] > 0 for r in step.values())
    assert set(result["profile"]) == {"eager", "compiled", "decode"}
    for dtype, decode in result["profile"]["decode"].items():
        assert decode["tokens"] == 16 and 0 < decode["kernel_ms_per_token"] <= decode["ms_per_token"], dtype
        assert decode["weight_bytes"] > 0 and decode["top_kernels"], dtype
    for profiles in (result["profile"]["eager"], result["profile"]["compiled"]):
        sas_p = profiles["sas_p"]
        assert set(profiles) == {"pre_ln", "sas", "sas_p"} and len(sas_p["top"]) == 12
        assert any(e["op"] == "aten::mm" for e in sas_p["top"]) and sas_p["categories_ms"]["gemm"] > 0
        assert sum(sas_p["categories_ms"].values()) == pytest.approx(sas_p["total_self_ms"])
        assert len(sas_p["excess_over_pre_ln"]) == 8 and "excess_over_pre_ln" not in profiles["pre_ln"]
    raptr = result["raptr"]
    assert raptr["layers_kept"] * 2 == raptr["num_layers"] and raptr["half_over_full_median"] > 0
    packing = result["packing"]
    assert packing["tokens"] < packing["padded_tokens"] and packing["sas_p"]["packed"]["tokens_per_s"] > 0
    allocator = result["allocator"]["sas_p"]
    seen = allocator["malloc_env"]  # each child's own environment
    assert seen["keep"].items() >= MALLOC_KEEP.items() and not set(seen["default"]) & set(MALLOC_KEEP)
    assert allocator["keep_speedup"]["ratio_median"] > 0
    loss = result["loss"]["sas_p"]
    assert (
        loss["fused"]["peak_MiB"] > 0 and loss["logits"]["peak_MiB"] > 0 and loss["fused_speedup"]["ratio_median"] > 0
    )


@pytest.mark.slow
def test_quick_bf16_run_measures_its_sections_in_bf16(tmp_path, capsys):
    """`--dtype bf16`: training steps under bf16 autocast (the GEMMs the MFU section records are bf16), inference with
    bf16 weights, the float32-only sections skipped with a note; `precision` compares both on this host."""
    out = tmp_path / "bench.json"
    sections = "train,mfu,generate,precision,memory"
    assert benchmark.main(["--quick", "--dtype", "bf16", "--sections", sections, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(section memory skipped in bf16: it measures float32 only)" in printed
    result = json.loads(out.read_text())
    assert set(result) == {"meta", "train", "mfu", "generate", "precision"} and result["meta"]["dtype"] == "bf16"
    assert result["mfu"]["pre_ln"]["peak_gemm"].endswith("bfloat16")
    precision = result["precision"]
    assert set(precision["train"]) == {"pre_ln", "sas_p"} and set(precision["generate_batch_1"]) == {"pre_ln", "sas_p"}
    assert set(precision["generate_batch_1_compiled"]) == {"pre_ln", "sas_p"}
    assert precision["peak_ratio"] == pytest.approx(
        precision["gemm_peak_gflops"]["bf16"] / precision["gemm_peak_gflops"]["float32"]
    )
    assert all(r["bf16_vs_float32"]["ratio_median"] > 0 for r in precision["train"].values())


@pytest.mark.slow
def test_compiled_generate_section_times_the_recipe(monkeypatch):
    """`generate_compiled` times `generate.compile_for_decoding`'s models (one per batch size, with a static cache)
    round-robin, with ratios to GPT-2 beside the weight-bytes bound; two models and one batch size here (each
    compiles)."""
    monkeypatch.setattr(generate, "NAMES", ("gpt2", "sas_p"))
    monkeypatch.setattr(generate, "BATCHES", (2,))
    compiled = []
    recipe = generate.compile_for_decoding
    monkeypatch.setattr(generate, "compile_for_decoding", lambda model: compiled.append(model) or recipe(model))
    result = SECTIONS["generate_compiled"].run(Context(shape=QUICK, rounds=1, quick=True, dtype="bf16"))
    assert len(compiled) == 2 and all(next(m.parameters()).dtype == torch.bfloat16 for m in compiled)
    rows = result["batch_2"]
    assert set(rows) == {"gpt2", "sas_p"} and rows["gpt2"]["vs_gpt2"]["ratio_median"] == 1.0
    assert rows["sas_p"]["weight_bound_vs_gpt2"] > 1 and "Compiled generate()" in SECTIONS["generate_compiled"].table(
        result
    )


def test_train_step_autocasts_only_in_bf16():
    """`common.train_step(dtype="bf16")` runs the forward under bf16 autocast (the Trainer's `bf16=True`): the
    blocks' matmuls in bf16, the weights and their gradients float32."""
    seen = []
    model = build("pre_ln", QUICK).train()
    model.model.layers[0].mlp.fc_in.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    for dtype in ("float32", "bf16"):
        train_step(model, optimizer_for(model), ids(QUICK), dtype=dtype)
    assert seen == [torch.float32, torch.bfloat16]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_targets_pool_every_round_of_every_run_against_the_bound():
    """The pooled figure is the median of every round's ratio of every run; a target is met when it reaches its
    fraction of the bound; pre_ln / GPT-2 counts only runs on a host with a 400 GFLOP/s GEMM peak."""

    def run(sas_p_times, peak):
        row = {"times_s": [1.0, 1.0, 1.0]}
        return {
            "mfu": {"pre_ln": {"peak_gflops": peak}},
            "train": {
                "gpt2": {"times_s": [1.4, 1.4, 1.4]},
                "pre_ln": row,
                "sas_p": {"times_s": sas_p_times, "flop_bound_vs_pre_ln": 1.139},
                "sas": {"times_s": [1.0, 1.0, 1.0], "flop_bound_vs_pre_ln": 1.139},
            },
        }

    # per-round ratios 1/t: run a 1.25, 1.0, 1.1; run b 1.0, 1.0, 1.05: pooled median 1.025 < 0.96 × 1.139
    runs = {"a": run([0.8, 1.0, 1 / 1.1], 450.0), "b": run([1.0, 1.0, 1 / 1.05], 200.0)}
    sas_p = targets.evaluate(targets.TARGETS[0], runs)
    assert sas_p["runs"]["a"]["ratio"] == pytest.approx(1.1) and sas_p["runs"]["b"]["ratio"] == pytest.approx(1.0)
    assert sas_p["pooled"]["ratio"] == pytest.approx(1.025) and sas_p["pooled"]["rounds"] == 6
    assert sas_p["pooled"]["met"] is False and sas_p["runs"]["a"]["met"] is True  # 1.1 ≥ 0.96 × 1.139 = 1.093
    gpt2 = targets.evaluate(targets.TARGETS[2], runs)
    assert gpt2["runs"]["b"]["excluded"] == "host peak 200 GFLOP/s < 400" and gpt2["pooled"]["rounds"] == 3
    assert gpt2["pooled"]["ratio"] == pytest.approx(1.4) and gpt2["pooled"]["met"] is True
    assert targets.evaluate(targets.TARGETS[3], runs)["pooled"] is None  # no llama group in these runs
    rows = targets.table(runs).splitlines()
    assert rows[0] == "GEMM peak per run (GFLOP/s): a 450, b 200."
    assert rows[4].startswith("| training: sas_p / pre_ln ≥ 0.96 × FLOP bound |") and rows[4].endswith("| NO |")
    assert "[not counted: host peak 200 GFLOP/s < 400]" in rows[6]


def test_bf16_targets_count_only_bf16_runs_on_hosts_with_bf16_units():
    """`--dtype bf16`'s targets: bf16's speed-up over float32 per round from the `precision` section, against 0.85 of
    the host's own bf16 / float32 GEMM-peak ratio; a run counts only when it measured in bf16 on a host with bf16
    units (its CPU flags), whatever its peaks."""

    def run(peaks, flags=("avx512f", "avx512_bf16"), dtype="bf16", mfu=0.4, peak_dtype="bfloat16"):
        return {
            "meta": {"dtype": dtype, "gemm_peak_gflops": dict(zip(("float32", "bf16"), peaks)), "cpu_flags": flags},
            "mfu": {"pre_ln": {"peak_gflops": peaks[1], "mfu": mfu, "peak_gemm": f"mm (8, 8) x (8, 8) {peak_dtype}"}},
            "precision": {
                "peak_ratio": peaks[1] / peaks[0],
                "train": {"pre_ln": {"float32": {"times_s": [6.0, 6.0]}, "bf16": {"times_s": [2.0, 3.0]}}},
            },
        }

    runs = {
        "fast": run((200.0, 900.0)),
        "slow": run((200.0, 440.0), flags=("avx512f", "amx_bf16"), mfu=0.7),
        "float32_peak": run((300.0, 150.0), mfu=0.9, peak_dtype="float32"),
        "emulated": run((200.0, 300.0), flags=("avx2", "avx512f")),
        "float32": run((200.0, 900.0), dtype="float32"),
    }
    step = targets.evaluate(targets.BF16_TARGETS[0], runs)
    assert step["runs"]["fast"]["ratio"] == pytest.approx(2.5) and step["runs"]["fast"]["excluded"] is None
    assert step["runs"]["fast"]["met"] is False  # 2.5 < 0.85 × 4.5
    assert step["runs"]["slow"]["excluded"] is None and step["runs"]["slow"]["met"] is True  # 2.5 ≥ 0.85 × 2.2
    assert step["runs"]["emulated"]["excluded"] == "no bf16 units (none of avx512_bf16, amx_bf16)"
    assert step["runs"]["float32"]["excluded"] == "not a --dtype bf16 run"
    assert step["pooled"]["rounds"] == 6 and step["pooled"]["bound"] == pytest.approx((4.5 + 2.2 + 0.5) / 3)
    # MFU counts against a bf16 GEMM's peak only: the float32-peaked run's 90% is left out of the pooled median
    assert targets.mfu_excluded(runs["float32_peak"]) == "its peak is a float32 GEMM's (mm (8, 8) x (8, 8) float32)"
    pooled = targets.pooled_bf16_mfu(runs)["pre_ln"]
    assert (pooled["median"], pooled["runs"], pooled["met"]) == (pytest.approx(0.55), 2, False)
    printed = targets.table(runs, bf16=True)
    assert "fast 200 / 900" in printed and "bf16 MFU per run (target ≥ 60%): fast pre_ln 40.0%" in printed
    assert "Pooled (median of the counted runs, range): pre_ln 55.0% (40.0%-70.0%; 2 runs) NOT met." in printed


def test_mfu_peak_is_a_gemm_of_the_runs_precision():
    """A bf16 step also runs float32 GEMMs (closed-form gradients in float32); the MFU's peak is the best GEMM of the
    run's precision, whichever precision is the faster on the host."""
    gemms = {
        ("mm", (8, 8), (8, 8), True, True, "torch.bfloat16"): 1.0,
        ("bmm", (2, 8, 8), (2, 8, 8), True, True, "torch.float32"): 1.0,
    }
    assert mfu.in_precision(gemms, torch.bfloat16) == [next(iter(gemms))]
    assert mfu.in_precision(gemms, torch.float32) == [list(gemms)[1]]


def test_profile_sorts_time_into_gemms_attention_and_the_rest_and_diffs_against_pre_ln():
    """Compiled graphs' keys lose their hash (two models' graphs compare); the excess over pre_ln is per operator."""
    assert profile.op_name("## Call CompiledFxGraph f4hpqcexd ##") == "## Call CompiledFxGraph ##"
    assert profile.op_name("Torch-Compiled Region: 0/2") == "Torch-Compiled Region"
    categories = {op: profile.category(op) for op in ("aten::mm", "mkldnn::_linear_pointwise", "aten::add_")}
    assert categories == {"aten::mm": "gemm", "mkldnn::_linear_pointwise": "gemm", "aten::add_": "rest"}
    assert profile.category("aten::_scaled_dot_product_flash_attention_for_cpu_backward") == "attention kernel"
    base = {"ops": {"aten::mm": {"calls": 4, "self_ms": 10.0}, "aten::mul": {"calls": 2, "self_ms": 1.0}}}
    shaped = {"ops": {"aten::mm": {"calls": 3, "self_ms": 8.0}, "aten::mul": {"calls": 6, "self_ms": 3.0}}}
    excess = profile.excess_over(shaped, base, top=2)
    assert [(e["op"], e["excess_ms"], e["calls"], e["base_calls"]) for e in excess] == [
        ("aten::mul", 2.0, 6, 2),
        ("aten::mm", -2.0, 3, 4),
    ]


def test_parallel_gemm_compares_equal_products_and_prints_each_ratio(capsys):
    """The fused products the script times compute what the separate ones do (else the ratio compares unlike work)."""
    table = parallel_gemm.cases(tokens=16, width=8, qk=12, mlp=20)
    joins = {"forward": lambda p: torch.cat(p, 1), "input gradient": lambda t: t, "weight gradient": torch.cat}
    for name, pair in table.items():
        torch.testing.assert_close(joins[name](pair["separate"]()), pair["fused"](), rtol=1e-5, atol=1e-5)
    assert parallel_gemm.main(["--rounds", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| forward",
        "| input gradient",
        "| weight gradient",
        "| all three",
    ]


@pytest.mark.slow
def test_before_after_times_each_checkout_in_its_own_process(tmp_path, capsys):
    """`benchmarks.before_after` runs a case in two checkouts (here the same one twice), alternating, and writes the
    per-round ratios; each worker imports the checkout it runs in."""
    root = ROOT
    out = tmp_path / "ba.json"
    assert before_after.main([str(root), str(root), "--quick", "--only", "train pre_ln 2x", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    (case,) = results["cases"].values()
    assert len(case["times_s"]["before"]) == len(case["times_s"]["after"]) == results["rounds"]
    assert case["ratio_low"] <= case["ratio_median"] <= case["ratio_high"]
    assert "train pre_ln 2x32" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="exited with code 1"):  # a worker that cannot build its case
        before_after.Worker(root, {"kind": "train", "model": "no_such_model", "shape": {}})


def test_train_groups_cover_every_block_type_beside_pre_ln():
    """Every block type is timed in a group with pre_ln (its ratio's base); a new block type fails here until a group
    holds it. The other names are the anchors: transformers' classes and our block configured like them."""
    grouped = {name for group in TRAIN_GROUPS if "pre_ln" in group for name in group}
    assert set(BLOCK_TYPES) <= grouped, f"block types in no train group with pre_ln: {set(BLOCK_TYPES) - grouped}"
    named = {name for group in TRAIN_GROUPS for name in group}
    assert named - set(BLOCK_TYPES) == (set(ANCHORS) | set(ANCHORS.values())) - set(BLOCK_TYPES)


def test_every_section_is_registered_with_run_table_and_its_device():
    assert list(SECTIONS) == [
        "train",
        "mfu",
        "generate",
        "generate_compiled",
        "precision",
        "quantization",
        "score",
        "kv_cache",
        "memory",
        "step_memory",
        "compile",
        "profile",
        "raptr",
        "packing",
        "loss",
        "allocator",
    ]
    for name, section in SECTIONS.items():
        assert callable(section.run) and callable(section.table), name
        assert isinstance(section.ON_CUDA, bool) and isinstance(section.BF16, bool), name
        assert section.__doc__.startswith(f"`{name}`"), name  # the docstring says what the section measures
    assert benchmark.CUDA_SECTIONS == (
        "train",
        "mfu",
        "generate",
        "generate_compiled",
        "precision",
        "score",
        "kv_cache",
        "compile",
        "loss",
    )
    assert benchmark.BF16_SECTIONS == (
        "train",
        "mfu",
        "generate",
        "generate_compiled",
        "precision",
        "score",
        "compile",
        "profile",
    )


@pytest.mark.slow
def test_a_quick_section_runs_end_to_end(tmp_path, capsys):
    """`python -m benchmarks.benchmark --quick` of a cheap section: its table printed, its JSON written with the
    run's meta (the precision, the CPU's flags and both GEMM peaks); an unknown section is refused with the allowed
    names."""
    out = tmp_path / "bench.json"
    assert benchmark.main(["--quick", "--sections", "raptr", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\n## RaPTr: a training step on 2/4 layers vs a full step (pre_ln)\n" in printed
    result = json.loads(out.read_text())
    assert set(result) == {"meta", "raptr"} and result["meta"]["shape"] == asdict(QUICK)
    meta = result["meta"]
    assert meta["dtype"] == "float32" and set(meta["gemm_peak_gflops"]) == {"float32", "bf16"}
    assert all(peak > 0 for peak in meta["gemm_peak_gflops"].values()) and set(meta["cpu_flags"]) <= set(CPU_FLAGS)
    assert "GEMM peak" in printed and "GFLOP/s bf16" in printed
    assert result["raptr"]["half_over_full_median"] > 0
    with pytest.raises(SystemExit):
        benchmark.main(["--sections", "train,nothing"])
    assert "unknown nothing; allowed: train, mfu," in capsys.readouterr().err


def test_gemv_rates_print_and_write(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gemv, "SHAPES", ((64, 32),))
    monkeypatch.setattr(gemv, "BYTES", 64 * 32 * 4 * 3)
    for dtype in ("float32", "bf16"):
        assert gemv.main(["--dtype", dtype, "--json", str(tmp_path / "gemv.json")]) == 0
        result = json.loads((tmp_path / "gemv.json").read_text())
        (row,) = result["rows"]
        assert row["out"] == 64 and row["f_linear_GBps"] > 0 and row["linear_GBps"] > 0 and row["two_column_GBps"] > 0
        assert result["meta"]["dtype"] == dtype and (row.get("float32_linear_GBps", 0) > 0) is (dtype == "bf16")
        assert f"{dtype} weights" in capsys.readouterr().out


def test_kv_cache_per_token_is_keys_and_values_of_every_layer():
    result = SECTIONS["kv_cache"].run(common.Context(shape=QUICK, quick=True))
    per_token = 2 * QUICK.layers * QUICK.width * 4  # float32 keys and values, no grouped-query heads at this shape
    assert {r["bytes_per_token"] for r in result.values()} == {per_token}
    assert "| sas_p | " in SECTIONS["kv_cache"].table(result)
