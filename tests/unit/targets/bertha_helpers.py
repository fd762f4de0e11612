import ml_dtypes

from legato.model.bertha import Bertha
from legato.targets.bertha.abi import Arg, ArgLayout
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import write_elf
from legato.targets.bertha.runtime import run_binary
from legato.types import TensorSpec

BF16 = ml_dtypes.bfloat16


def small_model(name="bertha", cores=4, channels=8):
    return Bertha(None, name, cores, False, channels, 1 << 30)


def tensor(name, dtype, shape, access="read", memory="shared_dram"):
    return Arg(name, TensorSpec.make(dtype, shape, memory), access)


def build(src, args=(), model=None, **kw):
    model = model or small_model()
    return write_elf(assemble(src), model, ArgLayout(list(args)), **kw)


def run(src, args=(), values=(), model=None, **kw):
    model = model or small_model()
    return run_binary(build(src, args, model), model, list(values), **kw)
