// gemma_chat::bf16_linear as a native PyTorch operator: the same kernel, called without Python.
//
// The operator's schema is defined in Python (backend/kernels/bf16_linear.py, with its fake for
// torch.compile); this file registers its CPU implementation when the library is loaded. Called
// from a compiled graph, a Python implementation cost about 30 us a call in Python and dispatch
// (more than a decode step's small layers compute); this one costs a few. It does what the
// Python implementation does: PyTorch's own linear for anything but bfloat16, else the kernel on
// the rows flattened to 2-D.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

extern "C" int gc_linear_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t M, int64_t N,
                              int64_t K);

// Lets the loader tell this library (the operator registers itself) from the kernel alone.
extern "C" int gc_registers_operator(void) { return 1; }

namespace {

at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& weight) {
  if (x.scalar_type() != at::kBFloat16 || weight.scalar_type() != at::kBFloat16) {
    return at::linear(x, weight);  // PyTorch's own answer (or its error)
  }
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
              "bf16_linear: shapes ", x.sizes(), " and ", weight.sizes(), " cannot be multiplied");
  const at::Tensor rows = x.reshape({-1, x.size(-1)}).contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor out = at::empty({rows.size(0), w.size(0)}, rows.options());
  const int status = gc_linear_bf16(static_cast<const uint16_t*>(rows.data_ptr()),
                                    static_cast<const uint16_t*>(w.data_ptr()),
                                    static_cast<uint16_t*>(out.data_ptr()), rows.size(0), w.size(0),
                                    w.size(1));
  TORCH_CHECK(status == 0, "bf16_linear: no memory for its float32 scratch");
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  return out.view(sizes);
}

}  // namespace

TORCH_LIBRARY_IMPL(gemma_chat, CPU, m) { m.impl("bf16_linear", bf16_linear); }
