"""Positions and embeddings of the simplified-transformers model: the token embedding (scaled or not), BERT's token
types, the positions added at the embedding (sinusoidal, learned) or applied in the attention (rotary), and the checks
and defaults of position ids (learned positions' range, packed rows' positions from flash-attention's lengths).

Shipped to the Hub next to the modeling file: it imports only torch and the configuration.
"""

import math

import torch
from torch import nn

from .configuration_simplified import SimplifiedConfig


# ----------------------------------------------------------------------------------------------------------------
# Positions
# ----------------------------------------------------------------------------------------------------------------
class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal positions added at the embedding (Vaswani et al. 2017): no parameters, no buffers."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        self.dim = config.hidden_size

    def forward(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor):
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.dim, 2, device=inputs_embeds.device).float() / self.dim))
        angles = position_ids[..., None].float() * inv_freq
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)
        return inputs_embeds + table.to(inputs_embeds.dtype), None


class LearnedPositions(nn.Embedding):
    """Learned absolute positions (GPT-2, BERT)."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config.max_position_embeddings, config.hidden_size)

    def forward(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor):
        return inputs_embeds + super().forward(position_ids), None


class RotaryPositions(nn.Module):
    """Rotary positions (Su et al.; Llama's `rotate_half` convention): nothing is added at the embedding,
    the attention rotates queries and keys with the returned `(cos, sin)`."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__()
        self.head_dim = config.head_dim
        self.theta = config.rope_theta

    def forward(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor):
        exponent = torch.arange(0, self.head_dim, 2, device=inputs_embeds.device).float() / self.head_dim
        freqs = position_ids[..., None].float() / (self.theta**exponent)
        emb = torch.cat((freqs, freqs), dim=-1)
        return inputs_embeds, (emb.cos().to(inputs_embeds.dtype), emb.sin().to(inputs_embeds.dtype))


POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions, "rotary": RotaryPositions}


# ----------------------------------------------------------------------------------------------------------------
# Token embeddings and token types
# ----------------------------------------------------------------------------------------------------------------
class TokenTypeEmbedding(nn.Embedding):
    """BERT's token-type (segment) embeddings added to the token embeddings; type 0 when no ids are given."""

    def __init__(self, config: SimplifiedConfig):
        super().__init__(config.type_vocab_size, config.hidden_size)

    def forward(self, inputs_embeds: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        return inputs_embeds + super().forward(token_type_ids)


class ScaledEmbedding(nn.Embedding):
    """Token embeddings times `scale` (`scale_embedding`: sqrt(d), Vaswani et al. 2017 §3.4): the scale is part of the
    input embedding module, so `get_input_embeddings()(ids)` gives what the model adds positions to. Initialised with
    std d^-1/2 as fairseq does, so that the scaled embeddings have unit scale, the scale of a LayerNorm's output."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None, scale: float):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = scale  # (the name vLLM's and SGLang's Transformers backends look for)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids) * self.embed_scale


def build_token_embedding(config: SimplifiedConfig) -> nn.Embedding:
    args = (config.padded_vocab_size, config.hidden_size, config.pad_token_id)
    return ScaledEmbedding(*args, math.sqrt(config.hidden_size)) if config.scale_embedding else nn.Embedding(*args)


class NoTokenTypes(nn.Module):
    """No token types (`type_vocab_size=0`): the embeddings as they are."""

    def forward(self, inputs_embeds: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        return inputs_embeds


# ----------------------------------------------------------------------------------------------------------------
# Rotary positions in the attention, and position ids
# ----------------------------------------------------------------------------------------------------------------
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, position_embeddings) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate `(B, H, T, D)` queries and keys; a no-op without rotary positions."""
    if position_embeddings is None:
        return q, k
    cos, sin = (t.unsqueeze(1) for t in position_embeddings)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def positions_from_cu_seq_lens(cu_seq_lens: torch.Tensor, length: int) -> torch.Tensor:
    """Positions restarting at 0 at each packed sequence, from flash-attention's cumulative lengths `(0, n1, ...)`."""
    tokens = torch.arange(length, device=cu_seq_lens.device)
    starts = cu_seq_lens[torch.searchsorted(cu_seq_lens, tokens, right=True) - 1]
    return (tokens - starts).unsqueeze(0)


def check_learned_positions(position_ids, past_length, seq_len: int, max_positions: int) -> None:
    """Learned positions exist for ids `0..max_positions-1`: the largest id used (of the given or packed positions,
    else the last default one, `past_length + seq_len - 1`) must be below that. A packed row (positions restarting
    at each sequence) may be any length. Checked eagerly, outside compiled graphs (it reads the ids on the host)."""
    largest = (
        int(position_ids.max()) if position_ids is not None and position_ids.numel() else past_length + seq_len - 1
    )
    if int(largest) >= max_positions:
        raise ValueError(
            f"Position id {int(largest)} is out of range: this model's learned positions cover ids 0.."
            f"{max_positions - 1} (max_position_embeddings={max_positions})."
        )
