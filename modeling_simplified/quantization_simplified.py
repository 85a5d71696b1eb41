"""torchao weight-only quantization of every matrix, through transformers' `quantization_config`:

    AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True,
                                         quantization_config=TorchAoConfig(Int8WeightOnlyConfig()))

transformers quantizes the weight of each `nn.Linear` as it loads it. Two kinds of matrix of this family are not
one: eq. 6's reparameterised W^V / W^P (`ReparamLinear`, W = αV·W_init + βV·ΔW, recomputed at every call from four
tensors) and, with `include_input_output_embeddings=True`, a head tied to the token embedding (never loaded, so never
quantized). After loading, `quantize_every_matrix` folds each reparameterised matrix into one `nn.Linear` holding its
W and quantizes it, and quantizes a tied head (it then has its own quantized copy; the embedding lookup keeps the
float table), each with the quantizer's own config and `modules_to_not_convert`. A folded model is an inference
model: eq. 6's parts are gone, so `save_pretrained` refuses it (`QuantizedAfterLoading`); save the float model and
quantize at load.

Shipped to the Hub next to the modeling file: it imports only torch and transformers (torchao when a model is
quantized, as transformers does).
"""

import re

import torch
from torch import nn


def _torchao_quantizer(model: nn.Module):
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None or str(getattr(quantizer.quantization_config, "quant_method", "")) not in (
        "torchao",
        "QuantizationMethod.TORCHAO",
    ):
        return None
    return quantizer


def _skipped(name: str, patterns: list[str]) -> bool:
    """Whether `modules_to_not_convert` names the module `name`: itself, a parent (a prefix up to a module
    boundary), a suffix, or a regex matching it whole (transformers' rule)."""
    return any(
        name == p or name.startswith(p + ".") or name.endswith("." + p) or re.fullmatch(p, name) for p in patterns
    )


def _is_float(weight: torch.Tensor) -> bool:
    """A plain float tensor (torchao's quantized weights are tensor subclasses)."""
    return type(weight) in (torch.Tensor, nn.Parameter) and weight.is_floating_point()


def folded(module: nn.Module) -> nn.Linear:
    """An `nn.Linear` computing what a reparameterised matrix computes now: weight `module.weight` (eq. 6's
    αV·W_init + βV·ΔW), its bias (frozen or not, as it was)."""
    weight = module.weight.detach()
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=module.bias is not None)
    linear = linear.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if module.bias is not None:
            linear.bias.copy_(module.bias)
            linear.bias.requires_grad_(module.bias.requires_grad)
    return linear


def _reparameterised(model: nn.Module, reparameterised: type, skip) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, reparameterised) and not _skipped(n, skip)]


def fold_reparameterised(model: nn.Module, reparameterised: type, skip: list[str] = ()) -> list[str]:
    """Replace every `reparameterised` module (eq. 6's `ReparamLinear`) not named in `skip` by the `nn.Linear` it
    computes now (`folded`), in place; returns their names. `torchao.quantization.quantize_(model, config)` then
    quantizes them with every other linear layer."""
    names = _reparameterised(model, reparameterised, skip)
    for name in names:
        model.set_submodule(name, folded(model.get_submodule(name)))
    return names


def quantize_every_matrix(model: nn.Module, reparameterised: type) -> list[str]:
    """After transformers' torchao quantizer has loaded `model`, quantize the matrices it left in float: fold every
    `reparameterised` module (eq. 6's `ReparamLinear`) into an `nn.Linear` and quantize it, and quantize the output
    embeddings when the config has `include_input_output_embeddings`. Returns the names of the modules it
    quantized (none without a torchao quantizer). A per-module config (`FqnToConfig`) is refused for these: name
    them in `modules_to_not_convert` or pass one config."""
    quantizer = _torchao_quantizer(model)
    if quantizer is None:
        return []
    try:  # present (transformers' quantizer needs it); in a `try`, which transformers' scan of a Hub model's
        # imports skips: an export must load without torchao installed
        from torchao.quantization import FqnToConfig, quantize_
    except ImportError as err:
        raise ImportError("quantization_config with torchao needs torchao installed: pip install torchao") from err

    config = quantizer.quantization_config.get_apply_tensor_subclass()
    skip = getattr(quantizer, "modules_to_not_convert", None) or []
    reparams = _reparameterised(model, reparameterised, skip)
    head = model.get_output_embeddings() if quantizer.quantization_config.include_input_output_embeddings else None
    head_name = next((name for name, module in model.named_modules() if module is head), None)
    if head_name is not None and (not _is_float(head.weight) or _skipped(head_name, skip)):
        head_name = None
    targets = reparams + ([head_name] if head_name is not None else [])
    if isinstance(config, FqnToConfig) and targets:
        raise ValueError(
            "quantization_config: a per-module torchao config (FqnToConfig) cannot be applied to eq. 6's "
            f"reparameterised matrices or a tied head ({', '.join(targets)}): pass one config for every matrix, or "
            "name these in modules_to_not_convert."
        )
    fold_reparameterised(model, reparameterised, skip)
    for name in reparams:
        quantize_(model.get_submodule(name), config)
    if head_name is not None:
        quantize_(head, config)  # a new weight: the head no longer shares the embedding's table
        model.config.tie_word_embeddings = False
    if targets:
        model._quantized_after_loading = targets
    return targets


class QuantizedAfterLoading:
    """A mixin of the pre-trained model class: a model whose matrices `quantize_every_matrix` folded or quantized is
    an inference model, which `save_pretrained` refuses (a checkpoint of it would not load as this family)."""

    def save_pretrained(self, *args, **kwargs):
        changed = getattr(self, "_quantized_after_loading", None)
        if changed:
            raise ValueError(
                f"save_pretrained: {', '.join(changed[:3])}{', …' if len(changed) > 3 else ''} were folded (eq. 6) or "
                "untied from the embedding to be quantized after loading, so this model has no checkpoint of its "
                "family. Save the float model and pass quantization_config to from_pretrained when loading it."
            )
        return super().save_pretrained(*args, **kwargs)
