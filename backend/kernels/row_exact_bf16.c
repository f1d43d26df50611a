/* Several rows of a bfloat16 linear layer at once, each row in the reduction order of a one-row
 * call to oneDNN's brgemm matmul on an AVX512-BF16 CPU, with each weight read from memory once.
 *
 * y[M,N] = x[M,K] . w[N,K]^T. A verifying step computes 1 + k rows through every linear layer;
 * oneDNN computes a one-row call and a several-row call in different orders (measured on an
 * AVX512-BF16 EPYC: a one-row call sums K in blocks of 512, a 2..8-row call in blocks of 1,024),
 * so their bits differ and a greedy token can flip. This file reproduces the one-row order for
 * every row of a several-row call:
 *  - each output is a float32 accumulator fed by VDPBF16PS, one pair of inputs at a time in K's
 *    order (the instruction adds the odd product, then the even one, rounding each time);
 *  - K is cut into blocks of `kblock` inputs; each block is summed from zero, and the blocks'
 *    sums are added in order to a running total (the first block's sum is the total's start);
 *  - the total is rounded to bfloat16, nearest even (VCVTNEPS2BF16).
 * `kblock` is not guessed: the loader finds, per layer shape, the block that reproduces the
 * one-row call bit for bit on random inputs (row_exact_bf16.py), and uses the kernel only there.
 *
 * The weights are packed once at load (gc_rx_pack): for each block of 16 output columns, each
 * pair of inputs, the 16 columns' two bfloat16 weights side by side (64 bytes, one register) —
 * the layout VDPBF16PS reads. A tile of 64 columns is reduced over one K block for every row
 * before the next block, so the block's weights (64 KB at kblock 512) stay in the core's caches
 * while each group of up to 6 rows (24 accumulators in registers) reads them: one pass over the
 * weights from memory whatever the row count. Tile 64 x group 6 was the fastest of 32/64 columns
 * x 2/4/6/8 rows on an AVX512-BF16 EPYC (one thread: 1-5 rows of E2B's gate_up, down and a
 * 32,768-row slice of its lm_head in 0.65-1.1x oneDNN's one-row time). The caller splits the column tiles between threads (each output is one
 * thread's unchanged computation, so the thread count changes no bit).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define COLS 16   /* output columns per packed block (one register of float32 sums) */
#ifndef TILE
#define TILE 4  /* packed blocks per tile (64 columns) */
#endif
#ifndef GROUP
#define GROUP 6 /* rows sharing one pass over a block of weights in registers */
#endif
#define MAX_ROWS 16 /* rows whose running totals a tile keeps at once */

/* Packed blocks [nb0, nb1) of w[N,K] (bfloat16, row-major) into wp, [NB][K/2][16][2]; columns
 * past N are zero. K must be even. */
void gc_rx_pack(const uint16_t* w, uint16_t* wp, int64_t N, int64_t K, int64_t nb0, int64_t nb1) {
  const int64_t P = K / 2;
  for (int64_t nb = nb0; nb < nb1; ++nb) {
    uint16_t* out = wp + nb * P * COLS * 2;
    for (int64_t c = 0; c < COLS; ++c) {
      const int64_t n = nb * COLS + c;
      for (int64_t p = 0; p < P; ++p) {
        out[(p * COLS + c) * 2] = n < N ? w[n * K + 2 * p] : 0;
        out[(p * COLS + c) * 2 + 1] = n < N ? w[n * K + 2 * p + 1] : 0;
      }
    }
  }
}

/* One K block [p0, p1) of pairs for `rows` rows (1..GROUP) from xs and one tile (TILE packed blocks
 * from nb): the block's sums, stored in tot (the first block) or added to it, row by row. */
