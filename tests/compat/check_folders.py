"""Load the reference folders under the transformers installed in THIS interpreter (a compat venv: torch and
transformers only, not this package), in a fresh process, with `trust_remote_code=True`.

`check_folders.py REF_DIR` (a supported transformers): every folder loads, its logits match the reference
(atol 1e-5), a packed row (no mask, no cache) gives its sequences' logits run alone, and its greedy `generate` with a
dynamic cache gives the reference tokens, and the same with a static cache and with `use_cache=False`.
`check_folders.py REF_DIR --expect-refusal` (a transformers below the floor): every folder, loaded with its weights
file replaced by garbage, raises one ImportError naming the required and the installed transformers version — so
the refusal comes before any weight is read. Prints one line per folder; exits 1 on any failure.
"""

import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import transformers


def packed_row_error(model) -> float:
    """One row packing sequences of 3, 6 and 4 tokens (positions restarting at 0, no mask, no cache: a padding-free
    training batch) against each sequence alone: the largest logit difference (transformers 5.23 changed how masks
    see packed rows)."""
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(1, model.config.vocab_size, (n,), generator=gen) for n in (3, 6, 4)]
    positions = torch.cat([torch.arange(len(s)) for s in seqs])[None]
    no_cache = {"use_cache": False} if model.config.is_causal else {}  # (the masked LM never builds one)
    with torch.no_grad():
        packed = model(input_ids=torch.cat(seqs)[None], position_ids=positions, **no_cache).logits[0]
        alone = torch.cat([model(input_ids=s[None], **no_cache).logits[0] for s in seqs])
    return float((packed - alone).abs().max())


def check(ref_dir: Path, case: dict) -> str:
    ref = torch.load(ref_dir / case["reference"])
    model = getattr(transformers, case["auto"]).from_pretrained(ref_dir / case["dir"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    with torch.no_grad():
        logits = model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).logits
    diff = float((logits - ref["logits"]).abs().max())
    assert logits.shape == ref["logits"].shape and diff <= 1e-5, f"logits differ from the reference by {diff:.3g}"
    packed = packed_row_error(model)
    assert packed <= 1e-5, f"a packed row's logits differ from its sequences run alone by {packed:.3g}"
    if "generated" in ref:
        kw = dict(max_new_tokens=5, do_sample=False, eos_token_id=None, pad_token_id=0)
        cached = model.generate(ref["input_ids"][:1], **kw).tolist()
        uncached = model.generate(ref["input_ids"][:1], use_cache=False, **kw).tolist()
        static = model.generate(ref["input_ids"][:1], cache_implementation="static", **kw).tolist()
        assert cached == ref["generated"], f"cached generate {cached} != reference {ref['generated']}"
        assert uncached == cached, f"generate without cache {uncached} != with cache {cached}"
        assert static == cached, f"generate with a static cache {static} != with a dynamic cache {cached}"
        generate = "generate: dynamic cache = reference = static cache = no cache"
        return f"ok (max |logits diff| {diff:.1e}, packed row {packed:.1e}, {generate})"
    return f"ok (max |logits diff| {diff:.1e}, packed row {packed:.1e})"


def refusal(ref_dir: Path, case: dict) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / case["dir"]
        shutil.copytree(ref_dir / case["dir"], folder)
        (folder / "model.safetensors").write_bytes(b"not a safetensors file")  # touched -> a different error
        try:
            getattr(transformers, case["auto"]).from_pretrained(folder, trust_remote_code=True)
        except ImportError as exc:
            message = str(exc)
            assert f"transformers {transformers.__version__} is installed" in message, message
            assert "transformers>=" in message, message
            return f"refused: {message}"
        raise AssertionError("loaded without the version error")


def main() -> int:
    ref_dir = Path(sys.argv[1]).resolve()
    expect_refusal = "--expect-refusal" in sys.argv[2:]
    torch.set_num_threads(1)
    failures = 0
    for case in json.loads((ref_dir / "manifest.json").read_text()):
        try:
            result = (refusal if expect_refusal else check)(ref_dir, case)
        except Exception as exc:  # report every folder, then fail
            failures += 1
            result = f"FAIL {type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc(limit=-3)
        print(f"transformers {transformers.__version__} {case['name']}: {result}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
