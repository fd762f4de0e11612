"""The Bertha platform: vLLM's CPU platform whose model forward graphs run through Legato.

Bertha is simulated: tensors live in host memory, the Legato kernels run on the Bertha emulator
and the rest of the graph (and everything outside the compiled forward: sampling, KV-cache
bookkeeping, the attention op where the library does not cover it) runs on the host CPU exactly
as on stock vLLM's CPU platform. So the platform is the CPU platform plus:

* compilation: one dynamo trace of the model's forward (`CompilationMode.DYNAMO_TRACE_ONCE`),
  handed to `vllm_legato.compile.legato_vllm_backend`, which bounds the token dimension by
  `max_num_batched_tokens` (vLLM's token budget) and runs the `legato` torch.compile backend;
* custom ops off (`custom_ops=["none"]`): RMSNorm, SiluAndMul and rotary embedding use their
  native torch implementations, so the ATen graph shows the ops the Legato library can take
  instead of opaque `_C` kernels;
* the token budget lowered to the bound at which the projections run on Legato, when chunked
  prefill allows it (`vllm_legato.budget`);
* a run report (what ran where, simulated cycles per forward step and per generated token).
"""

from __future__ import annotations

import os

from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform

import vllm_legato

logger = init_logger(__name__)

BACKEND = "vllm_legato.compile.legato_vllm_backend"
TOKEN_BOUND_ENV = "LEGATO_VLLM_TOKEN_BOUND"


class BerthaPlatform(CpuPlatform):
    # device_name / device_type stay "cpu": vLLM allocates tensors and the KV cache in host
    # memory, which is where the Bertha emulator reads and writes them.
    legato_device: str = vllm_legato.selected_device() or "bertha"

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return f"{cls.legato_device} (Legato, emulated)"

    @classmethod
    def get_attn_backend_cls(
        cls, selected_backend, attn_selector_config, num_heads: int | None = None
    ) -> str:
        """Legato's paged attention (`vllm_legato.attention`) for decoder attention; MLA and
        sparse attention stay with the CPU platform's backends."""
        from vllm_legato.attention import BACKEND_PATH

        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            return super().get_attn_backend_cls(selected_backend, attn_selector_config, num_heads)
        if selected_backend is not None and getattr(selected_backend, "name", "") != "CUSTOM":
            logger.info(
                "Bertha platform: attention backend %s replaced by LEGATO_ATTN", selected_backend
            )
        return BACKEND_PATH

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode

        cc = vllm_config.compilation_config
        mode_before = cc.mode
        super().check_and_update_config(vllm_config)
        if mode_before == CompilationMode.NONE or cc.mode == CompilationMode.NONE:
            # enforce_eager=True (or LoRA): nothing is compiled, nothing runs on Legato.
            logger.warning(
                "Bertha platform: compilation is off (enforce_eager / LoRA); the "
                "model runs eagerly on the host, not through Legato"
            )
            return
        cc.mode = CompilationMode.DYNAMO_TRACE_ONCE
        cc.backend = BACKEND
        # vLLM's compile caches (and its AOT-compiled artifacts) would replay a graph without
        # asking the backend: the Legato kernels are cached by Legato itself instead.
        os.environ["VLLM_DISABLE_COMPILE_CACHE"] = "1"
        os.environ["VLLM_USE_AOT_COMPILE"] = "0"
        # The budget at which chip_linear takes the projections (chunked prefill): the cheap
        # route to the projections on Legato (vllm_legato.budget).
        from vllm_legato import budget

        decision = budget.apply(vllm_config, cls.legato_device)
        (logger.warning if decision.capped else logger.info)(
            "Bertha platform: token budget %d (vLLM's %d): %s",
            decision.budget,
            decision.requested,
            decision.reason,
        )
        # The bound of the token dimension, for the backend (also in spawned workers).
        os.environ[TOKEN_BOUND_ENV] = str(vllm_config.scheduler_config.max_num_batched_tokens)
        # ... and of the LM head's rows (one per request: vllm_legato.lm_head)
        from vllm_legato.lm_head import MAX_SEQS_ENV

        os.environ[MAX_SEQS_ENV] = str(vllm_config.scheduler_config.max_num_seqs)
        # Native torch implementations of vLLM's custom ops: Legato sees their ATen ops.
        if "none" not in cc.custom_ops and "all" not in cc.custom_ops:
            cc.custom_ops.insert(0, "none")
        logger.info(
            "Bertha platform: device %s; forward graphs compile with %s "
            "(token dimension bounded by max_num_batched_tokens=%d)",
            cls.legato_device,
            BACKEND,
            vllm_config.scheduler_config.max_num_batched_tokens,
        )
