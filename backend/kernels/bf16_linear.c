/* bfloat16 linear layers for CPUs without native bfloat16 arithmetic (AVX2 + FMA).
 *
 * y[M,N] = x[M,K] . w[N,K]^T, bit-identical to what PyTorch computes for a bfloat16
 * torch.nn.functional.linear on such a CPU: there each output element is an independent
 * dot product (ATen's bf16_dot_with_fp32_arith): eight 8-lane float32 accumulators ("slots"),
 * slot r taking elements c+8r..c+8r+7 of every 64-element chunk c with a fused multiply-add,
 * the slots summed pairwise (r with r+4, then r+2, then r+1), the lanes summed the way
 * ATen's AVX2 vec_reduce_all does, then 16-element tail chunks in one more accumulator, and
 * the float32 result rounded to bfloat16 (nearest even). This file performs the same
 * operations on every element, in the same order; what changes is the loop structure
 * around them:
 *  - the x rows are converted to float32 once per call;
 *  - one x row (decode): each weight row streams through once, converted in registers;
 *  - 2 to 8 x rows (a decode batch, a request's drafts being verified): each weight chunk is
 *    converted in registers once per group of up to 4 x rows (all 5 when there are 5) and used
 *    by each of them;
 *  - more x rows (prefill, larger batches): each weight row is converted once per block of 32
 *    x rows, and a tile of 3 weight rows x 4 x rows shares its loads;
 *  - the output columns are cut into blocks the threads claim from a shared counter
 *    (gc_set_threads, gc_linear_bf16): each output is still one thread's unchanged dot
 *    product, so neither the thread count nor which thread took a block changes a bit.
 * ATen's loop converts both operands for every dot product; this is 2-4x faster on one
 * thread.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline __m256 bf16x8_to_f32(__m128i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}
static inline float hsum8(__m256 v) {
  __m256 t = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 0x1));
  t = _mm256_add_ps(t, _mm256_shuffle_ps(t, t, 0x4E));
  t = _mm256_add_ps(t, _mm256_shuffle_ps(t, t, 0xB1));
  return _mm256_cvtss_f32(t);
}
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
/* the tail accumulator's sum: +0.0 without a tail (it stayed zero), skipping its reduction */
static inline float tail_sum(__m256 t, int64_t K64, int64_t K) { return K64 == K ? 0.0f : hsum8(t); }
/* the 8 slot accumulators of one dot product, reduced the way the reference does */
static inline float reduce8(__m256 s[8]) {
  for (int i = 0; i < 4; ++i) s[i] = _mm256_add_ps(s[i], s[i + 4]);
  for (int i = 0; i < 2; ++i) s[i] = _mm256_add_ps(s[i], s[i + 2]);
  s[0] = _mm256_add_ps(s[0], s[1]);
  return hsum8(s[0]);
}

