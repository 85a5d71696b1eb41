"""The record both codes write of one parity run: the per-step training loss and lr, the final eval loss on the eval
batches, and each parameter's shape, trainability, AdamW group and whether AdamW updated it. Plain Python and torch:
`our_side` imports it, and `their_side.py`, a script run by the authors' venv (transformers 4.30), imports it from
this folder."""

import torch


def trained_record(trainer, model: torch.nn.Module, eval_ids: torch.Tensor, batch: int, params=None) -> dict:
    """The common part of a run's record, after `trainer.train()`; `trainer.record` holds the per-step loss and lr,
    `params` the named parameters to report (default: the model's)."""
    decay = {id(p): group["weight_decay"] for group in trainer.optimizer.param_groups for p in group["params"]}
    model.eval()
    with torch.no_grad():
        losses = [
            float(model(input_ids=eval_ids[i : i + batch], labels=eval_ids[i : i + batch]).loss)
            for i in range(0, eval_ids.shape[0], batch)
        ]
    params = dict(model.named_parameters()) if params is None else params
    return {
        "train_loss": trainer.record["loss"],
        "lr": trainer.record["lr"],
        "eval_loss": sum(losses) / len(losses),
        "parameters": {
            name: {
                "shape": list(p.shape),
                "trainable": p.requires_grad,
                "weight_decay": decay.get(id(p)),
                # AdamW keeps state only for a parameter that had a gradient: one unused in the forward has none
                "updated": bool(trainer.optimizer.state.get(p)),
            }
            for name, p in params.items()
        },
    }


def parameter_stats(p: torch.Tensor) -> dict:
    """Mean, std and largest magnitude of one parameter."""
    x = p.detach().double()
    return {"mean": float(x.mean()), "std": float(x.std()) if x.numel() > 1 else 0.0, "absmax": float(x.abs().max())}


def optimizer_class(trainer) -> str:
    """The class of the trainer's optimizer (the one inside accelerate's wrapper) with its module."""
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    return f"{type(optimizer).__module__}.{type(optimizer).__name__}"