static inline __attribute__((always_inline)) void block(const uint32_t* const* xs, const uint16_t* wp, int64_t P,
                                                       int64_t nb, int64_t p0, int64_t p1, const int rows,
                                                       const int first, __m512 (*tot)[TILE]) {
  __m512 acc[GROUP][TILE];
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < TILE; ++t) acc[r][t] = _mm512_setzero_ps();
  const uint16_t* w = wp + nb * P * COLS * 2;
  for (int64_t p = p0; p < p1; ++p) {
    __m512bh v[TILE];
    for (int t = 0; t < TILE; ++t)
      v[t] = (__m512bh)_mm512_loadu_si512((const void*)(w + (t * P + p) * COLS * 2));
    for (int r = 0; r < rows; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32((int)xs[r][p]);
      for (int t = 0; t < TILE; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], x, v[t]);
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < TILE; ++t) tot[r][t] = first ? acc[r][t] : _mm512_add_ps(tot[r][t], acc[r][t]);
}

/* One K block for `rows` rows (any count up to MAX_ROWS), in groups of up to GROUP rows: the
 * block's weights are read from memory by the first group and from cache by the others. */
static void block_rows(const uint32_t* const* xs, const uint16_t* wp, int64_t P, int64_t nb, int64_t p0,
                       int64_t p1, int64_t rows, int first, __m512 (*tot)[TILE]) {
  for (int64_t r = 0; r < rows; r += GROUP) {
    const int64_t n = rows - r < GROUP ? rows - r : GROUP;
    switch (n) {
#if GROUP >= 6
      case 6: block(xs + r, wp, P, nb, p0, p1, 6, first, tot + r); break;
      case 5: block(xs + r, wp, P, nb, p0, p1, 5, first, tot + r); break;
#endif
#if GROUP >= 4
      case 4: block(xs + r, wp, P, nb, p0, p1, 4, first, tot + r); break;
      case 3: block(xs + r, wp, P, nb, p0, p1, 3, first, tot + r); break;
#endif
      case 2: block(xs + r, wp, P, nb, p0, p1, 2, first, tot + r); break;
      default: block(xs + r, wp, P, nb, p0, p1, 1, first, tot + r); break;
    }
  }
}

/* Rows x[M,K] (bfloat16, row-major) through the packed weights, tiles [t0, t1) of TILE packed
 * blocks (the packed weights hold a whole number of tiles: gc_rx_blocks), into y[M,N].
 * Returns 0, or -1 where K is odd or kblock not a positive even number. */
int gc_rx_rows(const uint16_t* x, const uint16_t* wp, uint16_t* y, int64_t M, int64_t N, int64_t K,
               int64_t kblock, int64_t t0, int64_t t1) {
  if (K % 2 || kblock <= 0 || kblock % 2) return -1;
  const int64_t P = K / 2, bp = kblock / 2;
  __m512 tot[MAX_ROWS][TILE];
  const uint32_t* xs[MAX_ROWS];
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t nb = t * TILE;
    for (int64_t r0 = 0; r0 < M; r0 += MAX_ROWS) {
      const int64_t rows = M - r0 < MAX_ROWS ? M - r0 : MAX_ROWS;
      for (int64_t r = 0; r < rows; ++r) xs[r] = (const uint32_t*)(x + (r0 + r) * K);
      for (int64_t p0 = 0; p0 < P; p0 += bp)
        block_rows(xs, wp, P, nb, p0, p0 + bp < P ? p0 + bp : P, rows, p0 == 0, tot);
      for (int64_t r = 0; r < rows; ++r) {
        for (int c = 0; c < TILE; ++c) {
          const int64_t n = (nb + c) * COLS;
          if (n >= N) break;
          const __m256i v = (__m256i)_mm512_cvtneps_pbh(tot[r][c]);
          const int64_t left = N - n;
          const __mmask16 mask = left >= COLS ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
          _mm256_mask_storeu_epi16((void*)(y + (r0 + r) * N + n), mask, v);
        }
      }
    }
  }
  return 0;
}

/* Packed blocks for N columns: an even number (whole tiles). */
int64_t gc_rx_blocks(int64_t N) { return ((N + COLS * TILE - 1) / (COLS * TILE)) * TILE; }
