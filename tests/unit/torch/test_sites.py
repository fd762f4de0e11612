"""`legato.torch.sites`: the model's line behind a kernel error, found from the kernel line the
error names (an implementation's function, or a step of the generated kernel)."""

import torch

from legato.torch import sites
from legato.torch.library.composite import gather_dims


class _Fault(Exception):
    def __init__(self, msg, source):
        super().__init__(msg)
        self.source = source


def _graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    mul = g.call_function(torch.ops.aten.mul.Tensor, (x, 2))
    idx = g.call_function(torch.ops.aten.index.Tensor, (mul, [x]))
    g.output(idx)
    mul.meta["stack_trace"] = (
        '  File "/m/model.py", line 3, in forward\n    h = self.f(x)\n'
        '  File "/m/layers.py", line 9, in f\n    return x * 2\n'
    )
    idx.meta["stack_trace"] = '  File "/m/model.py", line 4, in forward\n    return h[i]\n'
    return mul, idx


def test_a_line_of_an_implementation_names_the_node_that_uses_it():
    mul, idx = _graph()
    first = sites._span(gather_dims)
    e = _Fault("fault", (first[0], first[1] + 9, 5))  # inside gather_dims
    out = sites.name_user_lines(e, [(None, mul), (gather_dims, idx)])
    assert out is e and e.user_lines == ["/m/model.py:4: return h[i]"]
    want = f"fault\n  in the model at /m/model.py:4: return h[i]  ({idx.name}: aten.index.Tensor)"
    assert str(e) == want


def test_a_line_of_the_generated_kernel_names_its_step_and_the_innermost_frame(tmp_path):
    mul, idx = _graph()
    gen = tmp_path / "k.py"
    # kernelgen's step line: the node's `format_node()` as its comment
    gen.write_text(f"a = 1\n        v_mul = impl_mul(v_x, 2.0)  # {mul.format_node()[:120]}\n")
    e = _Fault("fault", (str(gen), 2, 9))
    sites.name_user_lines(e, [(None, mul), (gather_dims, idx)], str(gen))
    assert e.user_lines == ["/m/layers.py:9: return x * 2"]  # the innermost frame


def test_a_line_no_node_holds_leaves_the_error_as_it_is(tmp_path):
    mul, idx = _graph()
    e = _Fault("fault", (__file__, 1, 1))
    sites.name_user_lines(e, [(gather_dims, idx)], str(tmp_path / "k.py"))
    assert str(e) == "fault" and not hasattr(e, "user_lines")
    assert sites.nodes_at(ValueError("no source"), [(gather_dims, idx)]) == []
