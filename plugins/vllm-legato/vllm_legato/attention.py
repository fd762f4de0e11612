"""The Bertha platform's attention backend (`LEGATO_ATTN`): vLLM's paged KV cache and its
attention run as Legato kernels (`legato.torch.library.paged_attention`) on the Bertha emulator.

vLLM calls the backend from its own ops in the compiled forward (`unified_kv_cache_update`,
then `unified_attention_with_output`, opaque to dynamo), so every layer runs two Legato kernels
per forward step: `do_kv_cache_update` writes the step's keys and values into the cache through
the slot mapping, `forward` computes causal attention of the step's query tokens over the cache
through the block table (decode, prefill and chunked prefill alike: every query token attends to
the keys at positions up to its own). The cache is vLLM's tensor, laid out `LBNHC` (per layer
`[num_blocks, block_size, Hkv, 2 * head_size]` in memory: a token's key, then its value, per KV
head); the kernels address its blocks and slots, nothing copies it.

Metadata (`LegatoAttentionMetadataBuilder.build`, once per step, on the host as vLLM's builders
do): the block table and slot mapping cast to int64 (the index type the cores load), per request
its query tokens (padded to the step's query bucket by repeating the last one) and their
positions. A binary per (query-length bucket, blocks bucket), both powers of two: runtime token
and request counts, so steps of one bucket share a binary.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from vllm.config import VllmConfig
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheLayout

from legato.torch.library import paged_attention as pa
from vllm_legato import report, work

BACKEND_PATH = "vllm_legato.attention.LegatoAttentionBackend"
BACKEND_NAME = "LEGATO_ATTN"


def _register_name() -> None:
    """vLLM looks a layer's backend up by `get_name()` in its AttentionBackendEnum (an
    unknown name is an error at model construction): register ours, once per process."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    if BACKEND_NAME not in AttentionBackendEnum._member_map_:
        register_backend(BACKEND_NAME, BACKEND_PATH)


_register_name()


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass
class LegatoStats:
    """Simulated work of the attention kernels since the process started (all layers)."""

    calls: int = 0
    cycles: int = 0
    dram_bytes: int = 0
    macs: int = 0
    write_cycles: int = 0
    write_dram_bytes: int = 0
    binaries: set = field(default_factory=set)  # the PagedShape buckets compiled

    def add(self, run, write: bool) -> None:
        b = int(sum(run.dram_bytes_per_channel))
        with _lock:
            self.calls += 1
            self.cycles += int(run.cycles)
            self.dram_bytes += b
            self.macs += int(run.mac_count)
            if write:
                self.write_cycles += int(run.cycles)
                self.write_dram_bytes += b


_lock = threading.Lock()
STATS = LegatoStats()


class LegatoAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None) -> list[int | MultipleOf]:
        return [MultipleOf(16)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        # q^T [D, rep * q_len] is an MPU weight: D within the 256-row tile
        return [16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256]

    @classmethod
    def supported_kv_cache_layouts(cls) -> tuple[KVCacheLayout, ...]:
        # a token's keys and values of every KV head in one row: one DMA per token (write) and
        # one per block (read)
        return (KVCacheLayout.LBNHC,)

    @staticmethod
    def get_name() -> str:
        return BACKEND_NAME

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def get_impl_cls() -> type[LegatoAttentionImpl]:
        return LegatoAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[LegatoAttentionMetadataBuilder]:
        return LegatoAttentionMetadataBuilder


@dataclass
class LegatoAttentionMetadata:
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    query_start_loc: torch.Tensor  # [R + 1] (vLLM's; the report reads it)
    seq_lens: torch.Tensor  # [R]
    block_table: torch.Tensor  # [R, blocks] int64 (vLLM's, the bucket's columns)
    slot_mapping: torch.Tensor  # [T] int64
    tokens: torch.Tensor  # [R, q_len] int64: the query tokens of each request, padded
    positions: torch.Tensor  # [R, q_len] f32: their positions
    q_len: int
    blocks: int
    # int64 positions for a folded rotary embedding (LegatoAttentionImpl.rope): of every
    # token [T, 1] (the KV-cache write rotates its key) and of the query rows [R, q_len]
    token_positions: torch.Tensor | None = None
    query_positions: torch.Tensor | None = None


class LegatoAttentionMetadataBuilder(AttentionMetadataBuilder[LegatoAttentionMetadata]):
    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        layer_names: list[str],
        vllm_config: VllmConfig,
        device: torch.device,
    ) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> LegatoAttentionMetadata:
        cm = common_attn_metadata
        assert cm.causal is True, "LEGATO_ATTN: causal decoder attention only"
        nreq, ntok = cm.num_reqs, cm.num_actual_tokens
        qsl = cm.query_start_loc_cpu[: nreq + 1].to(torch.int64)
        seq = cm.seq_lens[:nreq].to("cpu", torch.int64)
        qlens = qsl[1:] - qsl[:-1]
        q_len = _pow2(int(qlens.max()) if nreq else 1)
        need = int(((seq + self.block_size - 1) // self.block_size).max()) if nreq else 1
        bt = cm.block_table_tensor[:nreq].to("cpu", torch.int64)
        blocks = min(_pow2(need), bt.shape[1]) if bt.shape[1] >= need else need
        if bt.shape[1] < blocks:
            bt = torch.nn.functional.pad(bt, (0, blocks - bt.shape[1]))
        bt = bt[:, :blocks].contiguous()
        # query token i of request r is token qsl[r] + i at position seq[r] - qlen[r] + i; the
        # padding repeats the request's last token (same row, same value, written twice)
        i = torch.arange(q_len, dtype=torch.int64)
        last = (qlens - 1).clamp(min=0)[:, None]
        tokens = qsl[:-1, None] + torch.minimum(i[None, :], last)
        positions = (seq - qlens)[:, None] + torch.minimum(i[None, :], last)
        # token j of request r (qsl[r] <= j < qsl[r + 1]) is at position seq[r] - qlen[r] + j - qsl[r]
        start = torch.repeat_interleave(seq - qlens - qsl[:-1], qlens)
        tok_pos = start + torch.arange(int(qlens.sum()), dtype=torch.int64)
        return LegatoAttentionMetadata(
            num_actual_tokens=ntok,
            max_query_len=cm.max_query_len,
            max_seq_len=cm.max_seq_len,
            query_start_loc=cm.query_start_loc,
            seq_lens=cm.seq_lens,
            block_table=bt,
            slot_mapping=cm.slot_mapping[:ntok].to("cpu", torch.int64).contiguous(),
            tokens=tokens.contiguous(),
            positions=positions.to(torch.float32).contiguous(),
            q_len=q_len,
            blocks=blocks,
            token_positions=tok_pos[:, None].contiguous(),
            query_positions=positions.contiguous(),
        )


class LegatoAttentionImpl(AttentionImpl):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes: list[float] | None,
        sliding_window: int | None,
        kv_cache_dtype: str,
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        unsupported = {
            "ALiBi": alibi_slopes is not None,
            "a sliding window": sliding_window not in (None, -1),
            "a logits soft cap": bool(logits_soft_cap),
            "attention sinks": sinks is not None,
            f"kv_cache_dtype={kv_cache_dtype}": kv_cache_dtype != "auto",
            f"attention type {attn_type}": attn_type != AttentionType.DECODER,
            "KV sharing": kv_sharing_target_layer_name is not None,
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise NotImplementedError(f"LEGATO_ATTN does not implement {', '.join(bad)}")
        from vllm.config import get_current_vllm_config

        from vllm_legato.platform import BerthaPlatform

        cfg = get_current_vllm_config()
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = None
        self.max_tokens = int(cfg.scheduler_config.max_num_batched_tokens)
        self.max_requests = int(cfg.scheduler_config.max_num_seqs)
        self.device = BerthaPlatform.legato_device
        # the layer's rotary embedding when it is folded into the kernels (vllm_legato.ops.
        # fold_rotary, after the model is built: vLLM's RotaryEmbedding, neox style)
        self.rope = None
        report.current().attention_backend = BACKEND_NAME
        work.set_lm_head(cfg)

    def _cos_sin(self, x: torch.Tensor) -> torch.Tensor | None:
        """The folded rotary's cos/sin cache [positions, rot] in x's dtype (None: not folded)."""
        if self.rope is None:
            return None
        return self.rope._match_cos_sin_cache_dtype(x).contiguous()

    def _shape(
        self, kv_cache: torch.Tensor, q_len: int, blocks: int, cos_sin=None
    ) -> pa.PagedShape:
        nb, _, bs, _ = kv_cache.shape  # logical [B, H, N, C]
        return pa.PagedShape(
            dtype={torch.bfloat16: "bfloat16", torch.float32: "float32"}[kv_cache.dtype],
            num_blocks=nb,
            block_size=bs,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_size=self.head_size,
            max_tokens=self.max_tokens,
            max_requests=self.max_requests,
            q_len=q_len,
            blocks=blocks,
            scale=self.scale,
            device=self.device,
            rot=0 if cos_sin is None else int(cos_sin.shape[1]),
            rope_positions=0 if cos_sin is None else int(cos_sin.shape[0]),
        )

    @staticmethod
    def _physical(kv_cache: torch.Tensor) -> torch.Tensor:
        """The layer's cache as the contiguous [num_blocks, block_size, Hkv, 2D] it is in memory
        (LBNHC): a view, never a copy."""
        phys = kv_cache.permute(0, 2, 1, 3)
        if not phys.is_contiguous():
            raise RuntimeError(
                f"LEGATO_ATTN: the KV cache {list(kv_cache.shape)} with strides "
                f"{list(kv_cache.stride())} is not in the LBNHC layout the kernels address "
                "(set VLLM_KV_CACHE_LAYOUT=LBNHC or leave it unset)"
            )
        return phys

    def do_kv_cache_update(
        self,
        layer: torch.nn.Module,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        from vllm.forward_context import get_forward_context

        md = get_forward_context().attn_metadata
        if isinstance(md, dict):
            md = md.get(layer.layer_name)
        n = int(slot_mapping.shape[0]) if md is None else md.num_actual_tokens
        if n == 0 or kv_cache.numel() == 0:
            return
        slots = md.slot_mapping if md is not None else slot_mapping[:n].to(torch.int64)
        phys = self._physical(kv_cache)
        # no metadata (a warm-up step): no positions, so no rotary (nothing reads these keys)
        cs = self._cos_sin(key) if md is not None else None
        write, _ = pa._build(self._shape(kv_cache, 1, 1, cs))
        rows = phys.view(-1, self.num_kv_heads, 2 * self.head_size)
        if cs is None:
            write(key[:n], value[:n], slots, rows)
        else:  # the folded rotary: each key rotated by its token's position before the write
            write(key[:n], value[:n], slots, rows, md.token_positions, cs)
        STATS.add(write.last_run, write=True)

    def forward(
        self,
        layer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: LegatoAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("LEGATO_ATTN: fused output quantization")
        if attn_metadata is None:  # profiling / warm-up run without a KV cache
            return output
        md = attn_metadata
        n = md.num_actual_tokens
        phys = self._physical(kv_cache)
        cs = self._cos_sin(query)
        shape = self._shape(kv_cache, md.q_len, md.blocks, cs)
        _, attend = pa._build(shape)
        STATS.binaries.add(shape)
        q = query[:n].reshape(n, self.num_heads * self.head_size)
        out = output[:n].view(n, self.num_heads * self.head_size)
        kpos = _key_positions(md.blocks * shape.block_size)
        args = (q, phys.view(shape.num_blocks, -1), md.block_table, md.tokens, md.positions)
        if cs is None:
            attend(*args, kpos, out)
        else:  # the folded rotary: each query row rotated by its position
            attend(*args, kpos, out, md.query_positions, cs)
        STATS.add(attend.last_run, write=False)
        return output


_KPOS: dict[int, torch.Tensor] = {}


def _key_positions(n: int) -> torch.Tensor:
    """[n, 1] f32 0 .. n - 1: the key positions the causal mask compares with (a constant)."""
    if n not in _KPOS:
        _KPOS[n] = torch.arange(n, dtype=torch.float32)[:, None].contiguous()
    return _KPOS[n]
