"""`Report.where`, the per-op "what ran where and why" table, on a report made up here (no
engine): every row's place, reason, node count, and its bytes and cycles averaged over the
steps of the kind asked for."""

import pytest

report = pytest.importorskip("vllm_legato.report")

pytestmark = pytest.mark.vllm


def _report():
    placement = {
        "graph": "g",
        "kernels": [
            {"name": "k0", "nodes": ["add: aten.add.Tensor", "mul: aten.mul.Tensor"], "source": ""}
        ],
        "extern": [
            {
                "node": "mm",
                "op": "aten.mm.default",
                "reason": "kernel failed: /tmp/k.py:3:9: error: too big",
            },
            {
                "node": "silu_and_mul",
                "op": "vllm_legato.silu_and_mul.default",
                "reason": "no resolver",
            },
        ],
        "host": ["_to_copy: aten._to_copy.default (index arithmetic)", "sym: sym_size"],
    }
    g = report.GraphInfo(
        0,
        40,
        [placement],
        {"vllm_legato.silu_and_mul": 2, "vllm.unified_attention_with_output": 2},
        {"mm": "MergedColumnParallelLinear", "_to_copy": "VocabParallelEmbedding"},
    )
    steps = []
    for decode, mm_bytes, silu in ((True, 100, 10), (True, 300, 30), (False, 1000, 70)):
        s = report.Step(0, 1 if decode else 9, 1, decode, 500, attn_cycles=40, attn_dram_bytes=8)
        s.host_nodes = {"mm": mm_bytes, "_to_copy": 4}
        s.host_dram_bytes = mm_bytes + 4 + 50  # the LM head: 50
        s.plugin_ops = {"silu_and_mul": [silu, 2 * silu]}
        steps.append(s)
    return report.Report("bertha", 1.0, [g], steps, "LEGATO_ATTN")


def test_where_rows():
    rows = {(r["where"], r["op"]): r for r in _report().where(decode=True)}
    mm = rows[("host", "aten.mm.default")]
    assert mm["module"] == "MergedColumnParallelLinear" and mm["nodes"] == 1
    assert mm["reason"] == "kernel failed: error: too big"  # the generated kernel's path dropped
    assert mm["bytes"] == 200  # the mean of the two decode steps
    idx = rows[("host", "aten._to_copy.default")]
    assert idx["reason"] == "index arithmetic (host by design)" and idx["bytes"] == 4
    assert ("host", "sym_size") not in rows  # shape bookkeeping is not an ATen op
    head = rows[("host", "LM head (compute_logits)")]
    assert head["bytes"] == 50
    silu = rows[("legato (plugin op)", "vllm_legato.silu_and_mul")]
    assert (silu["nodes"], silu["cycles"], silu["bytes"]) == (2, 20, 40)
    # the plugin's op is not also a host row (it is extern to the graph compiler only)
    assert not [r for (w, _), r in rows.items() if w == "host" and "silu" in r["op"]]
    attn = rows[("legato (attention backend)", "attention + KV-cache write kernels")]
    assert (attn["cycles"], attn["bytes"]) == (40, 8)
    assert rows[("legato", "aten.add.Tensor")]["nodes"] == 1
    assert sum(r["bytes"] for (w, _), r in rows.items() if w == "host") == 254


def test_where_prefill_and_table():
    rep = _report()
    rows = {(r["where"], r["op"]): r for r in rep.where(decode=False)}
    assert rows[("host", "aten.mm.default")]["bytes"] == 1000
    assert rows[("legato (plugin op)", "vllm_legato.silu_and_mul")]["cycles"] == 70
    text = rep.where_table(decode=True)
    assert text.splitlines()[0] == "  what ran where (decode steps, mean per step):"
    # host rows first, the largest bytes first
    assert "aten.mm.default [MergedColumnParallelLinear] (1 node(s), 200 B)" in text.splitlines()[1]
    assert "what ran where (prefill / mixed steps" in str(rep)


def test_lm_head_on_legato_replaces_the_host_estimate(monkeypatch, tmp_path):
    """`add_lm_head` (vllm_legato.lm_head, after the forward): the last step gets the LM head's
    kernels' cycles, bytes and MACs on Legato and its host nodes' bytes, in place of the
    estimate of vLLM's CPU LM head; `where` shows the LM head as a plugin-op row."""
    from vllm_legato import work

    path = tmp_path / "rep.json"
    monkeypatch.setenv(report.REPORT_ENV, str(path))
    monkeypatch.setattr(work, "LM_HEAD", (4, 10, 2))  # hidden 4, vocab 10, bf16
    rep = report.current()
    est_bytes, est_macs = work.lm_head_work(1)
    s = report.Step(0, 1, 1, True, 500, host_dram_bytes=7 + est_bytes, host_macs=est_macs)
    s.host_nodes = {"mm": 7}
    rep.steps.append(s)
    report.add_lm_head(30, 80, 40, 0, 0)
    report.add_lm_head(0, 0, 0, 5, 3)  # a second graph of the head, on the host
    assert (s.cycles, s.legato_dram_bytes, s.legato_macs) == (530, 80, 40)
    assert (s.host_dram_bytes, s.host_macs, s.lm_head) == (12, 3, [30, 80])
    rows = {(r["where"], r["op"]): r for r in rep.where(decode=True)}
    head = rows[("legato (plugin op)", "LM head (compute_logits)")]
    assert (head["cycles"], head["bytes"]) == (30, 80)
    assert rows[("host", "LM head (compute_logits)")]["bytes"] == 5
    assert report.load_report(str(path)).steps[-1].lm_head == [30, 80]  # written


def test_host_embedding_counts_the_rows_it_reads():
    """`work.node_work` of a host embedding: its indices and the rows it reads and writes (the
    result's bytes twice), not its whole table; an mm counts every operand and M * K * N."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    from vllm_legato import work

    table = torch.zeros(32000, 64, dtype=torch.bfloat16)
    ids, x, w = torch.zeros(5, dtype=torch.int64), torch.zeros(5, 64), torch.zeros(64, 32)
    gm = make_fx(lambda t, i, a, b: (torch.nn.functional.embedding(i, t), a @ b))(table, ids, x, w)
    nodes = {n.target._opname: n for n in work.host_nodes(gm)}
    assert work.node_work(nodes["embedding"], 5) == (5 * 8 + 2 * 5 * 64 * 2, 0)
    assert work.node_work(nodes["mm"], 5) == ((5 * 64 + 64 * 32 + 5 * 32) * 4, 5 * 64 * 32)
