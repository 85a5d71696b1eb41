"""Shared fixtures. Every test runs offline, with HF_HOME and the system temp folder in one folder of this session's
own, removed when the session ends."""

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

# Everything this session and its subprocesses write to the system temp folder (pytest's tmp_path folders, the
# remote-code module cache in HF_HOME, torchrun's logs, servers' homes) goes here.
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="simplified-tests-"))
os.environ["TMPDIR"] = tempfile.tempdir = str(_SESSION_TMP)
# torch.compile's kernels (torch puts them in the temp folder) go to the user's cache, kept across sessions as pip's
# is: compiled afresh, the suite's flex-attention and compile tests take minutes longer
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_CACHE / "simplified-transformers" / "torchinductor"))
os.environ["HF_HOME"] = str(_SESSION_TMP / "hf-home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import pytest  # noqa: E402


def _remove_session_tmp(keep_failed: bool) -> None:
    """Remove the session's temporary folder, or all of it but pytest's folder (the failed tests' tmp_path folders)."""
    if not _SESSION_TMP.is_dir():
        return
    for entry in _SESSION_TMP.iterdir():
        if keep_failed and entry.name.startswith("pytest-of-"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: kept
        _SESSION_TMP.rmdir()


# Again at exit (registered before torch is imported, so it runs after torch's exit hooks): a folder of torch's was
# seen made again in this folder after the session had ended.
# pytest's folder exists then only if a failing session kept it.
atexit.register(_remove_session_tmp, keep_failed=True)


@pytest.hookimpl(trylast=True)  # after pytest's own, which removes its tmp_path folders when every test passed
def pytest_sessionfinish(session, exitstatus):
    """Remove this session's temporary folder (~470 MB after `make test`); a failing session keeps only its failed
    tests' tmp_path folders (pytest's `tmp_path_retention_policy = "failed"`, pyproject.toml), named in the summary."""
    _remove_session_tmp(keep_failed=exitstatus != 0)


def pytest_terminal_summary(terminalreporter):
    if _SESSION_TMP.is_dir():
        terminalreporter.write_line(f"failed tests' tmp_path folders kept in {_SESSION_TMP}")


import torch  # noqa: E402
from hub_server import HubServer  # noqa: E402
from olah_hub import OlahHub  # noqa: E402

from modeling_simplified import BLOCK_TYPES, SimplifiedConfig, SimplifiedForMaskedLM  # noqa: E402

TINY = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)


def tiny_config(block_type: str = "pre_ln", **overrides) -> SimplifiedConfig:
    """A tiny config of the given block type (fields override TINY)."""
    return SimplifiedConfig(block_type=block_type, **{**TINY, **overrides})


def save_masked_lm_run(folder: Path, tokenizer, block_type: str = "pre_ln") -> Path:
    """A tiny masked-LM "pretrained run" in `folder` as fine-tuning reads one: config, random weights, `tokenizer`."""
    config = SimplifiedConfig(
        block_type=block_type,
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        is_causal=False,
        pad_token_id=tokenizer.pad_token_id,
    )
    SimplifiedForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@contextlib.contextmanager
def assert_no_warnings(loggers=("transformers", "datasets", "modeling_simplified", "")):
    """The block logs nothing at WARNING or above on these loggers (the root one included) and raises no Python
    warning; a warning already logged once by an earlier test is logged again (`warning_once`'s cache cleared)."""
    from transformers.utils import logging as hf_logging

    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    targets = [logging.getLogger(name) for name in loggers]
    hf_logging.warning_once.cache_clear()
    for logger in targets:
        logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for logger in targets:
            logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == []
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


def kill_after_first_checkpoint(proc: subprocess.Popen, run_dir: Path, timeout: float = 240) -> Path | None:
    """SIGKILL a training process as soon as `run_dir` holds a complete checkpoint (it must still be running then);
    returns the latest complete checkpoint after the kill."""
    from modeling_simplified.training.runs import latest_checkpoint

    deadline = time.time() + timeout
    while latest_checkpoint(run_dir) is None and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return latest_checkpoint(run_dir)


def perturb_(model: torch.nn.Module, scale: float = 0.05, seed: int = 0) -> torch.nn.Module:
    """Move every parameter away from its (often degenerate: W^Q = 0, identity attention) initial value."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return model


@pytest.fixture(params=BLOCK_TYPES)
def block_type(request) -> str:
    return request.param


def _stdlib_text(max_chars: int = 200_000) -> str:
    import inspect
    import json

    return (inspect.getsource(json) + inspect.getsource(tempfile))[:max_chars]


@pytest.fixture(scope="session")
def bpe_tokenizer():
    """A small byte-level BPE tokenizer trained locally (offline) on stdlib source; eos doubles as pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY["vocab_size"] + 200,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([_stdlib_text()], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>", bos_token="<|endoftext|>"
    )


@pytest.fixture(scope="session")
def wordpiece_tokenizer():
    """A small WordPiece tokenizer with BERT's special tokens, trained locally on stdlib text (the library's own
    `train_tokenizer`, as `simplified-train` builds it for masked-LM presets)."""
    from modeling_simplified.training.data import train_tokenizer

    return train_tokenizer("wordpiece", [_stdlib_text()], vocab_size=400)


#: `simplified-train` arguments of a small, quick masked-LM run (crammed-bert-tiny-sas_p on few documents)
MASKED = [
    "--preset",
    "crammed-bert-tiny-sas_p",
    "--set",
    "data.max_train_samples=600",
    "--set",
    "data.tokenizer_train_samples=600",
    "--set",
    "data.max_eval_samples=32",
    "--set",
    "training.per_device_train_batch_size=8",
    "--set",
    "training.batch_ramp_to=16",
    "--set",
    "training.logging_steps=2",
    "--set",
    "training.learning_rate=3e-3",
]


# the local Hub (tests/hub_server.py), shared by the Hub and Auto-class tests
TOKEN = "hf_local_test_token"


@pytest.fixture(scope="module")
def local_hub(tmp_path_factory):
    """A local Hub-protocol server (token required for writes and private reads)."""
    with HubServer(tmp_path_factory.mktemp("hub-data"), token=TOKEN) as hub:
        yield hub


@pytest.fixture
def hub_env(local_hub, monkeypatch):
    """Point this process's huggingface_hub / transformers at the local Hub (conftest turns offline mode on)."""
    import huggingface_hub.constants as constants
    import transformers.utils.hub as tf_hub

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", local_hub.url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", local_hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(tf_hub, "_hf_api", None, raising=False)  # a cached HfApi (absent before 5.5)
    monkeypatch.setenv("HF_ENDPOINT", local_hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return local_hub


@pytest.fixture(scope="session")
def olah_hub(tmp_path_factory):
    """olah, a real Hub mirror, serving the presets' datasets in their Hub layouts (tests/olah_hub.py) to the
    processes the tests start (`olah_hub.env(home)`). A mirror that cannot start fails the test, never skips it."""
    try:
        hub = OlahHub(tmp_path_factory.mktemp("olah")).build().__enter__()
    except Exception as err:  # noqa: BLE001 - one clear failure, whatever went wrong
        pytest.fail(f"the olah Hub mirror could not start: {err}", pytrace=False)
    yield hub
    hub.__exit__()


#: Shape overrides for every test that runs transformers' compiled CPU `flex_attention`: head_dim 32. With torch 2.13
#: the compiled CPU flex kernel returns wrong outputs, different from run to run, at head_dim 8 and 16 for sequence
#: lengths 8, 24 and 40 (≡ 8 mod 16), against sdpa on random tensors with a plain causal block mask (no model
#: involved); at head_dim 32 and 64 no length from 1 to 40 was wrong. A torch bug at toy head sizes, not ours.
FLEX_SHAPE = dict(hidden_size=64, num_attention_heads=2)


@pytest.fixture(autouse=True)
def _compile_flex_for_every_variant():
    """transformers compiles flex_attention once per process; every block type (q/k strides) and mask kind is a
    recompile. Past dynamo's default limit of 8 it would silently fall back to the unfused flex kernel (which
    materialises the T×T scores): every flex test, in any file, runs the compiled kernel."""
    with torch._dynamo.config.patch(recompile_limit=64):
        yield
