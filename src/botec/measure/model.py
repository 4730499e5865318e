"""A reference decoder-only transformer, in the spirit of nanoGPT: small, readable, no abstraction
that is not paid for. Built from an :class:`botec.architecture.Architecture` (dense models)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from botec.architecture import Architecture


@dataclass(frozen=True)
class Proxy:
    """How the measured model was scaled down from the contract's (1 = the real shape)."""

    width_divisor: int
    layer_divisor: int

    @property
    def is_full_size(self) -> bool:
        return self.width_divisor == 1 and self.layer_divisor == 1


def scaled(arch: Architecture, proxy: Proxy) -> Architecture:
    """The architecture with widths (hidden, FFN, heads) divided by ``width_divisor`` and layers by
    ``layer_divisor``; head width, vocabulary and MLP kind kept, so per-layer structure is the same."""
    if proxy.is_full_size:
        return arch
    heads = max(1, arch.attention_heads // proxy.width_divisor)
    kv_heads = max(1, min(heads, arch.kv_heads // proxy.width_divisor))
    while heads % kv_heads:
        kv_heads -= 1
    head_dim = arch.resolved_head_dim
    return replace(arch, name=f"{arch.name} (proxy ÷{proxy.width_divisor} width, ÷{proxy.layer_divisor} layers)",
                   layers=max(1, arch.layers // proxy.layer_divisor), hidden_size=heads * head_dim,
                   attention_heads=heads, kv_heads=kv_heads, head_dim=None,
                   ffn_size=max(1, arch.ffn_size // proxy.width_divisor), moe=None, mla=None, mtp_layers=0)


def choose_proxy(arch: Architecture, max_parameters: float) -> Proxy:
    """The smallest scale-down (widths first, then layers) that brings the model under ``max_parameters``."""
    from botec.architecture import breakdown

    divisor, layer_divisor = 1, 1
    while breakdown(scaled(arch, Proxy(divisor, layer_divisor))).total > max_parameters:
        if arch.attention_heads // (divisor * 2) >= 1:
            divisor *= 2
        elif arch.layers // (layer_divisor * 2) >= 1:
            layer_divisor *= 2
        else:
            break
    return Proxy(divisor, layer_divisor)


class Norm(nn.Module):
    def __init__(self, width: int, kind: str):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if kind == "layernorm" else None

    def forward(self, x):
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(nn.Module):
    def __init__(self, arch: Architecture):
        super().__init__()
        h, a, k, d = arch.hidden_size, arch.attention_heads, arch.kv_heads, arch.resolved_head_dim
        qkv_bias = arch.attention_bias in ("qkv", "all")
        self.heads, self.kv_heads, self.head_dim = a, k, d
        self.q = nn.Linear(h, a * d, bias=qkv_bias)
        self.kv = nn.Linear(h, 2 * k * d, bias=qkv_bias)
        self.out = nn.Linear(a * d, h, bias=arch.attention_bias == "all")

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        if self.kv_heads != self.heads:  # grouped-query attention: share each KV head
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, arch: Architecture):
        super().__init__()
        h, f, bias = arch.hidden_size, arch.ffn_size, arch.mlp_bias
        self.gated = arch.mlp == "gated"
        self.up = nn.Linear(h, f * (2 if self.gated else 1), bias=bias)
        self.down = nn.Linear(f, h, bias=bias)

    def forward(self, x):
        if self.gated:
            gate, up = self.up(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, arch: Architecture):
        super().__init__()
        self.norm1, self.attention = Norm(arch.hidden_size, arch.norm), Attention(arch)
        self.norm2, self.mlp = Norm(arch.hidden_size, arch.norm), MLP(arch)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Embeddings, pre-norm blocks, a final norm and the LM head (tied when the architecture ties it)."""

    def __init__(self, arch: Architecture):
        super().__init__()
        if arch.moe or arch.mla:
            raise ValueError("the reference model is dense; measure a dense proxy of this architecture")
        self.embed = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.positions = nn.Embedding(arch.position_embeddings, arch.hidden_size) if arch.position_embeddings else None
        self.blocks = nn.ModuleList(Block(arch) for _ in range(arch.layers))
        self.norm = Norm(arch.hidden_size, arch.norm)
        self.head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)
        if arch.tied_embeddings:
            self.head.weight = self.embed.weight
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02 / math.sqrt(2 * max(arch.layers, 1)))

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
