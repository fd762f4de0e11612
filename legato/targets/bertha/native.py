"""The emulator's compiled helpers (C through cffi, issue 15), if built: `lib` and `ffi` of
`legato.targets.bertha._native` (`native_build.py` builds it; scripts/bootstrap.sh runs that),
else None. Each helper has a Python reference that runs without them and gives the same bits:
the MPU numerics (`mpu_fast`), the scalar ISA (`Emulator.native_scalars`) and the common
VPU instructions (`vpu`, `Emulator.native_vpu`), the DRAM channel booking
(`timing.DramTiming.native`), the scheduler's loop (`Emulator.native_loop`).

`$LEGATO_NATIVE=0` makes `ENABLED` false: the references run even when the helpers are built.
"""

from __future__ import annotations

import logging
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CDEF = """
int mpu_weight(const uint16_t *w, int K, int N, double *f64, double *cm, double *v,
               double *vmax);
void mpu_bf16_f64(const uint16_t *b, long n, double *out);
void mpu_small(const double *a64, int M, int K, const uint16_t *w, int N, double *s);
void mpu_rows(const uint16_t *a, int M, int K, double *f64, double *rs, double *u);
typedef struct {
    int32_t op, a, b, c;
    int64_t imm;
} sins;
long scalar_run(const sins *code, long n, int64_t *r, long *pc, long budget, int core,
                int num_cores, int64_t window_base, int64_t window_size, int *status);
long mpu_finish(const double *s, int M, int K, int N, const double *rs, const double *u,
                const double *cm, const double *v, double vmax, const float *acc, float *out,
                long *todo);
void mpu_settle(const uint16_t *a, int M, int K, const uint16_t *w, int N, const double *rs,
                const double *cm, const long *todo, long nt, const float *acc, float *out);
int vpu_bin(int op, int dt, int mode, long period, long n, const void *x, const void *y,
            void *out);
int vpu_un(int op, int dt, long n, const void *x, void *out);
int vpu_exp_vector(void);
int vpu_cvt(int sdt, int ddt, long n, const void *x, void *out);
int vpu_fill(int esize, long n, uint64_t bits, void *out);
int vpu_transpose(int esize, long rows, long cols, const void *x, void *out);
int vpu_rsum(int dt, long rows, long cols, const void *x, void *out);
int vpu_rmax(int dt, long rows, long cols, const void *x, void *out);
typedef struct {
    int64_t nat, c1, c2, fmt, sz, ssz, mode, period, trans, a, b, c, d;
} lvpu;
typedef struct {
    int64_t pc, time, halted, halt_time, count, vpu_free, dma_end, dma_busy_until, pyonly;
    int64_t version;
    int64_t core;
    int64_t kind, ready, stable, external, queue;
    int64_t waiting;
    int64_t pyplan;
    int64_t n;
    int64_t *regs;
    const sins *code;
    const int8_t *ck;
    const lvpu *vs;
    const int64_t *bt, *brows;
    ...;
    int64_t unit_end, busy_vpu, busy_dma;
    int64_t mpu_free, busy_mpu;
    int64_t w_has, w_gen, w_k, w_n, w_finite;
    double w_vmax;
    uint16_t *w_vals;
    int64_t rr[32];
    int64_t nrr;
    const uint32_t *rm;
    ...;
} lmod;
typedef struct {
    int64_t base, size, core, read_only, recycled, lo, hi, space, owner;
    char *ptr;
    int64_t sname;
} lregion;
typedef struct {
    int64_t free, busy, n, cap, touched;
    int64_t *inf;
} lport;
typedef struct {
    int64_t end, seq, idx, pc, kind, dreg;
    char *dp, *sp;
    int64_t rows, row, dstride, sstride, sspan, dspan, dst, src;
} lland;
typedef struct {
    lmod *mods;
    int64_t nmods;
    ...;
    int64_t total, limit, now, trace_on, fast_wakes;
    int64_t idx, t;
    int64_t num_cores, window_base, window_size;
    int64_t *wake_buf, *wake_out;
    lregion *regions;
    int64_t nregions;
    int64_t vpu_lanes, vpu_trans_rate, vpu_elems, vpu_trans_elems;
    lport *ports;
    int64_t nports, *port_order, norder;
    int64_t *chan_free, *chan_bytes;
    int64_t nchan, granule, chan_rate, port_rate, latency, max_inflight, dma_on;
    lland *lands;
    int64_t nland, cland, land_seq;
    int64_t nwake;
    int64_t mpu_on, mpu_tk, mpu_tn, mpu_load_rate, mpu_mac_rate, mpu_small_m, mpubuf_space;
    int64_t macs;
    void *dgemm64, *dgemm32;
    double *mx_a64, *mx_rs, *mx_u, *mx_s;
    float *mx_out, *mx_acc;
    long *mx_todo;
    int64_t mx_rows;
    int64_t mm_nt, mm_m, mm_k, mm_n, mm_src, mm_acc;
    int64_t mm_exact, mm_settled;
    int64_t map_addr, map_n;
    int64_t instr_limit, cycle_limit, check_every;
    double deadline;
    int64_t prologue_on;
} lstate;
int loop_init(lstate *S);
void loop_free(lstate *S);
int loop_push(lstate *S, int64_t idx, int64_t ready);
int q_push(lstate *S, int64_t key, int64_t end);
int q_head(const lstate *S, int64_t key, int64_t *out);
int64_t q_pop(lstate *S, int64_t key);
long loop_wake(lstate *S);
int64_t sb_conflict(const lstate *S, int64_t idx, int64_t time, int64_t nr, int64_t nw,
                    const int64_t *rg);
int sb_add(lstate *S, int64_t idx, int64_t end, int64_t nr, int64_t nw, const int64_t *rg);
int64_t sb_conflict2(const lstate *S, int64_t idx, int64_t time, int64_t r0, int64_t r1,
                     int64_t w0, int64_t w1);
int sb_add2(lstate *S, int64_t idx, int64_t end, int64_t r0, int64_t r1, int64_t w0,
            int64_t w1);
int loop_plan(lstate *S, int64_t idx, int64_t ready, int64_t external, int64_t stable,
              int64_t queue);
int loop_region(lstate *S, int64_t base, int64_t size, int64_t core, int64_t read_only,
                int64_t recycled, int64_t space, int64_t owner, char *ptr, int64_t sname);
int loop_regions(lstate *S, int64_t n, const int64_t *f, char *const *ptrs);
int loop_run(lstate *S, int64_t after);
int loop_sched(lstate *S, int64_t idx);
void free(void *p);
void rr_set(lmod *m, int64_t r, int64_t end);
int64_t rr_stall(lmod *m, int64_t time, uint32_t mask);
int mm_commit(lstate *S, int64_t idx, int64_t t);
void loop_mod_init(lstate *S, int64_t idx, int64_t *regs, int64_t n, const sins *code,
                   const int8_t *ck, const lvpu *vs, const uint32_t *rm, const int64_t *bt,
                   const int64_t *brows, int64_t core, int64_t version, int64_t mpu_free);
void loop_mods_init(lstate *S, int64_t *regs, int64_t nregs, const int64_t *n,
                    const sins *const *code, const int8_t *const *ck, const lvpu *const *vs,
                    const uint32_t *const *rm, const int64_t *const *bt,
                    const int64_t *const *brows, const int64_t *core, const int64_t *cid,
                    int64_t table, const int64_t *vm);
int loop_prologue(lstate *S, int64_t from, const int64_t *f);
void loop_final(const lstate *S, int64_t *out);
int64_t loop_final_shared(const lstate *S, int64_t *out, int64_t cap);
void loop_put(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
              int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
              int64_t dma_busy_until, int64_t pyonly);
int loop_put_plan(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
                  int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
                  int64_t dma_busy_until, int64_t pyonly, int64_t ready, int64_t external,
                  int64_t stable, int64_t queue);
void port_touch(lstate *S, int64_t i);
int64_t port_slot(const lstate *S, int64_t i, int64_t t, int64_t maxf);
int port_admit(lstate *S, int64_t i, int64_t t, int64_t end);
int64_t land_push_py(lstate *S, int64_t end, int64_t idx, int64_t pc);
int64_t land_due(lstate *S, int64_t t);
const lland *land_at(const lstate *S, int64_t i);
int64_t dram_book(int64_t *free, int64_t *booked, int channels, int64_t granule, int64_t rate,
                  int64_t t, int64_t addr, int64_t n, int64_t data_end);
"""
SOURCES = ["native/mpu.c", "native/scalar.c", "native/vpu.c", "native/dram.c", "native/loop.c"]


