/* The fixed cost of one MPU pass around its f64 GEMM, compiled (issue 15): the bf16 statistics
 * of the exactness proof and the proof itself, as `legato.numerics.mpu_matmul` and
 * `MpuWeight` compute them (that Python is the reference; tests/unit/targets/test_mpu_fast.py
 * compares the two bit for bit). Built by legato/targets/bertha/native_build.py (cffi).
 *
 * Compiled without -ffast-math: every float operation here is one IEEE operation in the
 * default rounding mode, as numpy's. The loops are written so that gcc vectorizes them
 * (no branches in the common path); the rare elements go to a second, scalar pass. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double bf16_to_f64(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

/* `numerics._line_stats` of a bf16 line from two reductions of its magnitude bits m = b &
 * 0x7fff (which order like |v|): `mx` = max m (max |v|, inf or NaN where the line holds one)
 * and `lom1` = min (m - 1) mod 2^16 (the lowest nonzero m, minus 1; 0xffff: all zero). `*l`:
 * the exponent of the lowest nonzero magnitude's unit (0 for an all-zero line). */
static inline double line_stats(uint16_t mx, uint16_t lom1, int *l) {
    uint16_t lo = (uint16_t)(lom1 + 1);
    if (lo == 0) {
        *l = 0;
    } else {
        int e = lo >> 7;
        *l = (e > 1 ? e : 1) - 134;
    }
    return bf16_to_f64(mx);
}

static void to_f64(const uint16_t *restrict b, size_t n, double *restrict out) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)b[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        out[i] = (double)f;
    }
}

/* x * 2^-l, for the exponents `line_stats` gives (l in [-133, 121]: 2^-l is a normal f64)
 * and x a line's max |v| (times K < 2^31): the product is a power-of-two scaling that neither
 * overflows nor underflows, exact, so it is `ldexp(x, -l)` bit for bit (an inf or NaN x comes
 * back as it is) without the libm call (65,536 a run in the EVT1 GEMV's tiles). */
static inline double pow2_down(double x, int l) {
    uint64_t b = (uint64_t)(1023 - l) << 52;
    double p;
    memcpy(&p, &b, 8);
    return x * p;
}

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>
#define MPU_X86 1
static int has_avx2 = -1, has_avx512f = -1; /* the host's (found on first use) */
static void find_isa(void) {
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    has_avx512f = __builtin_cpu_supports("avx512f") ? 1 : 0;
}

/* `mpu_weight`'s two reductions over the columns [j0, j0 + nj) of w[K, N], nj a multiple of
 * 16, for AVX2 hosts: the same integer max and min as its loop (so the same mx, lom1), with a
 * block's 64 (or 16) running values in registers over the whole k loop; gcc's clones keep
 * them in the stack arrays, a load and a store per step. */
