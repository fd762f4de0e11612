"""Issue 13 item 3's leftovers: comparisons feeding a where / masked_fill, strided slices
(interleaved rotary), `abs`, and kernel inputs with overlapping strides. Each case runs wholly
on Legato in strict mode and equals eager bit for bit (these are selections, data movement and
exact ops)."""

import pytest
import torch

import legato.torch as lt

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def _rotate_interleaved(x):
    # GPT-J / interleaved rotary's rotate_every_two
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


CASES = {
    "where_lt": (lambda x, y: torch.where(x < y, x, y * 2), 2),
    "where_ge_scalar": (lambda x, y: torch.where((x * 2).ge(0.25), x, 0.0), 2),
    "where_eq_broadcast": (lambda x, y: torch.where(x == y[:1], 1.0, x), 2),
    "masked_fill_ne": (lambda x, y: (x + 1).masked_fill(x != y, -3.0), 2),
    "masked_fill_gt_scalar": (lambda x, y: (x + 1).masked_fill(y > 0.5, float("-inf")), 2),
    "le_two_wheres": (lambda x, y: torch.where(x <= y, x, 0.0) + torch.where(x <= y, 0.0, y), 2),
    "rotary_interleaved": (lambda x: _rotate_interleaved(x * 2) + 1, 1),
    "slice_step3_partial_chunk": (lambda x: (x * 2)[:, 1::3] + 1, 1),  # 64 = 1 + 3*21
    "slice_step4_dim0": (lambda x: (x * 2)[1::4] + 1, 1),
    "slice_step_single_element": (lambda x: (x * 2)[:, 2:7:5] + 1, 1),
    "abs": (lambda x: torch.abs(x * 3) - 1, 1),
    # bool logic of masks computed on Legato (issue 13: `bitwise_and` ran eagerly, splitting
    # the kernel in two)
    "where_and": (lambda x, y: torch.where((x < y) & (x * 2 > 0), x, y), 2),
    "masked_fill_or": (lambda x, y: (x + 1).masked_fill((x < y) | (y > 0.5), -3.0), 2),
    "where_xor": (lambda x, y: torch.where((x <= y) ^ (x > 0), x, 0.0), 2),
    "where_not": (lambda x, y: torch.where(~(x == y), x, y * 2), 2),
    "logical_ops_bool_output": (
        lambda x, y: torch.logical_or(torch.logical_and(x < y, x > 0), torch.logical_not(y < 0)),
        2,
    ),
}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_legato_and_equals_eager(name, dn):
    torch.manual_seed(0)
    f, n = CASES[name]
    args = [torch.randn(8, 64, dtype=DTYPES[dn]) for _ in range(n)]
    args[0][0, :4] = args[-1][0, :4]  # some equal elements for eq / ne / le
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(*args)
        ref = f(*args)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert y.dtype == ref.dtype and torch.equal(y, ref)


def test_comparison_whose_bool_leaves_the_kernel_is_a_bool_output():
    # torch gets the bool it expects: the kernel converts the VPU's float mask to i1 (vpu.cvt)
    # and writes it out; the where takes the i1 condition
    def f(x, y):
        m = x < y
        return torch.where(m, x, y), m

    x, y = torch.randn(8, 64), torch.randn(8, 64)
    x[0, :3] = torch.tensor([float("nan"), 1.0, -0.0])
    y[0, :3] = torch.tensor([0.0, 1.0, 0.0])
    with torch.no_grad():
        r, m = torch.compile(f, backend="legato", options={"legato.strict": True})(x, y)
    s = lt.last_summary()
    assert s.num_extern == 0 and "lt (bool)" in str(s), str(s)
    assert m.dtype == torch.bool and torch.equal(m, x < y) and torch.equal(r, torch.where(m, x, y))


def test_comparison_of_int_tensors_is_not_resolved():
    def f(x, i):
        return torch.where(i > 2, x, 0.0) * 2

    x, i = torch.randn(4, 8), torch.arange(32).reshape(4, 8)
    with torch.no_grad():
        y = torch.compile(f, backend="legato")(x, i)
    assert torch.equal(y, f(x, i))
    s = lt.last_summary()
    assert not any("aten.gt" in n for k in s.kernels for n in k.nodes), str(s)


def test_expanded_input_runs_on_legato():
    # a stride-0 input: the kernel gets a dense copy (the JIT writes a non-contiguous input's
    # copy back after the run, which torch refuses for overlapping memory)
    x = torch.randn(1, 64).expand(8, 64)
    with torch.no_grad():
        y = torch.compile(torch.exp, backend="legato", options={"legato.strict": True})(x)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.kernels[0].calls == 1, str(s)
    assert torch.allclose(y, torch.exp(x), rtol=1e-5, atol=0)


