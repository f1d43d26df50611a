// gemma_chat::rx_pack and gemma_chat::rx_rows as native PyTorch operators: the row-exact kernel
// (row_exact_bf16.c) called without Python, its column tiles split between PyTorch's threads
// (the engine's own, bound as vLLM bound them). The schemas are defined in Python
// (backend/kernels/row_exact_bf16.py, with their fakes for torch.compile).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

extern "C" void gc_rx_pack(const uint16_t* w, uint16_t* wp, int64_t N, int64_t K, int64_t nb0, int64_t nb1);
extern "C" int gc_rx_rows(const uint16_t* x, const uint16_t* wp, uint16_t* y, int64_t M, int64_t N, int64_t K,
                          int64_t kblock, int64_t t0, int64_t t1);
extern "C" int64_t gc_rx_blocks(int64_t N);
extern "C" int gc_registers_operator(void) { return 1; }

namespace {

constexpr int64_t kCols = 16;
constexpr int64_t kTile = 4;  // packed blocks per tile, as in row_exact_bf16.c

at::Tensor rx_pack(const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kBFloat16 && weight.size(1) % 2 == 0,
              "rx_pack: a 2-D bfloat16 weight with an even inner size, not ", weight.sizes());
  const at::Tensor w = weight.contiguous();
  const int64_t N = w.size(0), K = w.size(1), blocks = gc_rx_blocks(N);
  at::Tensor packed = at::empty({blocks * K * kCols}, w.options());
  at::parallel_for(0, blocks, 16, [&](int64_t b, int64_t e) {
    gc_rx_pack(static_cast<const uint16_t*>(w.data_ptr()), static_cast<uint16_t*>(packed.data_ptr()), N, K, b, e);
  });
  return packed;
}

at::Tensor rx_rows(const at::Tensor& x, const at::Tensor& packed, int64_t n, int64_t kblock) {
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && packed.scalar_type() == at::kBFloat16, "rx_rows: bfloat16 only");
  const int64_t K = x.size(-1);
  const at::Tensor rows = x.reshape({-1, K}).contiguous();
  const int64_t M = rows.size(0), tiles = gc_rx_blocks(n) / kTile;
  TORCH_CHECK(packed.numel() == tiles * kTile * K * kCols, "rx_rows: packed weights of another shape");
  at::Tensor out = at::empty({M, n}, rows.options());
  int status = 0;
  at::parallel_for(0, tiles, 2, [&](int64_t b, int64_t e) {
    const int s = gc_rx_rows(static_cast<const uint16_t*>(rows.data_ptr()), static_cast<const uint16_t*>(packed.data_ptr()),
                             static_cast<uint16_t*>(out.data_ptr()), M, n, K, kblock, b, e);
    if (s != 0) status = s;
  });
  TORCH_CHECK(status == 0, "rx_rows: K must be even and kblock a positive even number");
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = n;
  return out.view(sizes);
}

}  // namespace

TORCH_LIBRARY_IMPL(gemma_chat, CPU, m) {
  m.impl("rx_pack", rx_pack);
  m.impl("rx_rows", rx_rows);
}