__attribute__((target("avx2"))) static void weight_reduce_v(const uint16_t *restrict w, int K,
                                                            int N, int j0, int nj,
                                                            uint16_t *restrict mx,
                                                            uint16_t *restrict lom1) {
    const __m256i mag = _mm256_set1_epi16(0x7FFF), one = _mm256_set1_epi16(1);
    int j = 0;
    for (; j + 64 <= nj; j += 64) {
        __m256i h0 = _mm256_setzero_si256(), h1 = h0, h2 = h0, h3 = h0;
        __m256i l0 = _mm256_set1_epi16(-1), l1 = l0, l2 = l0, l3 = l0;
        const uint16_t *p = w + j0 + j;
        for (int k = 0; k < K; k++, p += N) {
            __m256i m0 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)p), mag);
            __m256i m1 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 16)), mag);
            __m256i m2 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 32)), mag);
            __m256i m3 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 48)), mag);
            h0 = _mm256_max_epu16(h0, m0), l0 = _mm256_min_epu16(l0, _mm256_sub_epi16(m0, one));
            h1 = _mm256_max_epu16(h1, m1), l1 = _mm256_min_epu16(l1, _mm256_sub_epi16(m1, one));
            h2 = _mm256_max_epu16(h2, m2), l2 = _mm256_min_epu16(l2, _mm256_sub_epi16(m2, one));
            h3 = _mm256_max_epu16(h3, m3), l3 = _mm256_min_epu16(l3, _mm256_sub_epi16(m3, one));
        }
        _mm256_storeu_si256((__m256i *)(mx + j), h0);
        _mm256_storeu_si256((__m256i *)(mx + j + 16), h1);
        _mm256_storeu_si256((__m256i *)(mx + j + 32), h2);
        _mm256_storeu_si256((__m256i *)(mx + j + 48), h3);
        _mm256_storeu_si256((__m256i *)(lom1 + j), l0);
        _mm256_storeu_si256((__m256i *)(lom1 + j + 16), l1);
        _mm256_storeu_si256((__m256i *)(lom1 + j + 32), l2);
        _mm256_storeu_si256((__m256i *)(lom1 + j + 48), l3);
    }
    for (; j + 16 <= nj; j += 16) {
        __m256i h = _mm256_setzero_si256(), l = _mm256_set1_epi16(-1);
        const uint16_t *p = w + j0 + j;
        for (int k = 0; k < K; k++, p += N) {
            __m256i m = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)p), mag);
            h = _mm256_max_epu16(h, m), l = _mm256_min_epu16(l, _mm256_sub_epi16(m, one));
        }
        _mm256_storeu_si256((__m256i *)(mx + j), h);
        _mm256_storeu_si256((__m256i *)(lom1 + j), l);
    }
}
#endif

/* Weight tile w[K, N] (bf16 bits): its f64 values (into `f64`, unless it is NULL: a tile whose
 * passes all take `mpu_small` never needs them), per column max |w| (cm), v = cm / 2^lw and
 * the NaN-propagating max of v (vmax, as numpy's max). Returns 1 when every cm is finite.
 * (Integer reductions and the same scalar tail in every clone: the same statistics.) */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
int mpu_weight(const uint16_t *restrict w, int K, int N, double *restrict f64,
               double *restrict cm, double *restrict v, double *restrict vmax) {
    enum { CHUNK = 256 };
    uint16_t mx[CHUNK], lom1[CHUNK];
    int finite = 1, vm_nan = 0;
    double vm = -INFINITY;
    for (int j0 = 0; j0 < N; j0 += CHUNK) {
        int nj = N - j0 < CHUNK ? N - j0 : CHUNK;
#ifdef MPU_X86
        if (has_avx2 < 0) find_isa();
        if (has_avx2 && nj % 16 == 0) {
            weight_reduce_v(w, K, N, j0, nj, mx, lom1);
        } else
#endif
        {
            for (int j = 0; j < nj; j++) {
                mx[j] = 0;
                lom1[j] = 0xFFFF;
            }
            for (int k = 0; k < K; k++) {
                const uint16_t *row = w + (size_t)k * N + j0;
                for (int j = 0; j < nj; j++) {
                    uint16_t m = row[j] & 0x7FFF;
                    uint16_t m1 = (uint16_t)(m - 1);
                    mx[j] = m > mx[j] ? m : mx[j];
                    lom1[j] = m1 < lom1[j] ? m1 : lom1[j];
                }
            }
        }
        for (int j = 0; j < nj; j++) {
            int l;
            double h = line_stats(mx[j], lom1[j], &l);
            double vj = pow2_down(h, l);
            cm[j0 + j] = h;
            v[j0 + j] = vj;
            if (!isfinite(h)) finite = 0;
            if (isnan(vj)) vm_nan = 1;
            else if (vj > vm) vm = vj;
        }
    }
    *vmax = vm_nan ? NAN : vm;
    if (f64) to_f64(w, (size_t)K * N, f64);
    return finite;
}

/* The f64 values of n bf16 bits (a weight tile's, on its first pass through BLAS). (Exact
 * conversions: the same values in every clone.) */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void mpu_bf16_f64(const uint16_t *restrict b, long n, double *restrict out) {
    to_f64(b, (size_t)n, out);
}

