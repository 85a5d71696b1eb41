"""docs/architecture.md's and docs/config.md's parameter counts of the paper-scale presets, as the committed presets
and model code build them (on the meta device)."""

from __future__ import annotations

import functools

from modeling_simplified.hub_cards.card import count_parameters
from modeling_simplified.training.presets import load_preset, validate

from ..registry import facts

#: the presets counted, and the model class each family trains
COUNTED_PRESETS = {
    "codeparrot-pre_ln": "SimplifiedForCausalLM",
    "codeparrot-sas": "SimplifiedForCausalLM",
    "codeparrot-normformer": "SimplifiedForCausalLM",
    "crammed-bert-pre_ln": "SimplifiedForMaskedLM",
    "crammed-bert-sas": "SimplifiedForMaskedLM",
    "crammed-bert-sas_p": "SimplifiedForMaskedLM",
}


@functools.cache
def preset_parameters(preset: str) -> int:
    """The parameters of the model `preset` builds (the model card's count, on the meta device)."""
    return count_parameters(validate(load_preset(preset)), COUNTED_PRESETS[preset])


@facts("docs/architecture.md")
def paper_scale_presets() -> list[str]:
    pre_ln, sas = (preset_parameters(f"codeparrot-{b}") / 1e6 for b in ("pre_ln", "sas"))
    return [f"the paper-scale presets (vocab 50000, sinusoidal positions) build {pre_ln:.2f}M → {sas:.2f}M"]


@facts("docs/config.md")
def preset_sizes() -> list[str]:
    millions = {preset: f"{preset_parameters(preset) / 1e6:.2f}M" for preset in COUNTED_PRESETS}
    return [
        f"`codeparrot-pre_ln` has {millions['codeparrot-pre_ln']}, `codeparrot-sas` {millions['codeparrot-sas']} "
        f"and `codeparrot-normformer` {millions['codeparrot-normformer']}",
        f"`crammed-bert-pre_ln` has {millions['crammed-bert-pre_ln']}, `crammed-bert-sas` "
        f"{millions['crammed-bert-sas']} and `crammed-bert-sas_p` {millions['crammed-bert-sas_p']}",
    ]