def source_hash(here: str = HERE) -> str:
    """SHA-256 of the interface and the C sources: the built module carries it, and
    `native.py` refuses a module built from other sources (a stale build after an edit)."""
    import hashlib

    h = hashlib.sha256(CDEF.encode())
    for s in SOURCES:
        with open(os.path.join(here, s), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


try:
    from legato.targets.bertha import _native  # built by native_build.py
except ImportError:  # not built: the references run instead
    _native = None


def _built_from_these_sources(module) -> bool:
    """A module built before the C sources were edited would run old code: refuse it."""
    try:
        built = module.ffi.string(module.lib.legato_source_hash()).decode()
    except AttributeError:  # built before the module carried its sources' hash
        built = None
    try:
        expected = source_hash()
    except OSError:  # an install without the C sources: nothing the build could be stale against
        return True
    if built != expected:
        logging.getLogger("legato").warning(
            "%s was built from other sources than native/*.c (stale build): the emulator runs "
            "the Python references; rebuild with `python -m legato.targets.bertha.native_build`",
            module.__file__,
        )
        return False
    return True


if _native is not None and not _built_from_these_sources(_native):
    _native = None

lib = None if _native is None else _native.lib
ffi = None if _native is None else _native.ffi
ENABLED = lib is not None and os.environ.get("LEGATO_NATIVE", "1") != "0"