#define JB 32
#define IB 3
/* a tile of 3 w rows x 4 x rows: 12 accumulators per slot */
static inline void tile(const float* const ws[IB], const float* const xs[4], int64_t K64, __m256 s[IB][4][8]) {
  for (int r = 0; r < 8; ++r) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
    __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    const float *w0 = ws[0] + r * 8, *w1 = ws[1] + r * 8, *w2 = ws[2] + r * 8;
    const float *x0 = xs[0] + r * 8, *x1 = xs[1] + r * 8, *x2 = xs[2] + r * 8, *x3 = xs[3] + r * 8;
    for (int64_t c = 0; c < K64; c += 64) {
      __m256 v0 = _mm256_loadu_ps(w0 + c), v1 = _mm256_loadu_ps(w1 + c), v2 = _mm256_loadu_ps(w2 + c);
      __m256 x;
      x = _mm256_loadu_ps(x0 + c); a00 = _mm256_fmadd_ps(v0, x, a00); a10 = _mm256_fmadd_ps(v1, x, a10); a20 = _mm256_fmadd_ps(v2, x, a20);
      x = _mm256_loadu_ps(x1 + c); a01 = _mm256_fmadd_ps(v0, x, a01); a11 = _mm256_fmadd_ps(v1, x, a11); a21 = _mm256_fmadd_ps(v2, x, a21);
      x = _mm256_loadu_ps(x2 + c); a02 = _mm256_fmadd_ps(v0, x, a02); a12 = _mm256_fmadd_ps(v1, x, a12); a22 = _mm256_fmadd_ps(v2, x, a22);
      x = _mm256_loadu_ps(x3 + c); a03 = _mm256_fmadd_ps(v0, x, a03); a13 = _mm256_fmadd_ps(v1, x, a13); a23 = _mm256_fmadd_ps(v2, x, a23);
    }
    s[0][0][r] = a00; s[0][1][r] = a01; s[0][2][r] = a02; s[0][3][r] = a03;
    s[1][0][r] = a10; s[1][1][r] = a11; s[1][2][r] = a12; s[1][3][r] = a13;
    s[2][0][r] = a20; s[2][1][r] = a21; s[2][2][r] = a22; s[2][3][r] = a23;
  }
}
static inline float finish(__m256 s[8], const float* wr, const float* xr, int64_t K64, int64_t K) {
  float sum = reduce8(s);
  __m256 t = _mm256_setzero_ps();
  for (int64_t l = K64; l < K; l += 16) {
    t = _mm256_fmadd_ps(_mm256_loadu_ps(wr + l), _mm256_loadu_ps(xr + l), t);
    t = _mm256_fmadd_ps(_mm256_loadu_ps(wr + l + 8), _mm256_loadu_ps(xr + l + 8), t);
  }
  return sum + tail_sum(t, K64, K);
}
static inline void to_f32(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t l = 0; l < n; l += 8)
    _mm256_storeu_ps(dst + l, bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(src + l))));
}

/* one x row: w converted in registers as it streams (the weights are read once) */
static void gemv(const float* xr, const uint16_t* w, uint16_t* y, int64_t N, int64_t K) {
  const int64_t K64 = K & ~(int64_t)63;
  for (int64_t i = 0; i < N; ++i) {
    const uint16_t* wr = w + i * K;
    __m256 s[8];
    for (int r = 0; r < 8; ++r) s[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < K64; c += 64) {
      for (int r = 0; r < 8; ++r)
        s[r] = _mm256_fmadd_ps(bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + c + 8 * r))),
                               _mm256_loadu_ps(xr + c + 8 * r), s[r]);
    }
    float sum = reduce8(s);
    __m256 t = _mm256_setzero_ps();
    for (int64_t l = K64; l < K; l += 16) {
      t = _mm256_fmadd_ps(bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + l))), _mm256_loadu_ps(xr + l), t);
      t = _mm256_fmadd_ps(bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + l + 8))), _mm256_loadu_ps(xr + l + 8), t);
    }
    y[i] = f32_to_bf16(sum + tail_sum(t, K64, K));
  }
}
/* 2..5 x rows: each weight chunk is converted in registers once and used by every x row.
   Slots r and r+1 are accumulated together, one accumulator each per x row (one slot at a
   time ran slower here: its chains of 4-32 fused multiply-adds wait on each other). The first
   `keep` rows' outputs are stored. Called on groups of up to 4 of 2..FEW rows (more rows at
   once ran slower here), except 5 rows (a request verifying 4 drafts), which take one group:
   the weights of a decode step stream from memory, and a second group reads them again (5 in
   one group: 2.9 against 3.7 ms for the demo model's linears at 5 rows, one thread, weights not
   cached). */
