legato.kernel @k(%a : !legato.tensor<[4, 256], bf16, sram>, %b : !legato.tensor<[128, 64], bf16, sram>) {
  legato.on core(0) {
    %r = legato.matmul %a, %b : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[128, 64], bf16, sram> -> !legato.tensor<[4, 64], bf16, sram> loc("kern.py":12:8)
    legato.yield loc("kern.py":13:4)
  } loc("kern.py":11:4)
  legato.return
} loc("kern.py":10:0)
