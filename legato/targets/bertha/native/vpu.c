/* The VPU's common vector instructions on f32 and bf16, compiled (issue 15): elementwise
 * add/sub/mul/div, copy/neg/abs/sqrt/rsqrt/exp, cvt between f32 and bf16, fill, transpose, the
 * row sum and the row max,
 * bit for bit as `legato.targets.bertha.vpu` computes them with numpy and ml_dtypes on this
 * host (that Python is the reference; tests/unit/targets/test_vpu_native.py compares the two
 * on every op and dtype, NaNs, infinities, subnormals and bf16 rounding ties included).
 *
 * What the reference does, element by element (x86-64, numpy's SSE/AVX loops, default MXCSR):
 * - bf16 -> f32 is exact (the bits shifted, a signaling NaN kept); f32 -> bf16 rounds to
 *   nearest-even and makes every NaN the quiet 0x7fc0 with the NaN's sign (ml_dtypes).
 * - f32 + - * / is one IEEE operation (`vpu.F32_EXACT`: the f64 definition rounds to the same
 *   value); a NaN result is the first operand quieted when it is a NaN, else the second
 *   quieted, else (an invalid operation) the default NaN 0xffc00000 (x86's rule; fixed up
 *   explicitly below, so that the compiler's choice of operand order cannot change it).
 * - copy/neg/abs go through f64 (`vpu.unary`): a signaling NaN comes back quieted; sqrt is
 *   one IEEE f32 operation.
 * Each op returns 0 when it did the instruction, else nonzero (a case it does not cover: the
 * emulator runs the reference). Outputs may overlap inputs: a result is computed in full
 * before it is stored unless the store cannot clobber an input element not yet read. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { VDT_F32 = 0, VDT_BF16 = 1 };
enum { VOP_ADD = 0, VOP_SUB = 1, VOP_MUL = 2, VOP_DIV = 3 };
enum { VUN_COPY = 0, VUN_NEG = 1, VUN_ABS = 2, VUN_SQRT = 3, VUN_RSQRT = 4, VUN_EXP = 5 };
enum { VBC_NONE = 0, VBC_SCALAR = 1, VBC_ROW = 2, VBC_COL = 3 };

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline int is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

static inline uint16_t f32_to_bf16(uint32_t u) {
    if (is_nan_bits(u))
        return (uint16_t)((u >> 16) & 0x8000u) | 0x7fc0u;
    /* nearest-even on the low 16 bits; a carry into the exponent gives the next binade or inf */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline uint32_t load32(const void *p, int dt, long i) {
    if (dt == VDT_F32) {
        uint32_t u;
        memcpy(&u, (const char *)p + 4 * i, 4);
        return u;
    }
    uint16_t b;
    memcpy(&b, (const char *)p + 2 * i, 2);
    return (uint32_t)b << 16;
}

static inline void store32(void *p, int dt, long i, uint32_t u) {
    if (dt == VDT_F32) {
        memcpy((char *)p + 4 * i, &u, 4);
    } else {
        uint16_t b = f32_to_bf16(u);
        memcpy((char *)p + 2 * i, &b, 2);
    }
}

static inline int dt_size(int dt) { return dt == VDT_F32 ? 4 : 2; }