#define FEW 8
#define GROUP 4
#define WIDEST 5
static inline __attribute__((always_inline)) void few_rows(const float* xf, const uint16_t* w, uint16_t* y,
                                                          int64_t n0, int64_t n1, int64_t N, int64_t K,
                                                          const int M, const int keep) {
  const int64_t K64 = K & ~(int64_t)63;
  for (int64_t i = n0; i < n1; ++i) {
    const uint16_t* wr = w + i * K;
    __m256 s[WIDEST][8];
    for (int r = 0; r < 8; r += 2) {
      __m256 a[WIDEST], b[WIDEST];
      for (int q = 0; q < M; ++q) a[q] = b[q] = _mm256_setzero_ps();
      for (int64_t c = 0; c < K64; c += 64) {
        const __m256 v = bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + c + 8 * r)));
        const __m256 u = bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + c + 8 * r + 8)));
        for (int q = 0; q < M; ++q) {
          a[q] = _mm256_fmadd_ps(v, _mm256_loadu_ps(xf + q * K + c + 8 * r), a[q]);
          b[q] = _mm256_fmadd_ps(u, _mm256_loadu_ps(xf + q * K + c + 8 * r + 8), b[q]);
        }
      }
      for (int q = 0; q < M; ++q) s[q][r] = a[q], s[q][r + 1] = b[q];
    }
    __m256 t[WIDEST];
    for (int q = 0; q < M; ++q) t[q] = _mm256_setzero_ps();
    for (int64_t l = K64; l < K; l += 16) {
      const __m256 v0 = bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + l)));
      const __m256 v1 = bf16x8_to_f32(_mm_loadu_si128((const __m128i*)(wr + l + 8)));
      for (int q = 0; q < M; ++q) {
        t[q] = _mm256_fmadd_ps(v0, _mm256_loadu_ps(xf + q * K + l), t[q]);
        t[q] = _mm256_fmadd_ps(v1, _mm256_loadu_ps(xf + q * K + l + 8), t[q]);
      }
    }
    for (int q = 0; q < keep; ++q) y[q * N + i] = f32_to_bf16(reduce8(s[q]) + tail_sum(t[q], K64, K));
  }
}
static void few(const float* xf, const uint16_t* w, uint16_t* y, int64_t n0, int64_t n1, int64_t N, int64_t K,
                int64_t M) {
  switch (M) {
    case 1: few_rows(xf, w, y, n0, n1, N, K, 1, 1); break;
    case 2: few_rows(xf, w, y, n0, n1, N, K, 2, 2); break;
    case 3: few_rows(xf, w, y, n0, n1, N, K, 4, 3); break; /* the 4th row: a copy of the 3rd */
    case 4: few_rows(xf, w, y, n0, n1, N, K, 4, 4); break;
    default: few_rows(xf, w, y, n0, n1, N, K, 5, 5); break;
  }
}
/* A growable, 64-byte aligned float buffer; each thread keeps its own. */
typedef struct {
  float* data;
  size_t floats;
} buffer_t;

static float* at_least(buffer_t* buffer, size_t floats) {
  if (floats > buffer->floats) {
    free(buffer->data);
    buffer->data = NULL;
    buffer->floats = 0;
    if (posix_memalign((void**)&buffer->data, 64, floats * sizeof(float)) != 0) return NULL;
    buffer->floats = floats;
  }
  return buffer->data;
}

static __thread buffer_t weight_rows; /* IB weight rows in float32 */
static __thread buffer_t input_rows;  /* the call's x rows in float32 */

/* One call's work: rows of y for output columns [n0, n1). */
typedef struct {
  const float* xf;
  const uint16_t* w;
  uint16_t* y;
  int64_t M, N, K;
} job_t;