/* s[M, N] = a64[M, K] @ w[K, N] in f64, w as bf16 bits, k in increasing order: what numpy's
 * GEMM computes for the few-row passes (a GEMV's one row), without the f64 copy of the tile
 * (K * N * 8 bytes written and read again for M * K * N multiply-adds). Products of bf16 values
 * are exact in f64; the sums err within the bound `mpu_finish` allows any order (gamma_K). */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
/* one build for any x86-64 host: the loader picks the widest vectors the CPU has (the sums
 * are the same IEEE operations in the same order in every clone: no contraction, -std=c99) */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void mpu_small_c(const double *restrict a64, int M, int K,
                        const uint16_t *restrict w, int N, double *restrict s) {
    /* (columns in blocks of SB whose sums stay in registers over the whole k loop; each
     * column's sum is the same adds in the same order, from 0.0, as one column at a time) */
    enum { SB = 64 };
    for (int i = 0; i < M; i++) {
        double *restrict si = s + (size_t)i * N;
        const double *ai = a64 + (size_t)i * K;
        int j0 = 0;
        for (; j0 + SB <= N; j0 += SB) {
            double acc[SB];
            for (int j = 0; j < SB; j++) acc[j] = 0.0;
            for (int k = 0; k < K; k++) {
                const double x = ai[k];
                const uint16_t *restrict row = w + (size_t)k * N + j0;
                for (int j = 0; j < SB; j++) {
                    uint32_t u = (uint32_t)row[j] << 16;
                    float f;
                    memcpy(&f, &u, 4);
                    acc[j] += x * (double)f;
                }
            }
            for (int j = 0; j < SB; j++) si[j0 + j] = acc[j];
        }
        if (j0 < N) {
            for (int j = j0; j < N; j++) si[j] = 0.0;
            for (int k = 0; k < K; k++) {
                const double x = ai[k];
                const uint16_t *restrict row = w + (size_t)k * N;
                for (int j = j0; j < N; j++) {
                    uint32_t u = (uint32_t)row[j] << 16;
                    float f;
                    memcpy(&f, &u, 4);
                    si[j] += x * (double)f;
                }
            }
        }
    }
}

#ifdef MPU_X86
/* `mpu_small_c` for AVX-512F hosts, written out: gcc's clone of it keeps the 64 sums of a
 * block in 256-bit halves on the stack, two or three memory operations per multiply-add.
 * Here the 64 (a 128-column block: 128) sums stay in 8 (16) zmm registers over the whole k
 * loop, and each step is an FMA: a64[i, k] * w[k, j] is the product of two bf16 values
 * (8-bit significands, exponents within f64's), exact in f64, so fma(x, w, acc) rounds once
 * the same exact value acc + x * w rounds: the same bits, column by column in the same order
 * (NaN payloads aside: a sum of a line with an inf or NaN never reaches the output,
 * `mpu_finish` leaves it to the exact path, which computes its own). Columns past the last
 * block of 8 take the scalar code. */
__attribute__((target("avx512f"))) static inline __m512d bf16x8_f64(const uint16_t *p) {
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16);
    return _mm512_cvtps_pd(_mm256_castsi256_ps(u));
}

#define SMALL_BLOCK(NB)                                                                    \
    do {                                                                                   \
        __m512d acc[NB];                                                                   \
        for (int b = 0; b < NB; b++) acc[b] = _mm512_setzero_pd();                         \
        const uint16_t *restrict wp = w + j0;                                              \
        for (int k = 0; k < K; k++, wp += N) {                                             \
            const __m512d x = _mm512_set1_pd(ai[k]);                                       \
            for (int b = 0; b < NB; b++)                                                   \
                acc[b] = _mm512_fmadd_pd(x, bf16x8_f64(wp + 8 * b), acc[b]);               \
        }                                                                                  \
        for (int b = 0; b < NB; b++) _mm512_storeu_pd(si + j0 + 8 * b, acc[b]);            \
        j0 += 8 * NB;                                                                      \
    } while (0)

