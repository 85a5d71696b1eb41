"""The authors' training code on the parity batches; run with the authors' venv's python (`venv.py`), never imported by
the project (it needs transformers 4.30 and their source on `sys.path`).

`python their_side.py JOB.json` reads one job: their source folder, the batches file, the hydra overrides that select
the block (their `exp_scripts/baseline_comparison.sh`) and shape, the seed, the optimizers to train with, the steps,
batch and lr, and where to write. For each optimizer it builds their model from the seed exactly as `run_clm.py` does
(the lines are cited below), trains it with their `MyTrainer` (their AdamW parameter groups) and TrainingArguments
built as `run_clm.py` builds them, on the batches in order, and writes the per-step training loss and lr, the final
eval loss on the eval batches, every parameter's AdamW group and its init statistics. With `save_init` it also saves
the initial weights in their format (`config.json`, `model.safetensors`), which `simplified-convert original` reads.

Deviations from `run_clm.py`, all forced by the CPU and the shared batches (README of `experiments/authors_parity`):
no fp16 autocast (`fp16=True` needs a GPU; both sides train in float32), `max_steps` instead of one epoch of
CodeParrot, the batches in their stored order (a `SequentialSampler`, not the Trainer's seeded shuffle), no
gradient accumulation, no evaluation during training, `GPT2Config(...)` instead of `AutoConfig.from_pretrained("gpt2",
...)` (the Hub is unreachable: every field that differs from GPT2Config's defaults in gpt2's config.json is
overridden by their call), and an empty `wandb` module (`report_to="none"`: it is never called).
"""

import json
import math
import sys
import tempfile
import types
from pathlib import Path

from run_record import optimizer_class, parameter_stats, trained_record  # this folder: the script's sys.path[0]


