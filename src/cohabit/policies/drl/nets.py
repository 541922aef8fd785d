"""Harmony-DRL's networks in torch (Bao et al., ToN'22, Fig. 7 and Fig. 9, §VII-A).

* :class:`PolicyNet` — job embedding (a fully connected layer per job token), a transformer
  encoder (2 layers, 128 units, 8 heads) over the concurrent jobs (no positional encoding: the
  job set is orderless), and a decoder: the interval's previous decisions, embedded, are
  attended to (8 heads) by the current job's encoding; that, the current job's encoding and the
  mean over all jobs go through 2 fully connected layers of 128 (ReLU) to ``2M`` logits; invalid
  actions get probability 0 (masked before the softmax). ``heads=1`` is Table II's ablation.
* :class:`ValueNet` (``PolicyNet`` with ``value=True``) — the same shape with a linear head:
  ``V(s)``, the actor-critic baseline.
* :class:`RewardNet` — job/placement embedding (2 fully connected layers), a transformer
  encoder (2 layers, 128, 8 heads) and a linear output per job: its predicted normalised speed.

Importing this module imports torch; the policy imports it only when it is built.
"""

from __future__ import annotations

import torch
from torch import nn

from .state import L, decision_dim, job_dim

HIDDEN, HEADS, LAYERS = 128, 8, 2


def _encoder(heads: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(HIDDEN, heads, dim_feedforward=HIDDEN, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)


class PolicyNet(nn.Module):
    """Policy (``value=False``: ``2M`` logits) or value network (``value=True``: one number)."""

    def __init__(self, m: int, heads: int = HEADS, value: bool = False) -> None:
        super().__init__()
        self.m, self.heads, self.value = m, heads, value
        self.embed = nn.Linear(job_dim(m), HIDDEN)
        self.encoder = _encoder(heads)
        self.dec_embed = nn.Linear(decision_dim(m), HIDDEN)
        self.start = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.attn = nn.MultiheadAttention(HIDDEN, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(3 * HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, 1 if value else 2 * m))

    def forward(self, jobs: torch.Tensor, job_pad: torch.Tensor, current: torch.Tensor, decisions: torch.Tensor,
                dec_pad: torch.Tensor) -> torch.Tensor:
        """``jobs`` B x N x job_dim, ``job_pad`` B x N (True = padding), ``current`` B (index of the job
        being placed), ``decisions`` B x P x decision_dim, ``dec_pad`` B x P. Returns B x 2M logits
        (policy) or B (value)."""
        h = self.encoder(self.embed(jobs), src_key_padding_mask=job_pad)
        keep = (~job_pad).unsqueeze(-1).float()
        mean = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        cur = h[torch.arange(h.shape[0]), current]
        b = jobs.shape[0]
        keys = torch.cat([self.start.expand(b, 1, HIDDEN), self.dec_embed(decisions)], dim=1)
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool), dec_pad], dim=1)
        att, _ = self.attn(cur.unsqueeze(1), keys, keys, key_padding_mask=pad, need_weights=False)
        out = self.mlp(torch.cat([cur, mean, att.squeeze(1)], dim=-1))
        return out.squeeze(-1) if self.value else out


def masked_log_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the valid actions only (invalid ones get probability 0, §V-A)."""
    return torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


class RewardNet(nn.Module):
    """Predicted normalised speed of every job from (model, workers, PS, placement) (Fig. 9)."""

    def __init__(self, m: int, heads: int = HEADS) -> None:
        super().__init__()
        self.m = m
        self.embed = nn.Sequential(nn.Linear(reward_dim(m), HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN))
        self.encoder = _encoder(heads)
        self.out = nn.Linear(HIDDEN, 1)

    def forward(self, jobs: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """B x N x reward_dim -> B x N speeds in (0, 1]."""
        h = self.encoder(self.embed(jobs), src_key_padding_mask=pad)
        return torch.sigmoid(self.out(h).squeeze(-1))


def reward_dim(m: int) -> int:
    """Size of a reward-model job token: model one-hot, workers, PS, placement (M x 2)."""
    return L + 2 + 2 * m + 1


def pad_batch(seqs: list[torch.Tensor], dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack variable-length ``n_i x dim`` tensors into B x N_max x dim with a padding mask."""
    n = max((s.shape[0] for s in seqs), default=0)
    out = torch.zeros(len(seqs), max(n, 1), dim)
    pad = torch.ones(len(seqs), max(n, 1), dtype=torch.bool)
    for i, s in enumerate(seqs):
        if s.shape[0]:
            out[i, : s.shape[0]] = s
            pad[i, : s.shape[0]] = False
    return out, pad