__attribute__((target("avx512f"))) static void mpu_small_e(const double *restrict a64, int M,
                                                            int K, const uint16_t *restrict w,
                                                            int N, double *restrict s) {
    for (int i = 0; i < M; i++) {
        double *restrict si = s + (size_t)i * N;
        const double *ai = a64 + (size_t)i * K;
        int j0 = 0;
        while (j0 + 128 <= N) SMALL_BLOCK(16);
        while (j0 + 64 <= N) SMALL_BLOCK(8);
        while (j0 + 8 <= N) SMALL_BLOCK(1);
        if (j0 < N) {
            for (int j = j0; j < N; j++) si[j] = 0.0;
            for (int k = 0; k < K; k++) {
                const double x = ai[k];
                const uint16_t *restrict row = w + (size_t)k * N;
                for (int j = j0; j < N; j++) si[j] += x * bf16_to_f64(row[j]);
            }
        }
    }
}
#undef SMALL_BLOCK
#endif

void mpu_small(const double *restrict a64, int M, int K, const uint16_t *restrict w, int N,
               double *restrict s) {
#ifdef MPU_X86
    if (has_avx512f < 0) find_isa();
    if (has_avx512f) {
        mpu_small_e(a64, M, K, w, N, s);
        return;
    }
#endif
    mpu_small_c(a64, M, K, w, N, s);
}

/* a[M, K] (bf16 bits) -> its f64 values, rs[i] = max|a[i, :]| * K (>= sum_k |a[i, k]|) and
 * u[i] = rs[i] / 2^la[i]. (Exact conversions and integer reductions, cloned as `mpu_weight`:
 * baseline x86-64 has no unsigned 16-bit vector max, so the default build's loop is scalar.) */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void mpu_rows(const uint16_t *restrict a, int M, int K, double *restrict f64,
              double *restrict rs, double *restrict u) {
    to_f64(a, (size_t)M * K, f64);
    for (int i = 0; i < M; i++) {
        const uint16_t *row = a + (size_t)i * K;
        uint16_t mx = 0, lom1 = 0xFFFF;
        for (int k = 0; k < K; k++) {
            uint16_t m = row[k] & 0x7FFF;
            uint16_t m1 = (uint16_t)(m - 1);
            mx = m > mx ? m : mx;
            lom1 = m1 < lom1 ? m1 : lom1;
        }
        int l;
        double h = line_stats(mx, lom1, &l);
        rs[i] = h * (double)K;
        u[i] = pow2_down(rs[i], l);
    }
}

/* The proof over s = a @ w (f64, any order) of `numerics.mpu_matmul`: out[i, j] = the f32 of
 * the exact dot product, + 0.0 (a zero is +0.0), then + acc[i, j] in f32 when acc is not NULL,
 * wherever steps 1-2 settle it. A row with u[i] * vmax < 2^52 is exact everywhere (step 1);
 * in the others each element is checked. The flat index of every element neither step settles
 * (a line with an inf or NaN, or an interval that straddles an f32 boundary) goes to `todo`,
 * its out left for the caller (the reference's exact path). Returns how many went there.
 * (Cloned: what its vector loop writes is a finite f32 conversion, + 0.0 and one add of a
 * finite value to acc, the same IEEE operations as the scalar code; an element whose sum
 * could be NaN is never written here.) */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