def main(job_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    sys.path.insert(0, job["src"])
    import torch
    import transformers
    from hydra import compose, initialize_config_dir
    from safetensors.torch import save_file
    from simplified_transformers import model_utils
    from torch.utils.data import Dataset, SequentialSampler
    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments, default_data_collator
    from transformers.trainer import Trainer  # noqa: F401  (imported before the stub: it looks for a real wandb)

    # train_utils imports wandb at module level and calls it only when reporting to wandb (report_to is "none"):
    # an empty module stands in while it is imported
    sys.modules["wandb"] = types.ModuleType("wandb")
    try:
        from simplified_transformers import train_utils
    finally:
        del sys.modules["wandb"]

    torch.set_num_threads(int(job.get("threads", 1)))
    data = torch.load(job["data"], weights_only=True)
    train_ids, eval_ids = data["train"], data["eval"]
    steps, batch = int(job["steps"]), int(job["batch"])
    if train_ids.shape[0] < steps * batch:
        raise SystemExit(f"{job['data']}: {train_ids.shape[0]} windows, the job needs {steps * batch}.")

    # their @hydra.main has no version_base: hydra 1.1 semantics
    with initialize_config_dir(
        config_dir=str(Path(job["src"], "simplified_transformers", "config")), version_base="1.1"
    ):
        cfg = compose(config_name="config", overrides=[*job["overrides"], f"seed={job['seed']}"])

    def build_model():
        """run_clm.py, `launch`: set_seed (l. 26), AutoConfig (l. 79-93), GPT2LMHeadModel (l. 94), the update of their
        keys (l. 96-133) and convertGPT2model (l. 135)."""
        transformers.set_seed(cfg.seed)
        model_config = GPT2Config(
            vocab_size=int(job["vocab_size"]),
            n_ctx=int(job["seq_len"]),
            bos_token_id=int(job["bos_token_id"]),
            eos_token_id=int(job["eos_token_id"]),
            resid_pdrop=cfg.model.resid_pdrop,
            attn_pdrop=cfg.model.attn_pdrop,
            embd_pdrop=cfg.model.embd_pdrop,
            n_layer=cfg.model.n_layer,
            n_head=cfg.model.n_head,
            n_embd=cfg.model.n_embd,
            n_inner=int(cfg.model.n_embd * cfg.model.mlp_width_mult),
            initializer_range=cfg.model.initializer_range,
            output_attentions=cfg.report_attn_entropy,
            output_hidden_states=cfg.report_outliers,
        )
        model = GPT2LMHeadModel(model_config)
        keys = (
            "attn_block_resid_gain attn_block_skip_gain mlp_block_resid_gain mlp_block_skip_gain attn_mat_resid_gain "
            "attn_mat_skip_gain value_resid_gain first_layer_value_resid_gain value_skip_gain proj_resid_gain "
            "last_layer_proj_resid_gain proj_skip_gain trainable_attn_block_gains trainable_mlp_block_gains "
            "trainable_attn_mat_gains trainable_value_gains trainable_proj_gains norm_type val_proj_init_std "
            "query_init_std key_init_std centre_attn centre_attn_gain val_init_type proj_init_type "
            "activation_function lrelu_neg_slope mlp_proj_init_std parallel_layers norm_position tie_valproj_init "
            "qk_norm_type dot_norm_type"
        ).split()
        model_config.update({k: cfg.model[k] for k in keys})
        return model_utils.convertGPT2model(model, model_config), model_config

    class Batches(Dataset):
        def __len__(self):
            return steps * batch

        def __getitem__(self, i):
            return {"input_ids": train_ids[i], "labels": train_ids[i]}

    class ParityTrainer(train_utils.MyTrainer):
        """Their MyTrainer; the batches in order, and each step's loss and lr recorded."""

        def _get_train_sampler(self):
            return SequentialSampler(self.train_dataset)

        def compute_loss(self, model, inputs, return_outputs=False):
            out = super().compute_loss(model, inputs, return_outputs)
            loss = out[0] if return_outputs else out
            self.record["loss"].append(float(loss.detach()))
            self.record["lr"].append(float(self.lr_scheduler.get_last_lr()[0]))
            return out

    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    for optim in job["optims"]:
        model, model_config = build_model()
        # float64 on request (exact parity below float32's rounding); their W_init attribute stays float32 and is
        # promoted where it is added to a float64 weight
        model.to(getattr(torch, job.get("dtype", "float32")))
        params = dict(model.named_parameters())
        init = {n: parameter_stats(p) for n, p in params.items()}
        if job.get("save_init") and optim == job["optims"][0]:
            folder = out / "init"
            folder.mkdir(exist_ok=True)
            model_config.to_json_file(str(folder / "config.json"))
            save_file(
                {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                folder / "model.safetensors",
            )
        with tempfile.TemporaryDirectory() as tmp:
            # run_clm.py l. 143-163, with the deviations listed in the module docstring
            args = TrainingArguments(
                output_dir=tmp,
                per_device_train_batch_size=batch,
                per_device_eval_batch_size=batch,
                evaluation_strategy="no",
                logging_steps=max(1, steps // 10),
                gradient_accumulation_steps=1,
                max_steps=steps,
                weight_decay=cfg.train.weight_decay,
                warmup_ratio=cfg.train.warmup_ratio,
                lr_scheduler_type=cfg.train.lr_scheduler_type,
                learning_rate=float(job["learning_rate"]),
                save_strategy="no",
                fp16=False,
                report_to="none",
                adam_epsilon=cfg.train.adam_epsilon,
                max_grad_norm=cfg.train.max_grad_norm,
                optim=optim,
                no_cuda=True,
                disable_tqdm=True,
            )
            args.report_gains = cfg.report_gains
            args.report_attn_entropy = cfg.report_attn_entropy
            args.report_outliers = cfg.report_outliers
            trainer = ParityTrainer(
                model=model, args=args, data_collator=default_data_collator, train_dataset=Batches()
            )
            trainer.record = {"loss": [], "lr": []}
            trainer.train()
        record = {
            "code": "theirs",
            "optimizer": optim,
            "dtype": job.get("dtype", "float32"),
            "optimizer_class": optimizer_class(trainer),
            "seed": int(cfg.seed),
            "overrides": job["overrides"],
            "config": {k: _plain(v) for k, v in model_config.to_dict().items() if not isinstance(v, dict)},
            **trained_record(trainer, model, eval_ids, batch, params),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }
        for name, row in record["parameters"].items():
            row["init"] = init[name]
        (out / f"{optim}.json").write_text(json.dumps(record, indent=1))
        print(
            f"theirs {job['name']} {optim}: loss {record['train_loss'][0]:.4f} -> {record['train_loss'][-1]:.4f}",
            flush=True,
        )


def _plain(v):
    return (
        v
        if v is None or isinstance(v, (bool, int, float, str)) and not (isinstance(v, float) and math.isnan(v))
        else str(v)
    )


if __name__ == "__main__":
    main(sys.argv[1])