def test_comparison_stranded_by_a_failing_consumer_runs_eagerly():
    # the comparison's where fails to compile (a broken third-party resolver), so the float
    # mask would become a bool kernel output: the compiler refuses that memcpy (i1 vs f32) and
    # the comparison runs eagerly too; torch never sees a float for a bool
    import legato

    @legato.function
    def broken_where(c, a, b):
        return legato.tensor.matmul(a, b)  # [8, 64] @ [8, 64]: does not compile

    def resolver(node, ctx):
        return lt.Impl(broken_where, tuple(node.args[:3]))

    lt.register(torch.ops.aten.where.self, resolver)
    try:
        x, y = torch.randn(8, 64), torch.randn(8, 64)
        with torch.no_grad():
            out = torch.compile(lambda x, y: torch.where(x < y, x, y) + 1, backend="legato")(x, y)
    finally:
        lt.unregister(torch.ops.aten.where.self, resolver)
    assert torch.equal(out, torch.where(x < y, x, y) + 1)
    s = lt.last_summary()
    reasons = {e.op: e.reason for e in s.extern}
    assert "element types differ (i1 and f32)" in reasons["aten.lt.Tensor"], str(s)
    assert "kernel failed" in reasons["aten.where.self"], str(s)


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_mul_by_a_comparison_mask(dn):
    # torch promotes the bool to 1.0 / 0.0 in x's dtype: where(mask, x, x * 0.0) is exactly
    # that (inf * 0 is NaN in both)
    def f(x, y):
        return (x * 2) * (x > y) + ((x <= 0.5) * y)

    x, y = (torch.randn(8, 64, dtype=DTYPES[dn]) for _ in range(2))
    x[0, 0] = float("inf")
    with torch.no_grad():
        r = torch.compile(f, backend="legato", options={"legato.strict": True})(x, y)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert "mul by a mask" in str(s)
    ref = f(x, y)
    assert r.dtype == ref.dtype and torch.equal(r.isnan(), ref.isnan())
    assert torch.equal(r.nan_to_num(), ref.nan_to_num())


def test_strided_slice_is_one_strided_legato_slice(tmp_path):
    """A slice with a step is one `legato.slice` with that stride in the kernel's IR (strided
    DMAs: lower_tensor_ops.slice_), not reshapes, step-1 slices and a concat."""
    f = CASES["slice_step3_partial_chunk"][0]
    x = torch.randn(8, 64)
    opts = {"legato.strict": True, "legato.output_type": "MLIR", "legato.output_path": tmp_path}
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options=opts)(x)
    assert torch.equal(y, f(x))
    (mlir,) = tmp_path.glob("*.mlir")
    text = mlir.read_text()
    slices = [line for line in text.splitlines() if "legato.slice" in line]
    assert len(slices) == 1 and "[0, 1] [8, 21] [1, 3]" in slices[0], slices
    assert "legato.cat" not in text and "legato.reshape" not in text, text


def test_bool_logic_over_a_dynamic_length_is_one_kernel():
    """`&` of a comparison mask over a runtime length (a dynamic dim): the masks' zeros are
    filled at the bound and viewed at the runtime size; every length is the same kernel."""
    f = lambda x, y: torch.where((x < y) & (x > 0), x, y) + 1
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        for n in (5, 7, 11):
            x, y = torch.randn(2, n, 16), torch.randn(2, n, 16)
            torch._dynamo.mark_dynamic(x, 1, max=32)
            torch._dynamo.mark_dynamic(y, 1, max=32)
            assert torch.equal(g(x, y), f(x, y)), n
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert s.kernels[0].calls == 3 and s.kernels[0].eager_calls == 0, str(s)


def test_bool_logic_of_graph_inputs_stays_host_index_work():
    """`&` of bool graph inputs (an attention mask and a padding mask) is host index
    arithmetic, as HF's mask building: it runs on the host, before the kernel, and never
    splits it; the `&` resolver refuses it."""
    f = lambda m, p, x: torch.where(m & p, x * 2, x) + 1
    m, p = torch.rand(8, 64) > 0.3, torch.rand(8, 64) > 0.3
    x = torch.randn(8, 64)
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(m, p, x)
    assert torch.equal(y, f(m, p, x))
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert any("bitwise_and" in h and "index arithmetic" in h for h in s.host), s.host