long mpu_finish(const double *restrict s, int M, int K, int N, const double *restrict rs,
                const double *restrict u, const double *restrict cm, const double *restrict v,
                double vmax, const float *restrict acc, float *restrict out,
                long *restrict todo) {
    const double c = 2.0 * (double)(K + 2) * 0x1p-53;
    long n = 0;
    for (int i = 0; i < M; i++) {
        const double *si = s + (size_t)i * N;
        float *oi = out + (size_t)i * N;
        const float *ai = acc ? acc + (size_t)i * N : NULL;
        const double ui = u[i], rsi = rs[i];
        if (ui * vmax < 0x1p52) {
            if (ai) {
                for (int j = 0; j < N; j++) oi[j] = ai[j] + ((float)si[j] + 0.0f);
            } else {
                for (int j = 0; j < N; j++) oi[j] = (float)si[j] + 0.0f;
            }
            continue;
        }
        const int rfin = isfinite(rsi);
        for (int j = 0; j < N; j++) {
            double sv = si[j];
            float r = (float)sv;
            if (!(ui * v[j] < 0x1p52)) {
                double cmj = cm[j];
                if (!(rfin && isfinite(cmj))) {
                    todo[n++] = (long)i * N + j;
                    continue;
                }
                double d = c * rsi * cmj;
                float lo = (float)(sv - d), hi = (float)(sv + d);
                uint32_t bl, bh;
                memcpy(&bl, &lo, 4);
                memcpy(&bh, &hi, 4);
                if (bl != bh) {
                    todo[n++] = (long)i * N + j;
                    continue;
                }
                r = hi;
            }
            r += 0.0f;
            oi[j] = ai ? ai[j] + r : r;
        }
    }
    return n;
}

/* ---- the exact path of the proof, for the elements `mpu_finish` leaves (bf16 operands) ----
 * `numerics.settle_unproved`'s step 3 (`_f32_round`: `math.fsum`, then a tie check) and its
 * non-finite lines, in C, so that the compiled loop settles a pass without the Python.
 *
 * A finite bf16 value is m * 2^(E' - 134), m an integer < 2^8 (the stored fraction, with the
 * implicit bit when the exponent field E is nonzero) and E' = max(E, 1). A product of two is
 * m1 * m2 (< 2^16) times 2^(E1' + E2' - 268) and lies on the grid 2^-266, at bit
 * pos = E1' + E2' - 2 (0..506) of an integer counted in units of 2^-266. The exact sum of K
 * of them is that integer, kept in 32-bit digits of signed 64-bit words (each word takes K
 * additions below 2^32: no overflow for any K below 2^31), then rounded once to f32. */
enum { EX_DIGITS = 18 }; /* 576 bits: 2^-266 .. 2^310 (products below 2^256 * 2^8, K < 2^31) */

static int ex_bit(const uint32_t *d, int i) { return (int)((d[i >> 5] >> (i & 31)) & 1u); }

/* The f32 nearest (ties to even; past the largest finite value, inf) to the integer
 * (-1)^neg * d (EX_DIGITS digits, base 2^32) times 2^-266; +0.0 for 0. */
static float ex_round_f32(const uint32_t *d, int neg) {
    int h = -1;
    for (int i = EX_DIGITS - 1; i >= 0 && h < 0; i--)
        if (d[i])
            for (int b = 31; b >= 0; b--)
                if ((d[i] >> b) & 1u) {
                    h = i * 32 + b;
                    break;
                }
    if (h < 0) return 0.0f;
    /* the result's lowest bit: 24 significant bits, no finer than f32's 2^-149 (bit 117) */
    int q = h - 23 > 117 ? h - 23 : 117;
    uint32_t r = 0;
    for (int i = h; i >= q; i--) r = (r << 1) | (uint32_t)ex_bit(d, i);
    int half = ex_bit(d, q - 1), sticky = 0;
    for (int i = 0; i < (q - 1) >> 5 && !sticky; i++) sticky = d[i] != 0;
    for (int i = ((q - 1) >> 5) << 5; i < q - 1 && !sticky; i++) sticky = ex_bit(d, i);
    if (half && (sticky || (r & 1u))) r++;
    /* r <= 2^24 times 2^(q - 266) is exact in f64; converting it to f32 is exact when it is
     * an f32 value and gives inf when it is 2^128 or more */
    double x = ldexp((double)r, q - 266);
    float f = (float)x;
    return neg ? -f : f;
}

