"""A reference decoder-only transformer, in the spirit of nanoGPT: small, readable, no abstraction
that is not paid for. Built from an :class:`botec.architecture.Architecture` (dense models)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from botec.architecture import Architecture, linear_matrices


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
    """One linear per matrix of :func:`botec.architecture.linear_matrices` (what LoRA adapts): q_proj, k_proj,
    v_proj, or one fused qkv_proj where the family fuses them (GPT-2, GPT-NeoX, BLOOM); o_proj."""

    def __init__(self, arch: Architecture):
        super().__init__()
        h, a, k, d = arch.hidden_size, arch.attention_heads, arch.kv_heads, arch.resolved_head_dim
        qkv_bias = arch.attention_bias in ("qkv", "all")
        self.heads, self.kv_heads, self.head_dim = a, k, d
        self.fused = "qkv" in {m.role for m in linear_matrices(arch)}
        if self.fused:
            self.qkv_proj = nn.Linear(h, (a + 2 * k) * d, bias=qkv_bias)
        else:
            self.q_proj = nn.Linear(h, a * d, bias=qkv_bias)
            self.k_proj = nn.Linear(h, k * d, bias=qkv_bias)
            self.v_proj = nn.Linear(h, k * d, bias=qkv_bias)
        self.o_proj = nn.Linear(a * d, h, bias=arch.attention_bias == "all")

    def forward(self, x):
        b, s, _ = x.shape
        if self.fused:
            q, k, v = self.qkv_proj(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                              self.kv_heads * self.head_dim], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.kv_heads != self.heads:  # grouped-query attention: share each KV head
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    """gate_proj, up_proj, down_proj (Llama's names; a plain MLP has no gate_proj)."""

    def __init__(self, arch: Architecture):
        super().__init__()
        h, f, bias = arch.hidden_size, arch.ffn_size, arch.mlp_bias
        self.gated = arch.mlp == "gated"
        if self.gated:
            self.gate_proj = nn.Linear(h, f, bias=bias)
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)

    def forward(self, x):
        if self.gated:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x)))


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


MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "qkv": "qkv_proj", "o": "o_proj", "gate": "gate_proj",
           "up": "up_proj", "down": "down_proj"}
"""The reference model's linear for each role of :class:`botec.architecture.LinearMatrix` (what LoRA adapts; the
embeddings and the LM head never are)."""


class LoraLinear(nn.Module):
    """A frozen linear plus a trainable low-rank update (Hu et al. 2021, "LoRA", eq. 3):

        y = W₀ x + (α / r) · B A x,   A: r × d_in (Kaiming-uniform, as PEFT), B: d_out × r (zeros)

    so the update starts at zero and the step trains r · (d_in + d_out) parameters instead of d_in · d_out.
    Under autocast A and B run in the autocast dtype (their FP32 weights are cast once per step); without it the
    input is cast to the adapters' dtype and the update back to the base's (as PEFT's ``lora.Linear``).
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dtype: torch.dtype):
        super().__init__()
        self.base = base.requires_grad_(False)
        device = base.weight.device
        self.lora_a = nn.Linear(base.in_features, rank, bias=False, device=device, dtype=dtype)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False, device=device, dtype=dtype)
        nn.init.kaiming_uniform_(self.lora_a.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_b.weight)
        self.scaling = alpha / rank

    def forward(self, x):
        y = self.base(x)
        if torch.is_autocast_enabled(x.device.type) or x.dtype == self.lora_a.weight.dtype:
            return y + self.lora_b(self.lora_a(x)) * self.scaling
        update = self.lora_b(self.lora_a(x.to(self.lora_a.weight.dtype))) * self.scaling
        return y + update.to(y.dtype)


def add_lora(model: Transformer, roles: tuple[str, ...], rank: int, alpha: float | None = None,
             dtype: torch.dtype = torch.float32) -> int:
    """Freeze the whole model and wrap the linears of ``roles`` (q, k, v, qkv, o, gate, up, down: the roles of the
    adapted matrices of :func:`botec.architecture.lora_parameters`) in every block in a :class:`LoraLinear`;
    returns the trainable (adapter) parameters, r · (d_in + d_out) per adapted linear. ``alpha`` defaults to the
    rank (scaling 1): it changes neither memory nor time."""
    parts = [part for block in model.blocks for part in (block.attention, block.mlp)]
    for role in roles:
        if not any(isinstance(getattr(part, MODULES[role], None), nn.Linear) for part in parts):
            raise ValueError(f"the reference model has no {MODULES[role]} to adapt")
    model.requires_grad_(False)
    for part in parts:
        for role in roles:
            if hasattr(part, MODULES[role]):
                setattr(part, MODULES[role], LoraLinear(getattr(part, MODULES[role]), rank, alpha or rank, dtype))
    return trainable_parameters(model)


def trainable_parameters(model: nn.Module) -> int:
    """Parameters that get a gradient (each once: a tied weight is one parameter)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