static inline int overlaps(const void *a, long na, const void *b, long nb) {
    const char *pa = a, *pb = b;
    return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

/* The NaN x86 (and so numpy) gives for a NaN result r of x op y. */
static inline uint32_t nan_result(uint32_t x, uint32_t y, uint32_t r) {
    if (is_nan_bits(x))
        return x | 0x00400000u;
    if (is_nan_bits(y))
        return y | 0x00400000u;
    return r;
}

static inline uint32_t bin1(int op, uint32_t xu, uint32_t yu) {
    float x = bits_f32(xu), y = bits_f32(yu), r;
    switch (op) {
    case VOP_ADD: r = x + y; break;
    case VOP_SUB: r = x - y; break;
    case VOP_MUL: r = x * y; break;
    default: r = x / y; break;
    }
    uint32_t ru = f32_bits(r);
    return is_nan_bits(ru) ? nan_result(xu, yu, 0xffc00000u) : ru;
}

/* `bin1` without branches, for the vector loops below (the same operation and NaN rule) */
static inline uint32_t bin1v(int op, uint32_t xu, uint32_t yu) {
    float x = bits_f32(xu), y = bits_f32(yu);
    float r = op == VOP_ADD ? x + y : op == VOP_SUB ? x - y : op == VOP_MUL ? x * y : x / y;
    uint32_t ru = f32_bits(r);
    uint32_t nv = is_nan_bits(xu)   ? (xu | 0x00400000u)
                  : is_nan_bits(yu) ? (yu | 0x00400000u)
                                    : 0xffc00000u;
    return is_nan_bits(ru) ? nv : ru;
}

#define VCHUNK 512 /* elements per step of the vector loops (a stack buffer each) */

/* m <= VCHUNK elements of x op y (y[i], or the scalar ys when `scalar`) into out: computed
 * into a local buffer, then stored, so the loop vectorizes whatever out aliases (an output
 * that is an input at the same index, the only overlap the caller lets through). */
static inline __attribute__((always_inline)) void bin_chunk(int op, int dt, int scalar, long m,
                                                           const char *x, const char *y,
                                                           uint32_t ys, char *out) {
    uint32_t t[VCHUNK];
    for (long i = 0; i < m; i++)
        t[i] = bin1v(op, load32(x, dt, i), scalar ? ys : load32(y, dt, i));
    if (dt == VDT_F32) {
        memcpy(out, t, 4 * (size_t)m);
    } else {
        uint16_t b[VCHUNK];
        for (long i = 0; i < m; i++)
            b[i] = f32_to_bf16(t[i]);
        memcpy(out, b, 2 * (size_t)m);
    }
}

/* `vpu_bin`'s loop in steps of VCHUNK, per broadcast mode (y[i], y[0], y[i / period],
 * y[i % period]): the same element operations as the scalar loop, so the same bits. */
static inline __attribute__((always_inline)) void bin_all(int op, int dt, int mode, long period,
                                                         long n, const char *x, const char *y,
                                                         char *out) {
    long sz = dt_size(dt);
    if (mode == VBC_NONE || mode == VBC_SCALAR) {
        uint32_t ys = load32(y, dt, 0);
        for (long i = 0; i < n; i += VCHUNK) {
            long m = n - i < VCHUNK ? n - i : VCHUNK;
            bin_chunk(op, dt, mode == VBC_SCALAR, m, x + i * sz, y + (mode ? 0 : i * sz), ys,
                      out + i * sz);
        }
        return;
    }
    for (long r0 = 0; r0 < n; r0 += period) { /* a row of `period` elements */
        long end = n - r0 < period ? n : r0 + period;
        uint32_t ys = mode == VBC_ROW ? load32(y, dt, r0 / period) : 0;
        for (long i = r0; i < end; i += VCHUNK) {
            long m = end - i < VCHUNK ? end - i : VCHUNK;
            bin_chunk(op, dt, mode == VBC_ROW, m, x + i * sz, y + (i - r0) * sz, ys,
                      out + i * sz);
        }
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
/* (the widest vectors the host has, as mpu.c's `mpu_small`: the same IEEE operations) */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void bin_vec(int op, int dt, int mode, long period, long n, const void *x, const void *y,
                    void *out) {
#define BIN_CASE(O, D)                                                                            \
    case (O) * 2 + (D): bin_all(O, D, mode, period, n, x, y, out); break;
    switch (op * 2 + dt) {
        BIN_CASE(VOP_ADD, VDT_F32)
        BIN_CASE(VOP_ADD, VDT_BF16)
        BIN_CASE(VOP_SUB, VDT_F32)
        BIN_CASE(VOP_SUB, VDT_BF16)
        BIN_CASE(VOP_MUL, VDT_F32)
        BIN_CASE(VOP_MUL, VDT_BF16)
        BIN_CASE(VOP_DIV, VDT_F32)
        BIN_CASE(VOP_DIV, VDT_BF16)
    }
#undef BIN_CASE
}

/* vpu.<op> dst[n] = x[n] op y[...] with the vbin broadcast `mode` (isa.BC_*) and `period`. */
int vpu_bin(int op, int dt, int mode, long period, long n, const void *x, const void *y,
            void *out) {
    if (dt != VDT_F32 && dt != VDT_BF16)
        return 1;
    if (op < VOP_ADD || op > VOP_DIV || n <= 0)
        return 1;
    if ((mode == VBC_ROW || mode == VBC_COL) && period <= 0)
        return 1;
    long ny = n;
    if (mode == VBC_SCALAR)
        ny = 1;
    else if (mode == VBC_ROW)
        ny = (n + period - 1) / period;
    else if (mode == VBC_COL)
        ny = n < period ? n : period;
    else if (mode != VBC_NONE)
        return 1;
    int sz = dt_size(dt);
    long nb = n * sz;
    /* element i is stored after x[i] and y[j(i)] are read, j(i) = i only without broadcast */
    int direct = (!overlaps(out, nb, x, nb) || out == x) &&
                 (!overlaps(out, nb, y, ny * sz) || (out == y && mode == VBC_NONE));
    if (direct) { /* (the vector loops: every element read before its own store) */
        bin_vec(op, dt, mode, period, n, x, y, out);
        return 0;
    }
    void *dst = malloc((size_t)nb);
    if (dst == NULL)
        return 1;
    for (long i = 0; i < n; i++) {
        long j = i;
        if (mode == VBC_SCALAR)
            j = 0;
        else if (mode == VBC_ROW)
            j = i / period;
        else if (mode == VBC_COL)
            j = i % period;
        store32(dst, dt, i, bin1(op, load32(x, dt, i), load32(y, dt, j)));
    }
    if (!direct) {
        memmove(out, dst, (size_t)nb);
        free(dst);
    }
    return 0;
}

/* The ulps of f64 by which the reference's exp (numpy's float64 exp: its own AVX-512F code
 * here, another loop or libm's on another host; numpy's accuracy test holds it to 1 ulp,
 * umath-validation-set-exp.csv) and this file's (glibc's vector exp, libmvec, which glibc
 * documents within 4 ulps since it shipped in 2.22, or libm's scalar `exp`, documented within
 * 1 ulp) may each miss exp(x): an assumption, with a wide margin. */
#define EXP_ULPS 64

/* exp of n doubles, y[i] = exp(x[i]): libmvec's widest vector exp the host runs
 * (`_ZGVeN8v_exp`, AVX-512F; `_ZGVdN4v_exp`, AVX2), found once with dlopen; else libm's `exp`
 * per element. Which one computed y does not matter to the result: `exp_chunk` proves the
 * reference's bits from any y within EXP_ULPS of exp(x), or declines. */
typedef void (*vexp_fn)(const double *x, double *y, long n);

static void vexp_scalar(const double *x, double *y, long n) {
    for (long i = 0; i < n; i++)
        y[i] = exp(x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <dlfcn.h>
#include <immintrin.h>
typedef __m512d (*mvec8)(__m512d);
typedef __m256d (*mvec4)(__m256d);
static mvec8 mvec_e8;
static mvec4 mvec_d4;

__attribute__((target("avx512f"))) static void vexp_e8(const double *x, double *y, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(y + i, mvec_e8(_mm512_loadu_pd(x + i)));
    for (; i < n; i++)
        y[i] = exp(x[i]);
}

__attribute__((target("avx2"))) static void vexp_d4(const double *x, double *y, long n) {
    long i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, mvec_d4(_mm256_loadu_pd(x + i)));
    for (; i < n; i++)
        y[i] = exp(x[i]);
}

static vexp_fn vexp_resolve(void) {
    void *h = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return vexp_scalar;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        mvec_e8 = (mvec8)dlsym(h, "_ZGVeN8v_exp");
        if (mvec_e8 != NULL)
            return vexp_e8;
    }
    if (__builtin_cpu_supports("avx2")) {
        mvec_d4 = (mvec4)dlsym(h, "_ZGVdN4v_exp");
        if (mvec_d4 != NULL)
            return vexp_d4;
    }
    return vexp_scalar;
}
#else
static vexp_fn vexp_resolve(void) { return vexp_scalar; }
#endif

static vexp_fn vexp_impl;

/* 1 when libmvec's vector exp is in use (a test reads it), after resolving it once */
int vpu_exp_vector(void) {
    if (vexp_impl == NULL)
        vexp_impl = vexp_resolve();
    return vexp_impl != vexp_scalar;
}

/* vpu.exp of m <= VCHUNK elements of x (dt) into res (as f32 bits, rounded to dt), `numerics`
 * exp in f64 rounded to dt (via f32); 0 when an element is not proven to be the reference's.
 * A NaN gives the NaN quieted (x86's rule: the reference's exp returns its NaN operand), +-inf
 * give +inf and +0. A finite x: y = exp(x) in f64; the reference's value lies within EXP_ULPS
 * f64 ulps of exp(x), so within 2 * EXP_ULPS of y; rounding to f32 (and to bf16) is monotonic,
 * so when both ends of that interval round to the same bits, so does the reference's value.
 * Else (a value within ~2^-22 of an f32 rounding boundary, ~3e-7 of random inputs) the caller
 * hands the instruction back. The proof's steps have no branches, so they vectorize. */
static inline __attribute__((always_inline)) int exp_prove(int dt, long m, const char *x,
                                                           const double *yd, uint32_t *res) {
    /* (in three simple loops, integer and conversion steps apart, so that each vectorizes) */
    const uint64_t inf = 0x7ff0000000000000ull, k = 2 * EXP_ULPS;
    uint64_t lob[VCHUNK], hib[VCHUNK];
    float fl[VCHUNK], fh[VCHUNK], fy[VCHUNK];
    for (long i = 0; i < m; i++) {
        uint64_t yb;
        memcpy(&yb, &yd[i], 8);
        lob[i] = yb > k ? yb - k : 0;
        hib[i] = yb >= inf - k ? inf : yb + k;
    }
    for (long i = 0; i < m; i++) {
        double lo, hi;
        memcpy(&lo, &lob[i], 8);
        memcpy(&hi, &hib[i], 8);
        fl[i] = (float)lo;
        fh[i] = (float)hi;
        fy[i] = (float)yd[i];
    }
    uint32_t bad = 0;
    for (long i = 0; i < m; i++) {
        uint32_t u = load32(x, dt, i), a = f32_bits(fl[i]), b = f32_bits(fh[i]);
        if (dt == VDT_BF16) {
            a = (uint32_t)f32_to_bf16(a) << 16;
            b = (uint32_t)f32_to_bf16(b) << 16;
        }
        uint32_t nan = is_nan_bits(u);
        bad |= (nan ^ 1u) & (a != b);
        res[i] = nan ? (u | 0x00400000u) : f32_bits(fy[i]);
    }
    return bad == 0;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static int
exp_chunk(int dt, long m, const char *x, uint32_t *res) {
    double xd[VCHUNK], yd[VCHUNK];
    if (m <= 0 || m > VCHUNK)
        return 0;
    if (dt == VDT_F32) {
        for (long i = 0; i < m; i++)
            xd[i] = (double)bits_f32(load32(x, VDT_F32, i));
    } else {
        for (long i = 0; i < m; i++)
            xd[i] = (double)bits_f32(load32(x, VDT_BF16, i));
    }
    vexp_impl(xd, yd, m);
    /* (one loop per dtype: the dtype's test out of the loop, which then vectorizes) */
    return dt == VDT_F32 ? exp_prove(VDT_F32, m, x, yd, res) : exp_prove(VDT_BF16, m, x, yd, res);
}

/* vpu.copy / neg / abs / sqrt / rsqrt / exp dst[n] = op(x[n]) (copy, neg and abs go through
 * f64, whose round trip quiets a NaN; sqrt is one IEEE f32 operation, `vpu.F32_EXACT`; rsqrt is
 * `numerics.rsqrt` in f64, 1 / sqrt(x), two IEEE operations, then rounded to f32: a NaN result
 * is the NaN operand quieted, else (a negative operand) the default NaN; exp: `exp_chunk`, into a
 * buffer first, so that an element it cannot prove leaves nothing written). */
int vpu_un(int op, int dt, long n, const void *x, void *out) {
    if ((dt != VDT_F32 && dt != VDT_BF16) || op < VUN_COPY || op > VUN_EXP || n <= 0)
        return 1;
    long nb = n * dt_size(dt);
    int direct = op != VUN_EXP && (!overlaps(out, nb, x, nb) || out == x);
    void *dst = direct ? out : malloc((size_t)nb);
    if (dst == NULL)
        return 1;
    if (op == VUN_EXP) {
        if (vexp_impl == NULL)
            vexp_impl = vexp_resolve();
        uint32_t r[VCHUNK];
        for (long i0 = 0; i0 < n; i0 += VCHUNK) {
            long m = n - i0 < VCHUNK ? n - i0 : VCHUNK;
            if (!exp_chunk(dt, m, (const char *)x + i0 * dt_size(dt), r)) {
                free(dst);
                return 1;
            }
            for (long i = 0; i < m; i++)
                store32(dst, dt, i0 + i, r[i]);
        }
        memmove(out, dst, (size_t)nb);
        free(dst);
        return 0;
    }
    for (long i = 0; i < n; i++) {
        uint32_t u = load32(x, dt, i);
        if (op == VUN_SQRT) {
            uint32_t r = f32_bits(sqrtf(bits_f32(u)));
            store32(dst, dt, i, is_nan_bits(r) ? nan_result(u, u, 0xffc00000u) : r);
            continue;
        }
        if (op == VUN_RSQRT) {
            uint32_t r = f32_bits((float)(1.0 / sqrt((double)bits_f32(u))));
            store32(dst, dt, i, is_nan_bits(r) ? nan_result(u, u, 0xffc00000u) : r);
            continue;
        }
        if (is_nan_bits(u))
            u |= 0x00400000u;
        if (op == VUN_NEG)
            u ^= 0x80000000u;
        else if (op == VUN_ABS)
            u &= 0x7fffffffu;
        store32(dst, dt, i, u);
    }
    if (!direct) {
        memmove(out, dst, (size_t)nb);
        free(dst);
    }
    return 0;
}

/* f32 -> bf16 of n elements (`f32_to_bf16` without a branch, so that it vectorizes; element
 * i is stored at byte 2i after byte 4i was read, so out may be x at the same start). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
cvt_f32_bf16(long n, const void *x, void *out) {
    const char *xs = x;
    char *o = out;
    for (long i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, xs + 4 * i, 4);
        uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        uint16_t q = (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
        uint16_t b = is_nan_bits(u) ? q : r;
        memcpy(o + 2 * i, &b, 2);
    }
}

/* vpu.cvt from `sdt` to `ddt` (f32 or bf16 each): via f32, rounded to ddt. */
int vpu_cvt(int sdt, int ddt, long n, const void *x, void *out) {
    if ((sdt != VDT_F32 && sdt != VDT_BF16) || (ddt != VDT_F32 && ddt != VDT_BF16) || n <= 0)
        return 1;
    long sb = n * dt_size(sdt), db = n * dt_size(ddt);
    /* element i is stored at byte i * dsize after source byte i * ssize was read: safe in place
     * (same start) only when the result is not wider */
    int direct = !overlaps(out, db, x, sb) || (out == x && db <= sb);
    void *dst = direct ? out : malloc((size_t)db);
    if (dst == NULL)
        return 1;
    if (sdt == VDT_F32 && ddt == VDT_BF16)
        cvt_f32_bf16(n, x, dst);
    else
        for (long i = 0; i < n; i++)
            store32(dst, ddt, i, load32(x, sdt, i));
    if (!direct) {
        memmove(out, dst, (size_t)db);
        free(dst);
    }
    return 0;
}

/* vpu.fill: n elements of `esize` bytes, each the low bytes of `bits` (little-endian). */
int vpu_fill(int esize, long n, uint64_t bits, void *out) {
    if ((esize != 1 && esize != 2 && esize != 4 && esize != 8) || n <= 0)
        return 1;
    char *p = out;
    for (long i = 0; i < n; i++)
        memcpy(p + i * esize, &bits, (size_t)esize);
    return 0;
}

/* vpu.transpose of x[rows, cols] (elements of `esize` bytes) into out[cols, rows]. */
int vpu_transpose(int esize, long rows, long cols, const void *x, void *out) {
    if ((esize != 1 && esize != 2 && esize != 4 && esize != 8) || rows <= 0 || cols <= 0)
        return 1;
    long nb = rows * cols * esize;
    int direct = !overlaps(out, nb, x, nb);
    char *dst = direct ? out : malloc((size_t)nb);
    if (dst == NULL)
        return 1;
    const char *src = x;
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < cols; c++)
            memcpy(dst + (c * rows + r) * esize, src + (r * cols + c) * esize, (size_t)esize);
    if (!direct) {
        memmove(out, dst, (size_t)nb);
        free(dst);
    }
    return 0;
}

/* vpu.rsum of x[rows, cols] into out[rows]: an f32 sum over columns in increasing order from
 * the first element (numpy's add.accumulate), + 0.0 (a -0.0 sum becomes +0.0), rounded once. */
int vpu_rsum(int dt, long rows, long cols, const void *x, void *out) {
    if ((dt != VDT_F32 && dt != VDT_BF16) || rows <= 0 || cols <= 0)
        return 1;
    int sz = dt_size(dt);
    long ob = rows * sz;
    int direct = !overlaps(out, ob, x, rows * cols * sz);
    void *dst = direct ? out : malloc((size_t)ob);
    if (dst == NULL)
        return 1;
    for (long r = 0; r < rows; r++) {
        /* the sum in a float register; once an add gives a NaN every later one does, so a
         * row whose sum is not a NaN took no NaN step: each of its adds is `bin1`'s. A NaN
         * row is summed again with `bin1` (x86's NaN rule at each step). */
        float f = bits_f32(load32(x, dt, r * cols));
        for (long c = 1; c < cols; c++)
            f = f + bits_f32(load32(x, dt, r * cols + c));
        uint32_t acc = f32_bits(f);
        if (is_nan_bits(acc)) {
            acc = load32(x, dt, r * cols);
            for (long c = 1; c < cols; c++)
                acc = bin1(VOP_ADD, acc, load32(x, dt, r * cols + c));
        }
        store32(dst, dt, r, bin1(VOP_ADD, acc, 0u));
    }
    if (!direct) {
        memmove(out, dst, (size_t)ob);
        free(dst);
    }
    return 0;
}

/* vpu.rmax of x[rows, cols] into out[rows]: the largest element of each row, exact (`vpu.row_max`:
 * the f64 max rounded back, which gives the element's own bits). Nonzero, nothing written, for
 * what the reference's reduction may order differently: a NaN in the instruction's rows (which
 * of several it returns), or a row whose largest value is a zero of both signs. */
/* The row max's steps on one row, without branches (so they vectorize): the largest element
 * by an integer key that orders f32 bits as their values (a negative's magnitude bits
 * flipped: -0 just below +0), whether a NaN, a +0 or a -0 is in it. The largest value has one
 * bit pattern but for a zero, whose sign the caller checks, so the key's largest is the
 * element the sequential `>` scan keeps. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static uint32_t
rmax_row(int dt, long cols, const char *x, int *nan, int *pz, int *nz) {
    int32_t best = INT32_MIN;
    int an = 0, p = 0, z = 0;
    for (long c = 0; c < cols; c++) {
        uint32_t u = load32(x, dt, c);
        int32_t s = (int32_t)u;
        int32_t key = s >= 0 ? s : (s ^ 0x7fffffff);
        best = key > best ? key : best;
        an |= is_nan_bits(u);
        p |= u == 0;
        z |= u == 0x80000000u;
    }
    *nan = an;
    *pz = p;
    *nz = z;
    return (uint32_t)(best >= 0 ? best : (best ^ 0x7fffffff));
}

int vpu_rmax(int dt, long rows, long cols, const void *x, void *out) {
    if ((dt != VDT_F32 && dt != VDT_BF16) || rows <= 0 || cols <= 0)
        return 1;
    uint32_t *best = malloc((size_t)rows * 4);
    if (best == NULL)
        return 1;
    for (long r = 0; r < rows; r++) {
        int nan, pz, nz;
        uint32_t m = rmax_row(dt, cols, (const char *)x + r * cols * dt_size(dt), &nan, &pz, &nz);
        if (nan || ((m & 0x7fffffffu) == 0 && pz && nz)) {
            free(best);
            return 1;
        }
        best[r] = m;
    }
    for (long r = 0; r < rows; r++)
        store32(out, dt, r, best[r]);
    free(best);
    return 0;
}