/* f32 of the exact sum_k a[k] * w[k * ldw] of finite bf16 values (`_f32_round`). */
static float ex_dot(const uint16_t *a, const uint16_t *w, int K, long ldw) {
    int64_t acc[EX_DIGITS] = {0};
    for (int k = 0; k < K; k++) {
        uint16_t ua = a[k], uw = w[(size_t)k * (size_t)ldw];
        uint32_t ea = (ua >> 7) & 0xFFu, ew = (uw >> 7) & 0xFFu;
        uint32_t ma = (ua & 0x7Fu) | (ea ? 0x80u : 0u), mw = (uw & 0x7Fu) | (ew ? 0x80u : 0u);
        if (!ma || !mw) continue;
        int pos = (int)(ea ? ea : 1) + (int)(ew ? ew : 1) - 2;
        uint64_t p = (uint64_t)(ma * mw) << (pos & 31);
        int64_t lo = (int64_t)(p & 0xFFFFFFFFu), hi = (int64_t)(p >> 32);
        if ((ua ^ uw) & 0x8000u) {
            acc[pos >> 5] -= lo;
            acc[(pos >> 5) + 1] -= hi;
        } else {
            acc[pos >> 5] += lo;
            acc[(pos >> 5) + 1] += hi;
        }
    }
    /* carries: base-2^32 digits of the two's complement, the sign from the last carry */
    uint32_t d[EX_DIGITS];
    int64_t carry = 0;
    for (int i = 0; i < EX_DIGITS; i++) {
        int64_t v = acc[i] + carry;
        d[i] = (uint32_t)((uint64_t)v & 0xFFFFFFFFu);
        carry = (v - (int64_t)d[i]) / ((int64_t)1 << 32);
    }
    int neg = carry < 0;
    if (neg) { /* magnitude: -d */
        uint64_t c = 1;
        for (int i = 0; i < EX_DIGITS; i++) {
            uint64_t v = (uint64_t)(uint32_t)~d[i] + c;
            d[i] = (uint32_t)v;
            c = v >> 32;
        }
    }
    return ex_round_f32(d, neg);
}

static inline float f32_quiet(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u |= 0x00400000u;
    memcpy(&x, &u, 4);
    return x;
}

/* Settle the `nt` elements `mpu_finish` left (flat indices `todo` of out[M, N]) of the pass
 * a[M, K] @ w[K, N] (bf16 bits; `rs`, `cm` the pass's row and column bounds) as
 * `mpu_fast.settle` does: in a row or column with an inf or NaN the class of the f64 sum (the
 * same in any order: finite products cannot overflow f64), NaN made 0x7fc00000; elsewhere the
 * exact sum rounded once to f32; then + 0.0 and, with `acc`, acc + that in f32 (a NaN acc
 * comes back quieted, as x86 returns its first NaN operand). */
void mpu_settle(const uint16_t *restrict a, int M, int K, const uint16_t *restrict w, int N,
                const double *restrict rs, const double *restrict cm,
                const long *restrict todo, long nt, const float *restrict acc,
                float *restrict out) {
    (void)M;
    for (long t = 0; t < nt; t++) {
        long e = todo[t], i = e / N, j = e % N;
        const uint16_t *ai = a + (size_t)i * (size_t)K, *wj = w + j;
        float r;
        if (!(isfinite(rs[i]) && isfinite(cm[j]))) {
            double x = 0.0;
            for (int k = 0; k < K; k++)
                x += bf16_to_f64(ai[k]) * bf16_to_f64(wj[(size_t)k * (size_t)N]);
            if (isnan(x)) {
                uint32_t u = 0x7FC00000u;
                memcpy(&r, &u, 4);
            } else {
                r = (float)x;
            }
        } else {
            r = ex_dot(ai, wj, K, N);
        }
        r += 0.0f;
        if (acc) r = isnan(acc[e]) ? f32_quiet(acc[e]) : acc[e] + r;
        out[e] = r;
    }
}
