"""The seed's quick-look example, verbatim, plus a report of what happened.

Run: .venv/bin/python examples/simple_matmul.py
"""

import torch

import legato
import legato.model.bertha as bertha


# Compile target: a Bertha chip with 128 GB of memory and 32 cores.
def get_bertha(ctx):
    gigabyte = 1024**3
    return bertha.Bertha(
        ctx,
        "bertha",
        32,  # num_cores
        False,  # use_pim
        8,  # num_memory_channels
        128 * gigabyte,  # shared_memory_size
    )


# The decorated function is no longer Python: it is compiled as a Legato kernel.
@legato.compile(backend=get_bertha)
def simple_matmul(
    a: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), ((-1, 10), 256), "shared_dram"
    ),
    b: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), [256, 128], "mpu_dram"
    ),
    out: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), [10, 128], "shared_dram"
    ),
):
    device = legato.get_context().get_device()
    with device.get_top():  # runs on Bertha's top module
        # copy a and b into core 0's sram and mpu_buffer
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(b, device.get_core(0), "mpu_buffer")
    with device.get_core(0):  # runs on core 0
        weight_type = legato.get_model().tensor_type(
            legato.types.float("bfloat16"), [256, 128], "mpu_weight"
        )
        # receive what the top module sent with request_load
        loaded_a = legato.tensor.receive(a, 0, "sram")
        loaded_b = legato.tensor.receive_type(weight_type, 0, None, "mpu_buffer")
        result = loaded_a @ loaded_b
        legato.tensor.memcpy(out, result)


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(10, 256, dtype=torch.bfloat16)
    b = torch.randn(256, 128, dtype=torch.bfloat16)
    output = torch.zeros(10, 128, dtype=torch.bfloat16)
    # legato.session sets JIT options (output format, output directory). The call JIT-compiles;
    # an already compiled binary is reused as long as the code has not changed.
    with legato.session(output_type=legato.OutputType.BINARY, output_path="simple_matmul"):
        simple_matmul(a, b, output)

    reference = (a.float() @ b.float()).bfloat16()
    run = simple_matmul.last_run
    print(f"compiled simple_matmul for {run.model_name}; binary written to "
          "simple_matmul/simple_matmul.elf (legato-objdump shows it)")
    print(f"emulated: {run.cycles} cycles, roofline {run.roofline_cycles} cycles "
          f"({run.roofline.bound}-bound), efficiency {run.efficiency:.1%}")
    diff = (output.float() - reference.float()).abs().max().item()
    print(f"max |out - torch reference| = {diff:.3g}")
    print(f"out[0, :4] = {output[0, :4].tolist()}")
    # The same binary serves every n up to the bound of 10.
    for n in (1, 7):
        part = torch.zeros(10, 128, dtype=torch.bfloat16)
        simple_matmul(a[:n].contiguous(), b, part)
        ok = torch.equal(part[:n], output[:n])
        print(f"n={n}: same rows as n=10 -> {ok}; compiles so far: {simple_matmul.compile_count}")


if __name__ == "__main__":
    main()