static int range_of(const job_t* job, int64_t n0, int64_t n1) {
  const int64_t M = job->M, N = job->N, K = job->K;
  const float* xf = job->xf;
  const uint16_t* w = job->w;
  uint16_t* y = job->y;
  const int64_t K64 = K & ~(int64_t)63;
  if (M == 1) {
    gemv(xf, w + n0 * K, y + n0, n1 - n0, K);
    return 0;
  }
  if (M <= FEW) {
    const int64_t group = M == WIDEST ? WIDEST : GROUP;
    for (int64_t j0 = 0; j0 < M; j0 += group)
      few(xf + j0 * K, w, y + j0 * N, n0, n1, N, K, M - j0 < group ? M - j0 : group);
    return 0;
  }
  float* wf = at_least(&weight_rows, (size_t)IB * (size_t)K);
  if (wf == NULL) return -1;
  for (int64_t jb = 0; jb < M; jb += JB) {
    const int64_t je = (jb + JB < M) ? jb + JB : M;
    for (int64_t i = n0; i < n1; i += IB) {
      const int64_t ib = (n1 - i) < IB ? (n1 - i) : IB;
      const float* ws[IB];
      for (int p = 0; p < IB; ++p) {
        ws[p] = wf + p * K;
        if (p < ib) to_f32(w + (i + p) * K, wf + p * K, K);
      }
      for (int p = ib; p < IB; ++p) ws[p] = ws[0];
      for (int64_t j0 = jb; j0 < je; j0 += 4) {
        const int64_t rb = (je - j0) < 4 ? (je - j0) : 4;
        const float* xs[4];
        for (int q = 0; q < 4; ++q) xs[q] = xf + (j0 + (q < rb ? q : 0)) * K;
        __m256 s[IB][4][8];
        tile(ws, xs, K64, s);
        for (int q = 0; q < rb; ++q)
          for (int p = 0; p < ib; ++p)
            y[(j0 + q) * N + i + p] = f32_to_bf16(finish(s[p][q], ws[p], xs[q], K64, K));
      }
    }
  }
  return 0;
}

#define MAX_THREADS 64
#define SPINS 10000 /* a few hundred microseconds of waiting before sleeping */
#define BLOCKS_PER_THREAD 8
#define CLOSED 0xffff /* a claim index past every job's blocks */
#define BACKOFF_NS 20000000LL     /* one thread for 20 ms after a helper held a product up... */
#define MAX_BACKOFF_NS 640000000LL /* ...doubling while it keeps doing so, up to 0.64 s */
static int n_threads = 1;
static pthread_t helpers[MAX_THREADS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static job_t current;
static int64_t block_columns;
static int n_blocks;
/* the job's generation (high bits) and its next unclaimed block (low 16 bits): a block is
   claimed with a compare-and-swap, so a thread that arrives late takes nothing of a newer job */
static atomic_llong claim = CLOSED;
static atomic_int blocks_done = 0;
static atomic_int failed = 0;
static atomic_long generation = 0;
static int helper_cpu[MAX_THREADS];
/* counters for gc_stats */
static atomic_llong helper_blocks = 0, shared_products = 0, alone_products = 0, backoffs = 0;
static long long alone_until_ns = 0, backoff_ns = BACKOFF_NS;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Claim and compute blocks of job `gen` until none is left; returns how many this thread did.
   Every output column is computed by the one thread that claimed its block, so which thread
   that is changes no bit. */
static int work(long long gen) {
  int done = 0;
  long long c = atomic_load(&claim);
  while ((c >> 16) == gen && (c & 0xffff) < n_blocks) {
    if (!atomic_compare_exchange_weak(&claim, &c, c + 1)) continue;
    const int64_t n0 = (c & 0xffff) * block_columns;
    const int64_t n1 = n0 + block_columns < current.N ? n0 + block_columns : current.N;
    if (range_of(&current, n0, n1) != 0) atomic_store(&failed, 1);
    atomic_fetch_add(&blocks_done, 1);
    ++done;
    c = atomic_load(&claim);
  }
  return done;
}

static void* helper_main(void* arg) {
  const int index = (int)(intptr_t)arg;
  if (helper_cpu[index] >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(helper_cpu[index], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  long seen = 0;
  for (;;) {
    long now = atomic_load(&generation);
    for (int spin = 0; now == seen && spin < SPINS; ++spin) {
      if (spin % 64 == 63) sched_yield(); /* let the front end's threads on this core run */
      _mm_pause();
      now = atomic_load(&generation);
    }
    if (now == seen) {
      pthread_mutex_lock(&lock);
      while ((now = atomic_load(&generation)) == seen) pthread_cond_wait(&wake, &lock);
      pthread_mutex_unlock(&lock);
    }
    seen = now;
    atomic_fetch_add(&helper_blocks, work(now));
  }
  return NULL;
}

/* Use `count` threads: this one plus helpers pinned to cpus[1..count-1] (-1: unpinned).
   Call once, before the first product. Returns the number of threads in use. */
int gc_set_threads(int count, const int* cpus) {
  if (n_threads > 1 || count <= 1) return n_threads;
  if (count > MAX_THREADS) count = MAX_THREADS;
  for (int t = 1; t < count; ++t) {
    helper_cpu[t] = cpus ? cpus[t] : -1;
    if (pthread_create(&helpers[t], NULL, helper_main, (void*)(intptr_t)t) != 0) break;
    pthread_detach(helpers[t]);
    n_threads = t + 1;
  }
  return n_threads;
}

/* What the threads did so far: products shared with helpers, products computed alone
   (small, or while helpers were held off), blocks the helpers computed, times held off. */
void gc_stats(long long out[4]) {
  out[0] = atomic_load(&shared_products);
  out[1] = atomic_load(&alone_products);
  out[2] = atomic_load(&helper_blocks);
  out[3] = atomic_load(&backoffs);
}

/* y[M,N] = x[M,K] . w[N,K]^T, all row-major and contiguous; K % 16 == 0.
   Returns 0, or -1 when scratch memory could not be allocated.
   With helpers, the output columns are cut into blocks that every thread claims from a shared
   counter: a helper that is slow to wake (its core busy with another program) leaves its
   blocks to this thread instead of holding the product up. This thread still waits for a
   block a helper has started, so when that wait outlasts this thread's own share (the helper
   lost its core mid-block) the next products run on this thread alone for a while. */
int gc_linear_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t M, int64_t N, int64_t K) {
  float* xbuf = at_least(&input_rows, (size_t)(M + 1) * (size_t)K);
  if (xbuf == NULL) return -1;
  to_f32(x, xbuf, M * K);
  /* a group of 3 x rows runs as 4 with its last row twice (faster here than 3), keeping 3 */
  if (M <= FEW && M % GROUP == 3) memcpy(xbuf + M * K, xbuf + (M - 1) * K, (size_t)K * sizeof(float));
  job_t job = {xbuf, w, y, M, N, K};
  /* a helper pays for its wake-up from about half a million multiply-adds on */
  const int big = n_threads > 1 && N >= 2 * IB * n_threads && M * N * K >= (1 << 19);
  const long long start = big ? now_ns() : 0;
  if (!big || start < alone_until_ns) {
    atomic_fetch_add(&alone_products, 1);
    return range_of(&job, 0, N);
  }
  const int64_t blocks_of_ib = (N + IB - 1) / IB;
  int blocks = n_threads * BLOCKS_PER_THREAD;
  if (blocks > blocks_of_ib) blocks = (int)blocks_of_ib;
  /* the last job's claim was closed when it ended, so no thread takes a block of this one
     before its fields are written */
  current = job;
  block_columns = ((blocks_of_ib + blocks - 1) / blocks) * IB;
  n_blocks = (int)((N + block_columns - 1) / block_columns);
  atomic_store(&failed, 0);
  atomic_store(&blocks_done, 0);
  const long long gen = atomic_load(&generation) + 1;
  atomic_store(&claim, gen << 16);
  pthread_mutex_lock(&lock);
  atomic_store(&generation, gen);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  work(gen);
  const long long own = now_ns();
  while (atomic_load(&blocks_done) < n_blocks) _mm_pause();
  atomic_store(&claim, (gen << 16) | CLOSED);
  const long long end = now_ns();
  atomic_fetch_add(&shared_products, 1);
  if (end - own > 20000 && 4 * (end - own) > own - start) {
    alone_until_ns = end + backoff_ns;
    backoff_ns = backoff_ns * 2 < MAX_BACKOFF_NS ? backoff_ns * 2 : MAX_BACKOFF_NS;
    atomic_fetch_add(&backoffs, 1);
  } else {
    backoff_ns = BACKOFF_NS;
  }
  return atomic_load(&failed) ? -1 : 0;
}
