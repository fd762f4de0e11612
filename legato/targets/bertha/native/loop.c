/* The scheduler's event loop, compiled (issue 15, docs/architecture.md "The compiled loop").
 *
 * `Emulator._run_native` keeps in these structs what the loop needs of every module (pc, issue
 * time, halt, counts, version, its plan when the plan is one this code made, its registers:
 * the module's own `regs` array), the scheduler's heap, the waiting flags and the arrival
 * queues, the register scoreboard of loads in flight. `loop_run` pops the heap as
 * `Emulator._run` does and runs what it can itself: scalar code (native/scalar.c's
 * `scalar_run`), `qwait`, `dmawait`, `ld` / `st`, DMAs, the MPU and native/vpu.c's VPU
 * instructions (planning and issue). At anything else it returns a status naming the module
 * and time, and the Python reference does that one step on the same state: a plan Python made
 * (`LP_PYPOP`), an instruction to plan (`LP_SCHED`), scalar code it cannot run (`LP_SCALARS`: a
 * trap, an unencodable `lsa`), a bound crossed (`LP_LIMIT`), an issue that needs Python
 * (`LP_PYEXEC`: a landing of the Python's is due or a trace event is to be written), a core
 * space to map on first touch (`LP_MAP`), the end (`LP_DONE`) or a deadlock (`LP_DEADLOCK`).
 * `Emulator.native_loop = False` runs the Python loop, the reference that
 * tests/unit/targets/test_emulator_native_loop.py compares this with. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    CK_PY = 0, CK_SCALAR = 1, CK_QWAIT = 2, CK_DMAWAIT = 3, CK_PURE_PY = 4, CK_VPU = 5,
    CK_DMA = 6, CK_DMA2D = 7, CK_LDW = 8, CK_MM = 9, CK_LD = 10, CK_ST = 11
};
/* an mpu.mm's flags in `sins.imm` (`_loop_program` maps `isa.MM_F32`, `MM_ACC` to these) */
enum { MMF_F32 = 1, MMF_ACC = 2 };
/* native/vpu.c's forms (`lvpu.nat`) and the VPU formats (`lvpu.fmt`) */
enum { NV_BIN = 1, NV_UN, NV_CVT, NV_FILL, NV_TRANSPOSE, NV_RSUM, NV_RMAX };
enum { VF_BIN = 1, VF_UN, VF_CVT, VF_FILL, VF_2D };
enum { BC_NONE = 0, BC_SCALAR, BC_ROW, BC_COL };
#define SB_RANGES 6 /* the most ranges of one scoreboard entry (reads and writes) */
enum {
    LP_DONE = 0, LP_PYPOP, LP_SCHED, LP_SCALARS, LP_LIMIT, LP_PYEXEC, LP_DEADLOCK, LP_NOMEM,
    LP_WAKE, LP_MMTODO, LP_MAP
};
#define LP_INF ((int64_t)1 << 62)
#define LP_QUEUES 256 /* per (core, space): 256 queues (`arch.dma.decode_notify`) */

/* A VPU instruction's encoding, decoded once per program (`_VpuStatic`): native/vpu.c's form
 * and its two leading codes, the format, element sizes (result, source), broadcast mode and
 * period, whether it is transcendental, its register fields. */
typedef struct {
    int64_t nat, c1, c2, fmt, sz, ssz, mode, period, trans, a, b, c, d;
} lvpu;

/* A scoreboard entry (`Module.inflight`): until `end`, nr read ranges then nw write ranges. */
typedef struct {
    int64_t end, nr, nw;
    int64_t rg[SB_RANGES][2];
} lsb;

/* A region of memory in one array at `ptr` (`Emulator._loop_region`): `core` the core whose
 * local space holds all of it (`Emulator._local_of`; -1: none), `space` what a DMA end in it is
 * (RS_SHARED: shared DRAM, booked on the channels; RS_DRAM: other DRAM, RS_LOCAL: neither;
 * RS_NONE: it spans more than one space, the Python's), `owner` the core of its space (-1: a
 * shared space); lo/hi: the bytes written here (of a recycled region, `_RecycledRegion`). */
enum { RS_NONE = -1, RS_SHARED = 0, RS_DRAM = 1, RS_LOCAL = 2 };
typedef struct {
    int64_t base, size, core, read_only, recycled, lo, hi, space, owner;
    char *ptr;
    int64_t sname; /* the code of the local space that holds it all (`isa.SPACES`), else -1 */
} lregion;

/* A DMA engine's port (`timing.Port`): its data-phase timeline, busy cycles and the end times
 * of its transfers in flight; `touched`: the Python has (or would have) made its `Port`. */
typedef struct {
    int64_t free, busy, n, cap, touched;
    int64_t *inf;
} lport;

/* A DMA or dma2d this code planned (`Emulator._plan_dma`): its geometry (a dma: one row of n
 * bytes), notify queue key (-1: none), port, the scoreboard's earliest time (`base`), whether
 * an end is DRAM, and its two regions (indices). */
typedef struct {
    int64_t dst, src, rows, row, dstride, sstride, sspan, dspan, notify, port, base, dram;
    int64_t sreg, dreg;
} ldma;

/* An mpu.ldw or mpu.mm this code planned (`Emulator._plan_ldw`, `_plan_mm`): its operands,
 * the weight's shape, the flags, the regions (indices) of the source and the destination,
 * and the scoreboard's ranges (nr reads, then the write of an mm). */
typedef struct {
    int64_t src, dst, rows, k, n, f32, acc, nr, sreg, dreg;
    int64_t rg[3][2];
} lmpu;

/* A DMA whose bytes land at `end` (`Emulator._landing`), in (end, seq) order: kind 0, the
 * Python's (its function is kept there by seq); 1, a dma's memmove; 2, a dma2d's rows. */
typedef struct {
    int64_t end, seq, idx, pc, kind, dreg;
    char *dp, *sp;
    int64_t rows, row, dstride, sstride, sspan, dspan, dst, src;
} lland;

typedef struct {
    /* synced with the Python `Module` at each hand-over (`_LoopModule`) */
    int64_t pc, time, halted, halt_time, count, vpu_free, dma_end, dma_busy_until, pyonly;
    int64_t version; /* kept here only: the Python module reads it through a property */
    int64_t core;    /* -1: top */
    /* the plan, when this code made it (kind != CK_PY): ready, stable, external, queue key */
    int64_t kind, ready, stable, external, queue;
    int64_t waiting; /* the reference's `Emulator._waiting` */
    /* kind CK_PY: 1 when ready, stable and queue are those of the Python's plan (`loop_plan`,
     * `_LoopModule.plan`), which `loop_wake` pushes again or moves on as `_wake_py` would */
    int64_t pyplan;
    int64_t n;       /* program length */
    int64_t *regs;
    const sins *code;  /* scalar encodings; a qwait's space in `a`, its queue in `imm` */
    const int8_t *ck;  /* per pc: CK_* */
    const lvpu *vs;    /* per pc: a VPU instruction's encoding */
    /* the operands' extents (`Module.bounds`): per pc a row of brows or -1 (NULL: none); a
     * row is its count, then (field 0-3 for a-d, lo, hi, window) per bounded operand */
    const int64_t *bt, *brows;
    lsb *sb;           /* the scoreboard, kept here only */
    int64_t nsb, csb;
    int64_t unit_end, busy_vpu, busy_dma; /* of the unit instructions run here (added to the
                                             Python's) */
    ldma dma; /* the plan of a DMA this code made */
    int64_t mpu_free, busy_mpu; /* `Module.mpu_free`, kept here only; the MPU cycles run here */
    /* the weight tile of the last mpu.ldw this code ran (`Module.weight`): w_has 0 when the
     * Python's is newer (it ran an ldw), w_gen counts this code's; bf16 bits [w_k, w_n], the
     * column statistics of the proof (`mpu_weight`), capacity for the MPU's largest tile */
    int64_t w_has, w_gen, w_k, w_n, w_finite;
    double w_vmax;
    uint16_t *w_vals;
    double *w_cm, *w_v;
    lmpu mpu; /* the plan of an mpu.ldw / mpu.mm this code made */
    /* the register scoreboard (`Module.reg_ready`, `stall_on_loads`), kept here only: per
     * register the cycle its in-flight `ld` completes (0: none, as a key not in the dict),
     * how many are set (the dict's length), and per pc the registers its instruction names
     * (`isa.REG_FIELDS`, and a DMA's notify core register: `_loop_program`) */
    int64_t rr[32];
    int64_t nrr;
    const uint32_t *rm;
    /* the plan of an ld / st this code made: its address, region, whether it is DRAM */
    int64_t ls_addr, ls_reg, ls_dram;
} lmod;

typedef struct {
    int64_t ready, version, idx;
} lhent;

typedef struct {
    int64_t *buf;
    int64_t head, len, cap;
} lfifo;

typedef struct {
    lmod *mods;
    int64_t nmods;
    lhent *heap;
    int64_t hlen, hcap;
    lfifo **queues; /* per (core * 16 + space): LP_QUEUES fifos, allocated on first use */
    int64_t nqueues;
    int64_t total, limit, now, trace_on, fast_wakes;
    int64_t idx, t; /* out: the module and time a status names */
    int64_t num_cores, window_base, window_size;
    int64_t *wake_buf, *wake_out; /* nmods each */
    lregion *regions;
    int64_t nregions, cregions;
    int64_t vpu_lanes, vpu_trans_rate, vpu_elems, vpu_trans_elems;
    /* the DMAs (`timing.DramTiming`): ports (0: top, 1 + i: core i), in the order the Python
     * would have made them; the channels' timelines (the Python's arrays); the landings */
    lport *ports;
    int64_t nports, *port_order, norder;
    int64_t *chan_free, *chan_bytes;
    int64_t nchan, granule, chan_rate, port_rate, latency, max_inflight, dma_on;
    lland *lands;
    int64_t nland, cland, land_seq;
    int64_t nwake; /* LP_WAKE: how many waiters in wake_out are the Python's to plan */
    /* the MPU (`timing.mpu_load_cycles`, `mpu_matmul_cycles`, `units.check_weight_tile`):
     * mpu_on 0: every ldw / mm is the Python's; the passes of at most mpu_small_m rows run
     * here (`mpu_fast.SMALL_M`), the others go to numpy's BLAS in the Python; `macs` counted
     * here (added to `Emulator.macs`); the scratch arrays of one pass */
    int64_t mpu_on, mpu_tk, mpu_tn, mpu_load_rate, mpu_mac_rate, mpu_small_m, mpubuf_space;
    int64_t macs;
    /* numpy's own BLAS `cblas_dgemm` (`Emulator._loop_mpu` finds it), with 64-bit or 32-bit
     * integers; both NULL: the passes of more than mpu_small_m rows are the Python's */
    void *dgemm64, *dgemm32;
    double *mx_a64, *mx_rs, *mx_u, *mx_s;
    float *mx_out, *mx_acc;
    long *mx_todo;
    int64_t mx_rows; /* the scratch arrays' capacity in rows */
    /* The f64 values of the tile the last BLAS pass used (module mx_w_owner's ldw number
     * mx_w_gen), one array for all modules: a pass on another tile converts its bf16 bits
     * again. Measured on the GEMM (interleaved A/B against an f64 copy per module, made
     * on a tile's first pass): -7% EVT0, -3..-7% EVT1 of a run. The 32 / 64 cores take turns,
     * so a module's own 128-256 KiB f64 tile has left the cache by its next pass, and BLAS's
     * packing reads it back slowly, while this array stays cached and the bf16 bits are a
     * quarter of the bytes. The same f64 values either way. */
    int64_t mx_w_owner, mx_w_gen;
    double *mx_w64;
    /* LP_MMTODO: the pass (rows, k, n, source, accumulate) whose `mm_nt` elements (flat
     * indices in mx_todo) the proof left; the others are in mx_out, its f64 sums in mx_s */
    int64_t mm_nt, mm_m, mm_k, mm_n, mm_src, mm_acc;
    /* 1: those elements are settled here (native/mpu.c's `mpu_settle`, the exact path) and
     * the pass commits without the Python; 0 (`Emulator.loop_settle` False): LP_MMTODO;
     * mm_settled counts the elements settled so */
    int64_t mm_exact, mm_settled;
    /* LP_MAP: the bytes a plan found in no region, in a core space the Python maps on first
     * touch (`PhysicalMemory._lazy_core_region`); then this code plans it again */
    int64_t map_addr, map_n;
    /* the run's bounds (`Emulator._check_limits`): instructions, cycles (-1: none), the wall
     * clock's deadline (CLOCK_MONOTONIC seconds, Python's `time.monotonic`; 0: none) */
    int64_t instr_limit, cycle_limit, check_every;
    double deadline;
    /* 0: as before the ninth round (`Emulator.loop_prologue` False, for an A/B): a module with
     * a load in flight is the Python's, no core space is mapped for this code and every
     * bounds check is the Python's (ld / st are the Python's through their kinds) */
    int64_t prologue_on;
} lstate;

int loop_init(lstate *S) {
    S->hcap = 64;
    S->hlen = 0;
    S->heap = malloc(sizeof(lhent) * S->hcap);
    S->nqueues = S->num_cores * 16;
    S->queues = calloc(S->nqueues ? S->nqueues : 1, sizeof(lfifo *));
    S->nports = S->num_cores + 1;
    S->ports = calloc(S->nports, sizeof(lport));
    S->port_order = calloc(S->nports, sizeof(int64_t));
    S->mx_w_owner = -1;
    return S->heap != NULL && S->queues != NULL && S->ports != NULL && S->port_order != NULL;
}

void loop_free(lstate *S) {
    free(S->heap);
    S->heap = NULL;
    for (int64_t i = 0; i < S->nmods; i++) {
        lmod *m = &S->mods[i];
        free(m->sb);
        free(m->w_vals);
        free(m->w_cm);
        free(m->w_v);
        m->sb = NULL, m->w_vals = NULL, m->w_cm = m->w_v = NULL;
        m->w_has = 0;
    }
    free(S->mx_a64), free(S->mx_rs), free(S->mx_u), free(S->mx_s), free(S->mx_w64);
    S->mx_w64 = NULL, S->mx_w_owner = -1;
    free(S->mx_out), free(S->mx_acc), free(S->mx_todo);
    S->mx_a64 = S->mx_rs = S->mx_u = S->mx_s = NULL;
    S->mx_out = S->mx_acc = NULL;
    S->mx_todo = NULL;
    S->mx_rows = 0;
    free(S->regions);
    S->regions = NULL;
    if (S->ports)
        for (int64_t i = 0; i < S->nports; i++) free(S->ports[i].inf);
    free(S->ports);
    S->ports = NULL;
    free(S->port_order);
    S->port_order = NULL;
    free(S->lands);
    S->lands = NULL;
    S->nland = 0;
    if (S->queues) {
        for (int64_t i = 0; i < S->nqueues; i++) {
            lfifo *qs = S->queues[i];
            if (!qs) continue;
            for (int j = 0; j < LP_QUEUES; j++) free(qs[j].buf);
            free(qs);
        }
        free(S->queues);
        S->queues = NULL;
    }
}

static inline int hless(const lhent *a, const lhent *b) {
    if (a->ready != b->ready) return a->ready < b->ready;
    if (a->version != b->version) return a->version < b->version;
    return a->idx < b->idx;
}

static int hpush(lstate *S, int64_t ready, int64_t version, int64_t idx) {
    if (S->hlen == S->hcap) {
        lhent *h = realloc(S->heap, sizeof(lhent) * S->hcap * 2);
        if (!h) return 0;
        S->heap = h;
        S->hcap *= 2;
    }
    lhent e = {ready, version, idx};
    int64_t i = S->hlen++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!hless(&e, &S->heap[p])) break;
        S->heap[i] = S->heap[p];
        i = p;
    }
    S->heap[i] = e;
    return 1;
}

static lhent hpop(lstate *S) {
    lhent top = S->heap[0], last = S->heap[--S->hlen];
    int64_t i = 0, n = S->hlen;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hless(&S->heap[c + 1], &S->heap[c])) c++;
        if (!hless(&S->heap[c], &last)) break;
        S->heap[i] = S->heap[c];
        i = c;
    }
    if (n) S->heap[i] = last;
    return top;
}

/* `Emulator._push`: a new version of module `idx`, ready at `ready`. 0: out of memory. */
int loop_push(lstate *S, int64_t idx, int64_t ready) {
    lmod *m = &S->mods[idx];
    m->version++;
    return hpush(S, ready, m->version, idx);
}

/* A module's struct at the start of a run, in one call (`Emulator._loop_module`): its
 * registers, its program's encodings and extents, core, version and MPU free time; its plan
 * is the Python's (CK_PY) until the loop makes one. */
void loop_mod_init(lstate *S, int64_t idx, int64_t *regs, int64_t n, const sins *code,
                   const int8_t *ck, const lvpu *vs, const uint32_t *rm, const int64_t *bt,
                   const int64_t *brows, int64_t core, int64_t version, int64_t mpu_free) {
    lmod *m = &S->mods[idx];
    m->regs = regs;
    m->n = n;
    m->code = code;
    m->ck = ck;
    m->vs = vs;
    m->rm = rm;
    if (bt != NULL) {
        m->bt = bt;
        m->brows = brows;
    }
    m->core = core;
    m->version = version;
    m->mpu_free = mpu_free;
    m->kind = CK_PY;
}

/* Every module's struct at the start of a run, in one call (`Emulator._loop_modules`): module
 * i as `loop_mod_init` makes it of regs + i * nregs (the Python's registers, with `table` in
 * r1 and cid[i], its core id, in r2, as `_run` sets them), n[i], code[i], ck[i], vs[i], rm[i],
 * bt[i], brows[i], core[i] (the run's constant set-up, made once per cached binary) and vm[2i],
 * vm[2i + 1] (its version and mpu_free, the Python's). */
void loop_mods_init(lstate *S, int64_t *regs, int64_t nregs, const int64_t *n,
                    const sins *const *code, const int8_t *const *ck, const lvpu *const *vs,
                    const uint32_t *const *rm, const int64_t *const *bt,
                    const int64_t *const *brows, const int64_t *core, const int64_t *cid,
                    int64_t table, const int64_t *vm) {
    for (int64_t i = 0; i < S->nmods; i++) {
        int64_t *r = regs + i * nregs;
        r[1] = table, r[2] = cid[i];
        loop_mod_init(S, i, r, n[i], code[i], ck[i], vs[i], rm[i], bt[i], brows[i], core[i],
                      vm[2 * i], vm[2 * i + 1]);
    }
}

/* `_run_native`'s first plans from module `from` on, in order: module i's fields the Python
 * keeps (`loop_put`'s nine, f[9i..9i + 8]) into its struct, then its first plan
 * (`loop_sched`). Returns at the first status but LP_DONE, its module in S->idx, else
 * LP_DONE after the last module. */
void loop_put(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
              int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
              int64_t dma_busy_until, int64_t pyonly);
int loop_sched(lstate *S, int64_t idx);

int loop_prologue(lstate *S, int64_t from, const int64_t *f) {
    for (int64_t i = from; i < S->nmods; i++) {
        const int64_t *g = f + 9 * i;
        loop_put(S, i, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8]);
        int st = loop_sched(S, i);
        if (st) {
            S->idx = i;
            return st;
        }
    }
    return LP_DONE;
}

/* Every module's final fields, LOOP_FINAL of them per module, into out (`_loop_restore`, in
 * one call): the eight `loop_put` takes, then version, mpu_free, unit_end, the VPU, DMA and MPU
 * busy cycles, nrr, w_has, w_gen. */
#define LOOP_FINAL 17
void loop_final(const lstate *S, int64_t *out) {
    for (int64_t i = 0; i < S->nmods; i++, out += LOOP_FINAL) {
        const lmod *m = &S->mods[i];
        int64_t v[LOOP_FINAL] = {m->pc,        m->time,     m->halted,   m->halt_time,
                                 m->count,     m->vpu_free, m->dma_end,  m->dma_busy_until,
                                 m->version,   m->mpu_free, m->unit_end, m->busy_vpu,
                                 m->busy_dma,  m->busy_mpu, m->nrr,      m->w_has,
                                 m->w_gen};
        memcpy(out, v, sizeof v);
    }
}

/* The written byte range of every region (recycled, lo, hi: 3 per region, in the order the
 * loop was told of them) and every port touched (index, free, busy, in-flight count n, then
 * its n in-flight ends, in the order of first use) into out, for `_loop_restore` in one call;
 * returns the number of int64 written, or minus the number needed when that is more than
 * `cap` (nothing written). */
int64_t loop_final_shared(const lstate *S, int64_t *out, int64_t cap) {
    int64_t need = 3 * S->nregions;
    for (int64_t j = 0; j < S->norder; j++) need += 4 + S->ports[S->port_order[j]].n;
    if (need > cap)
        return -need;
    int64_t k = 0;
    for (int64_t i = 0; i < S->nregions; i++) {
        const lregion *g = &S->regions[i];
        out[k++] = g->recycled;
        out[k++] = g->lo;
        out[k++] = g->hi;
    }
    for (int64_t j = 0; j < S->norder; j++) {
        int64_t i = S->port_order[j];
        const lport *p = &S->ports[i];
        out[k++] = i;
        out[k++] = p->free;
        out[k++] = p->busy;
        out[k++] = p->n;
        for (int64_t e = 0; e < p->n; e++) out[k++] = p->inf[e];
    }
    return k;
}

/* `Emulator._schedule`'s bookkeeping of a plan the Python made for module `idx` (ready at
 * `ready`, `external`: its readiness depends on others): not waiting; then waiting with a new
 * version (INF), else pushed, and waiting too if external. 0: out of memory. */
/* The fields of module `idx` that the Python keeps too, as it left them (`_put`). */
void loop_put(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
              int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
              int64_t dma_busy_until, int64_t pyonly) {
    lmod *m = &S->mods[idx];
    m->dma_busy_until = dma_busy_until;
    m->pc = pc;
    m->time = time;
    m->halted = halted;
    m->halt_time = halt_time;
    m->count = count;
    m->vpu_free = vpu_free;
    m->dma_end = dma_end;
    m->pyonly = pyonly;
}

/* `loop_put`, then `Emulator._schedule`'s bookkeeping of the plan the Python made (`loop_plan`
 * below) in the same call. */
int loop_plan(lstate *S, int64_t idx, int64_t ready, int64_t external, int64_t stable,
              int64_t queue);

int loop_put_plan(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
                  int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
                  int64_t dma_busy_until, int64_t pyonly, int64_t ready, int64_t external,
                  int64_t stable, int64_t queue) {
    loop_put(S, idx, pc, time, halted, halt_time, count, vpu_free, dma_end, dma_busy_until,
             pyonly);
    return loop_plan(S, idx, ready, external, stable, queue);
}

/* (`stable`, `queue`: the plan's, its queue key or -1, for `loop_wake`) */
int loop_plan(lstate *S, int64_t idx, int64_t ready, int64_t external, int64_t stable,
              int64_t queue) {
    lmod *m = &S->mods[idx];
    m->kind = CK_PY;
    m->ready = ready, m->stable = stable, m->queue = queue, m->pyplan = 1;
    m->waiting = 0;
    if (ready >= LP_INF) {
        m->version++;
        m->waiting = 1;
        return 1;
    }
    if (!loop_push(S, idx, ready)) return 0;
    if (external) m->waiting = 1;
    return 1;
}

/* ---- the arrival queues (`arch.dma.ArrivalQueues`): key = (core * 16 + space) * 256 + q ---- */
/* The fifo of `key`, or NULL (make: allocate it; NULL then means out of memory). */
static inline lfifo *fifo_of(const lstate *S, int64_t key, int make) {
    lfifo **qs = &S->queues[key / LP_QUEUES];
    if (!*qs) {
        if (!make) return NULL;
        *qs = calloc(LP_QUEUES, sizeof(lfifo));
        if (!*qs) return NULL;
    }
    return &(*qs)[key % LP_QUEUES];
}

int q_push(lstate *S, int64_t key, int64_t end) {
    lfifo *q = fifo_of(S, key, 1);
    if (!q) return 0;
    if (q->head + q->len == q->cap) {
        if (q->head > 0) { /* slide down before growing */
            memmove(q->buf, q->buf + q->head, sizeof(int64_t) * q->len);
            q->head = 0;
        }
        if (q->len == q->cap) {
            int64_t cap = q->cap ? 2 * q->cap : 8;
            int64_t *b = realloc(q->buf, sizeof(int64_t) * cap);
            if (!b) return 0;
            q->buf = b;
            q->cap = cap;
        }
    }
    q->buf[q->head + q->len++] = end;
    return 1;
}

/* The oldest arrival of `key` in *out; 0 when there is none. */
int q_head(const lstate *S, int64_t key, int64_t *out) {
    const lfifo *q = fifo_of(S, key, 0);
    if (!q || !q->len) return 0;
    *out = q->buf[q->head];
    return 1;
}

int64_t q_pop(lstate *S, int64_t key) {
    lfifo *q = fifo_of(S, key, 0); /* (the caller saw its head) */
    int64_t v = q->buf[q->head];
    q->head++;
    q->len--;
    if (!q->len) q->head = 0;
    return v;
}

/* ---- the scoreboard (`Module.conflict`, `Module.inflight`) ---- */
static inline int sb_overlaps(const int64_t *a, int64_t na, const int64_t *b, int64_t nb) {
    for (int64_t i = 0; i < na; i++)
        for (int64_t j = 0; j < nb; j++)
            if (a[2 * i] < b[2 * j + 1] && b[2 * j] < a[2 * i + 1]) return 1;
    return 0;
}

/* `Module.conflict`: the latest end of an entry of module `idx` still in flight at `time`
 * whose ranges conflict with nr reads then nw writes in `rg` (RAW, WAR, WAW); 0 if none. */
int64_t sb_conflict(const lstate *S, int64_t idx, int64_t time, int64_t nr, int64_t nw,
                    const int64_t *rg) {
    const lmod *m = &S->mods[idx];
    int64_t t = time;
    const int64_t *w = rg + 2 * nr;
    for (int64_t i = 0; i < m->nsb; i++) {
        const lsb *e = &m->sb[i];
        if (e->end <= t) continue;
        const int64_t *er = &e->rg[0][0], *ew = &e->rg[e->nr][0];
        if (sb_overlaps(ew, e->nw, rg, nr) || sb_overlaps(ew, e->nw, w, nw) ||
            sb_overlaps(er, e->nr, w, nw))
            t = e->end;
    }
    return t > time ? t : 0;
}

/* `sb_conflict` of one read range [r0, r1) and one write range [w0, w1) */
int64_t sb_conflict2(const lstate *S, int64_t idx, int64_t time, int64_t r0, int64_t r1,
                     int64_t w0, int64_t w1) {
    int64_t rg[4] = {r0, r1, w0, w1};
    return sb_conflict(S, idx, time, 1, 1, rg);
}

int sb_add(lstate *S, int64_t idx, int64_t end, int64_t nr, int64_t nw, const int64_t *rg);

/* `sb_add` of one read range [r0, r1) and one write range [w0, w1) */
int sb_add2(lstate *S, int64_t idx, int64_t end, int64_t r0, int64_t r1, int64_t w0,
            int64_t w1) {
    int64_t rg[4] = {r0, r1, w0, w1};
    return sb_add(S, idx, end, 1, 1, rg);
}

/* `Module.inflight.append((end, reads, writes))`; the entries that ended by the module's time
 * are dropped first when it holds more than 4 (`conflict` skips them: its time never goes
 * back). 0: out of memory or too many ranges. */
int sb_add(lstate *S, int64_t idx, int64_t end, int64_t nr, int64_t nw, const int64_t *rg) {
    lmod *m = &S->mods[idx];
    if (nr < 0 || nw < 0 || nr + nw > SB_RANGES) return 0;
    if (m->nsb > 4) {
        int64_t k = 0;
        for (int64_t i = 0; i < m->nsb; i++)
            if (m->sb[i].end > m->time) m->sb[k++] = m->sb[i];
        m->nsb = k;
    }
    if (m->nsb == m->csb) {
        int64_t c = m->csb ? 2 * m->csb : 8;
        lsb *b = realloc(m->sb, sizeof(lsb) * c);
        if (!b) return 0;
        m->sb = b;
        m->csb = c;
    }
    lsb *e = &m->sb[m->nsb++];
    e->end = end;
    e->nr = nr;
    e->nw = nw;
    memcpy(e->rg, rg, sizeof(int64_t) * 2 * (nr + nw));
    return 1;
}

/* ---- local regions (`Emulator._local_find`) ---- */
int loop_region(lstate *S, int64_t base, int64_t size, int64_t core, int64_t read_only,
                int64_t recycled, int64_t space, int64_t owner, char *ptr, int64_t sname) {
    if (S->nregions == S->cregions) {
        int64_t c = S->cregions ? 2 * S->cregions : 16;
        lregion *r = realloc(S->regions, sizeof(lregion) * c);
        if (!r) return 0;
        S->regions = r;
        S->cregions = c;
    }
    lregion *r = &S->regions[S->nregions++];
    r->base = base;
    r->size = size;
    r->core = core;
    r->read_only = read_only;
    r->recycled = recycled;
    r->lo = size;
    r->hi = 0;
    r->space = space;
    r->owner = owner;
    r->ptr = ptr;
    r->sname = sname;
    return 1;
}

/* `loop_region` of n regions in one call (`Emulator._loop_regions`, a run's start): region i's
 * fields are f[8i .. 8i + 7] (base, size, core, read_only, recycled, space, owner, sname),
 * its bytes at ptrs[i]. Returns 0 (as `loop_region`) when one could not be added. */
int loop_regions(lstate *S, int64_t n, const int64_t *f, char *const *ptrs) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t *g = f + 8 * i;
        if (!loop_region(S, g[0], g[1], g[2], g[3], g[4], g[5], g[6], ptrs[i], g[7])) return 0;
    }
    return 1;
}

/* The region that holds [addr, addr + n) (n > 0), or -1 (the Python's `memory.find` decides) */
static int64_t find_region(const lstate *S, int64_t addr, int64_t n) {
    for (int64_t i = 0; i < S->nregions; i++) {
        const lregion *r = &S->regions[i];
        int64_t end = r->base + r->size;
        if (r->base <= addr && addr < end && n <= end - addr) return i;
    }
    return -1;
}

/* `find_region`, else -1 with S->map_addr / map_n set when addr is in a core's window (the
 * Python may map its space on first touch, as its planning's `memory.find` would: LP_MAP),
 * else -2 (the Python's: a trap, a lazy region). */
static int64_t region_or_map(lstate *S, int64_t addr, int64_t n) {
    int64_t g = find_region(S, addr, n);
    if (g >= 0) return g;
    if (S->prologue_on && addr >= S->window_base && (addr - S->window_base) / S->window_size < S->num_cores) {
        S->map_addr = addr, S->map_n = n;
        return -1;
    }
    return -2;
}

/* ---- the register scoreboard (`Module.stall_on_loads`) ---- */
/* Register r is loading until `end` (`Module.reg_ready[r] = end`). */
void rr_set(lmod *m, int64_t r, int64_t end) {
    if (r <= 0 || r >= 32 || end <= 0) return; /* (r0 is never loaded; ends are > 0) */
    if (!m->rr[r]) m->nrr++;
    m->rr[r] = end;
}

/* `stall_on_loads` of an instruction naming the registers in `mask` at issue time `time`:
 * the time it may issue (the latest of `time` and their loads' ends), the loads that ended
 * by then dropped. */
int64_t rr_stall(lmod *m, int64_t time, uint32_t mask) {
    int64_t t = time;
    for (int r = 1; r < 32; r++)
        if (((mask >> r) & 1) && m->rr[r] > t) t = m->rr[r];
    for (int r = 1; r < 32; r++)
        if (m->rr[r] && m->rr[r] <= t) m->rr[r] = 0, m->nrr--;
    return t;
}

/* (the module's next instruction, at its pc) */
static inline void stall(lmod *m) {
    if (m->nrr && m->pc >= 0 && m->pc < m->n) m->time = rr_stall(m, m->time, m->rm[m->pc]);
}

/* The region of core `core`'s local space that holds [addr, addr + n), or NULL (the Python's
 * `_local_find` decides: a trap, a lazy region, one not seen yet). */
static lregion *local_region(lstate *S, int64_t core, int64_t addr, int64_t n) {
    for (int64_t i = 0; i < S->nregions; i++) {
        lregion *r = &S->regions[i];
        int64_t end = r->base + r->size;
        if (r->core == core && r->base <= addr && addr < end && n >= 0 && n <= end - addr)
            return r;
    }
    return NULL;
}

/* `arch.bounds.check` of `m`'s instruction: 1 when every bounded operand's bytes (span[f]: the
 * address and length of field f, a length <= 0: none) lie in its extent, else 0 (the Python
 * raises the fault). */
static int bounds_ok(const lstate *S, const lmod *m, const int64_t span[4][2]) {
    if (!m->bt) return 1;
    int64_t b = m->bt[m->pc];
    if (b < 0) return 1;
    const int64_t *row = m->brows + b * 17;
    for (int64_t i = 0; i < row[0]; i++) {
        const int64_t *f = row + 1 + 4 * i;
        int64_t addr = span[f[0]][0], n = span[f[0]][1], at = addr;
        if (n <= 0) continue; /* an empty access touches nothing */
        if (f[3]) at = addr < S->window_base ? -1 : (addr - S->window_base) % S->window_size;
        if (!(f[1] <= at && at + n <= f[2])) return 0;
    }
    return 1;
}

/* A VPU instruction's operands as `Emulator._vpu_plan` finds them: nr read ranges and the
 * write range in rg, each operand's pointer in p (reads, then the destination), its element
 * count; 0 when the Python is to plan it (a trap, an operand not in a known region, a count
 * the numpy reference runs). */
typedef struct {
    int64_t nr, elems;
    int64_t rg[4][2];
    char *p[4];
    lregion *dst;
} lvplan;

#define VPU_MAX_ELEMS ((int64_t)1 << 40)

static int vpu_operands(lstate *S, const lmod *m, lvplan *P) {
    const lvpu *v = &m->vs[m->pc];
    const int64_t *r = m->regs;
    int64_t src[3], nb[3], nr = 0, dst, out, sz = v->sz;
    switch (v->fmt) {
    case VF_BIN: {
        int64_t n = r[v->d], n2;
        if (n <= 0 || n > VPU_MAX_ELEMS) return 0;
        if (v->mode == BC_SCALAR) n2 = 1;
        else if (v->mode == BC_ROW) {
            if (v->period <= 0) return 0;
            n2 = (n + v->period - 1) / v->period;
        } else if (v->mode == BC_COL) {
            if (v->period <= 0) return 0;
            n2 = n < v->period ? n : v->period;
        } else n2 = n;
        src[0] = r[v->b], nb[0] = n * sz, src[1] = r[v->c], nb[1] = n2 * sz, nr = 2;
        dst = r[v->a], out = n * sz, P->elems = n;
        break;
    }
    case VF_UN:
    case VF_CVT: {
        int64_t n = r[v->c];
        if (n <= 0 || n > VPU_MAX_ELEMS) return 0;
        src[0] = r[v->b], nb[0] = n * v->ssz, nr = 1;
        dst = r[v->a], out = n * sz, P->elems = n;
        break;
    }
    case VF_FILL: {
        int64_t n = r[v->b];
        if (n <= 0 || n > VPU_MAX_ELEMS) return 0;
        dst = r[v->a], out = n * sz, P->elems = n;
        break;
    }
    case VF_2D: {
        int64_t rows = r[v->c], cols = r[v->d];
        if (rows <= 0 || cols <= 0 || rows > VPU_MAX_ELEMS || cols > VPU_MAX_ELEMS / rows)
            return 0;
        src[0] = r[v->b], nb[0] = rows * cols * sz, nr = 1;
        dst = r[v->a], out = (v->nat == NV_TRANSPOSE ? rows * cols : rows) * sz;
        P->elems = rows * cols;
        break;
    }
    default:
        return 0;
    }
    for (int64_t i = 0; i < nr; i++) {
        lregion *g = local_region(S, m->core, src[i], nb[i]);
        if (!g) return 0;
        P->p[i] = g->ptr + (src[i] - g->base);
        P->rg[i][0] = src[i];
        P->rg[i][1] = src[i] + nb[i];
    }
    lregion *g = local_region(S, m->core, dst, out);
    if (!g || g->read_only) return 0;
    P->p[nr] = g->ptr + (dst - g->base);
    P->rg[nr][0] = dst;
    P->rg[nr][1] = dst + out;
    P->nr = nr;
    P->dst = g;
    if (m->bt) { /* the fields: a the destination, b and c the sources */
        int64_t span[4][2] = {{dst, out}, {0, 0}, {0, 0}, {0, 0}};
        for (int64_t i = 0; i < nr; i++) span[1 + i][0] = src[i], span[1 + i][1] = nb[i];
        if (!bounds_ok(S, m, span)) return 0;
    }
    return 1;
}

/* Do the planned VPU instruction (`Emulator._vpu_native`); 0 when native/vpu.c did not
 * (nothing written: the Python runs it). */
static int vpu_issue(const lmod *m, const lvplan *P) {
    const lvpu *v = &m->vs[m->pc];
    const int64_t *r = m->regs;
    char *const *p = P->p;
    switch (v->nat) {
    case NV_BIN:
        return vpu_bin((int)v->c1, (int)v->c2, (int)v->mode, v->period, P->elems, p[0], p[1],
                       p[2]) == 0;
    case NV_UN: return vpu_un((int)v->c1, (int)v->c2, P->elems, p[0], p[1]) == 0;
    case NV_CVT: return vpu_cvt((int)v->c1, (int)v->c2, P->elems, p[0], p[1]) == 0;
    case NV_FILL: return vpu_fill((int)v->c1, P->elems, (uint64_t)r[v->c], p[0]) == 0;
    case NV_TRANSPOSE:
        return vpu_transpose((int)v->c1, r[v->c], r[v->d], p[0], p[1]) == 0;
    case NV_RSUM: return vpu_rsum((int)v->c1, r[v->c], r[v->d], p[0], p[1]) == 0;
    case NV_RMAX: return vpu_rmax((int)v->c1, r[v->c], r[v->d], p[0], p[1]) == 0;
    }
    return 0;
}

long loop_wake(lstate *S);

/* ---- the DMA ports (`timing.Port`) ---- */
/* Port `i` is the one the Python has: made on its first use (its place in `port_busy`). */
void port_touch(lstate *S, int64_t i) {
    lport *p = &S->ports[i];
    if (!p->touched) {
        p->touched = 1;
        S->port_order[S->norder++] = i;
    }
}

/* `Port.slot_time`: the earliest time >= t at which fewer than `maxf` transfers are in flight
 * on port `i`. */
int64_t port_slot(const lstate *S, int64_t i, int64_t t, int64_t maxf) {
    const lport *p = &S->ports[i];
    int64_t live[64], *lv = live, n = 0, out = t;
    if (p->n > 64 && !(lv = malloc(sizeof(int64_t) * p->n))) return -1;
    for (int64_t j = 0; j < p->n; j++) {
        int64_t e = p->inf[j];
        if (e <= t) continue;
        int64_t k = n++;
        while (k > 0 && lv[k - 1] > e) { /* insertion: sorted ascending */
            lv[k] = lv[k - 1];
            k--;
        }
        lv[k] = e;
    }
    if (n >= maxf) out = lv[n - maxf];
    if (lv != live) free(lv);
    return out;
}

/* `Port.admit`: drop the transfers that ended by `t`, then `end` is in flight. 0: out of
 * memory. */
int port_admit(lstate *S, int64_t i, int64_t t, int64_t end) {
    lport *p = &S->ports[i];
    int64_t k = 0;
    for (int64_t j = 0; j < p->n; j++)
        if (p->inf[j] > t) p->inf[k++] = p->inf[j];
    p->n = k;
    if (p->n == p->cap) {
        int64_t c = p->cap ? 2 * p->cap : 16;
        int64_t *b = realloc(p->inf, sizeof(int64_t) * c);
        if (!b) return 0;
        p->inf = b;
        p->cap = c;
    }
    p->inf[p->n++] = end;
    return 1;
}

/* ---- the landings (`Emulator._landings`) ---- */
static inline int lless(const lland *a, const lland *b) {
    return a->end != b->end ? a->end < b->end : a->seq < b->seq;
}

static lland *land_new(lstate *S, int64_t end, int64_t idx, int64_t pc, int64_t kind) {
    if (S->nland == S->cland) {
        int64_t c = S->cland ? 2 * S->cland : 64;
        lland *b = realloc(S->lands, sizeof(lland) * c);
        if (!b) return NULL;
        S->lands = b;
        S->cland = c;
    }
    lland e;
    memset(&e, 0, sizeof e);
    e.end = end, e.seq = ++S->land_seq, e.idx = idx, e.pc = pc, e.kind = kind;
    int64_t i = S->nland++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!lless(&e, &S->lands[p])) break;
        S->lands[i] = S->lands[p];
        i = p;
    }
    S->lands[i] = e;
    return &S->lands[i];
}

static lland land_pop(lstate *S) {
    lland top = S->lands[0], last = S->lands[--S->nland];
    int64_t i = 0, n = S->nland;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && lless(&S->lands[c + 1], &S->lands[c])) c++;
        if (!lless(&S->lands[c], &last)) break;
        S->lands[i] = S->lands[c];
        i = c;
    }
    if (n) S->lands[i] = last;
    return top;
}

/* A landing the Python does (`Emulator._landing`), ending at `end`: its seq (0: out of memory) */
int64_t land_push_py(lstate *S, int64_t end, int64_t idx, int64_t pc) {
    lland *e = land_new(S, end, idx, pc, 0);
    return e ? e->seq : 0;
}

/* The bytes of landing `e` (`Emulator._land_dma`, `_land_dma2d`): every source byte is read
 * before any is written (numpy's copies of overlapping operands), and a recycled region keeps
 * the range written. 0: out of memory. */
static int land_do(lstate *S, const lland *e) {
    lregion *g = &S->regions[e->dreg];
    if (e->kind == 1) {
        memmove(e->dp, e->sp, e->rows * e->row);
    } else if (e->dstride == e->row && e->sstride == e->row) {
        memmove(e->dp, e->sp, e->rows * e->row);
    } else {
        int overlap = e->sp < e->dp + e->dspan && e->dp < e->sp + e->sspan;
        char *tmp = NULL;
        const char *src = e->sp;
        int64_t sst = e->sstride;
        if (overlap) {
            if (!(tmp = malloc(e->rows * e->row))) return 0;
            for (int64_t i = 0; i < e->rows; i++)
                memcpy(tmp + i * e->row, e->sp + i * e->sstride, e->row);
            src = tmp, sst = e->row;
        }
        for (int64_t i = 0; i < e->rows; i++)
            memcpy(e->dp + i * e->dstride, src + i * sst, e->row);
        free(tmp);
    }
    if (g->recycled) {
        int64_t lo = e->dst - g->base, hi = lo + e->dspan;
        if (lo < g->lo) g->lo = lo;
        if (hi > g->hi) g->hi = hi;
    }
    return 1;
}

/* Land what ended by `t` in (end, seq) order up to the first landing that is the Python's,
 * which is popped and its seq returned; -1: none is due; -2: out of memory. */
int64_t land_due(lstate *S, int64_t t) {
    while (S->nland && S->lands[0].end <= t) {
        lland e = land_pop(S);
        if (e.kind == 0) return e.seq;
        if (!land_do(S, &e)) return -2;
    }
    return -1;
}

/* `land_due` for this code's issue: 1 when a landing of the Python's is due (it lands them:
 * `LP_PYEXEC`), -1 out of memory, else 0. */
static int land_here(lstate *S, int64_t t) {
    while (S->nland && S->lands[0].end <= t) {
        if (S->lands[0].kind == 0) return 1;
        lland e = land_pop(S);
        if (!land_do(S, &e)) return -1;
    }
    return 0;
}

/* The landing at heap position `i` (for the Python to read what is left) */
const lland *land_at(const lstate *S, int64_t i) { return &S->lands[i]; }

/* `Emulator._plan_dma` / `_dma2d_plan` of `m`'s DMA into m->dma, its ready time into m->ready;
 * 0 when it is the Python's: a trap (negative length, strides below the row, a notify's core
 * out of range), an empty transfer, an end in no region this code knows, in a read-only one
 * or in more than one space; -1 an end in a core space not mapped yet (LP_MAP). */
static int dma_plan(lstate *S, lmod *m, int is2d) {
    if (!S->dma_on) return 0;
    const sins *I = &m->code[m->pc];
    const int64_t *r = m->regs;
    ldma *d = &m->dma;
    d->dst = r[I->a];
    d->src = r[I->b];
    if (!is2d) {
        int64_t n = r[I->c];
        if (n <= 0) return 0;
        d->rows = 1, d->row = n, d->dstride = d->sstride = d->sspan = d->dspan = n;
    } else {
        uint64_t sh = (uint64_t)r[I->c], st = (uint64_t)r[(I->imm >> 40) & 0xFF];
        int64_t rows = (int64_t)(sh >> 32), row = (int64_t)(sh & 0xFFFFFFFFu);
        int64_t dstride = (int64_t)(st >> 32), sstride = (int64_t)(st & 0xFFFFFFFFu);
        if (rows <= 0 || row <= 0 || rows >= ((int64_t)1 << 30) || sstride < row ||
            dstride < row)
            return 0;
        d->rows = rows, d->row = row, d->dstride = dstride, d->sstride = sstride;
        d->sspan = (rows - 1) * sstride + row;
        d->dspan = (rows - 1) * dstride + row;
    }
    if (m->bt) {
        int64_t span[4][2] = {{d->dst, d->dspan}, {d->src, d->sspan}, {0, 0}, {0, 0}};
        if (!bounds_ok(S, m, span)) return 0;
    }
    /* (the source first: the Python's planning maps it first) */
    int64_t sreg = region_or_map(S, d->src, d->sspan);
    if (sreg < 0) return sreg == -1 ? -1 : 0;
    int64_t dreg = region_or_map(S, d->dst, d->dspan);
    if (dreg < 0) return dreg == -1 ? -1 : 0;
    const lregion *sg = &S->regions[sreg], *dg = &S->regions[dreg];
    if (sg->space == RS_NONE || dg->space == RS_NONE || dg->read_only) return 0;
    d->notify = -1;
    /* imm: d << 40 | present << 39 | queue << 24 | space << 16 | field << 8 | mode, where d
     * is a dma2d's stride register (`_loop_program`) */
    if ((I->imm >> 39) & 1) {
        int64_t mode = I->imm & 0xFF, field = (I->imm >> 8) & 0xFF, k;
        if (mode == 0) { /* CORE_SELF */
            if (m->core < 0) return 0;
            k = m->core;
        } else if (mode == 1) k = field;        /* CORE_STATIC */
        else if (mode == 2) k = r[field];       /* CORE_REG */
        else return 0;
        if (k < 0 || k >= S->num_cores) return 0;
        d->notify = (k * 16 + ((I->imm >> 16) & 0xFF)) * 256 + ((I->imm >> 24) & 0xFF);
    }
    d->port = dg->owner >= 0 ? dg->owner + 1 : sg->owner >= 0 ? sg->owner + 1 : m->core + 1;
    d->dram = sg->space <= RS_DRAM || dg->space <= RS_DRAM;
    d->sreg = sreg, d->dreg = dreg;
    port_touch(S, d->port);
    int64_t slot = port_slot(S, d->port, m->time, S->max_inflight);
    if (slot < 0) return 0;
    int64_t c = sb_conflict2(S, m - S->mods, m->time, d->src, d->src + d->sspan, d->dst,
                             d->dst + d->dspan);
    d->base = m->time > c ? m->time : c;
    m->ready = d->base > slot ? d->base : slot;
    return 1;
}

/* `Emulator._exec_dma` / `_exec_dma2d` of the DMA `m` planned, issued at `t`: the port's and
 * the channels' booking (`timing.DramTiming.dma`), the landing, then `_dma_booked` (the
 * scoreboard, the DMA time, the notify and its wake). 0: out of memory. */
static int dma_issue(lstate *S, lmod *m, int64_t t) {
    const ldma *d = &m->dma;
    lport *p = &S->ports[d->port];
    int64_t n = d->rows * d->row;
    int64_t pstart = t > p->free ? t : p->free;
    int64_t pdur = (n + S->port_rate - 1) / S->port_rate;
    if (pdur < 1) pdur = 1;
    p->free = pstart + pdur;
    p->busy += pdur;
    int64_t data_end = pstart + pdur, out[DRAM_MAXC];
    int nc = (int)S->nchan;
    for (int e = 0; e < 2; e++) { /* the source end, then the destination's */
        const lregion *g = &S->regions[e ? d->dreg : d->sreg];
        if (g->space != RS_SHARED) continue;
        for (int c = 0; c < nc; c++) out[c] = 0;
        int64_t a = e ? d->dst : d->src, st = e ? d->dstride : d->sstride;
        if (d->rows == 1 && st == d->row) chan_count(out, nc, S->granule, a, n);
        else chan_count_2d(out, nc, S->granule, a, d->rows, d->row, st);
        data_end = chan_book(S->chan_free, S->chan_bytes, nc, S->chan_rate, t, out, data_end);
    }
    int64_t end = data_end + (d->dram ? S->latency : 0);
    if (!port_admit(S, d->port, t, end)) return 0;
    const int is2d = m->ck[m->pc] == CK_DMA2D;
    lland *L = land_new(S, end, m - S->mods, m->pc, is2d ? 2 : 1);
    if (!L) return 0;
    const lregion *sg = &S->regions[d->sreg], *dg = &S->regions[d->dreg];
    L->dreg = d->dreg;
    L->dp = dg->ptr + (d->dst - dg->base);
    L->sp = sg->ptr + (d->src - sg->base);
    L->rows = d->rows, L->row = d->row, L->dstride = d->dstride, L->sstride = d->sstride;
    L->sspan = d->sspan, L->dspan = d->dspan, L->dst = d->dst, L->src = d->src;
    if (!sb_add2(S, m - S->mods, end, d->src, d->src + d->sspan, d->dst, d->dst + d->dspan))
        return 0;
    if (end > m->dma_end) m->dma_end = end;
    int64_t from = t > m->dma_busy_until ? t : m->dma_busy_until;
    if (end > from) m->busy_dma += end - from;
    if (end > m->dma_busy_until) m->dma_busy_until = end;
    if (d->notify >= 0) {
        if (!q_push(S, d->notify, end)) return 0;
        long w = loop_wake(S);
        if (w < 0) return 0;
        S->nwake = w;
    }
    return 1;
}

/* ---- ld / st (`Emulator._plan_ld_st`, `_execute`'s ld and st) ---- */
/* The plan of `m`'s ld (st: 0) or st (1) into m->ls_* and m->ready: 1; 0 when it is the
 * Python's (an address past 64 bits, outside its extent, in no region this code knows, in
 * one that spans more than one space, a store to a read-only one: the Python raises); -1 in
 * a core space not mapped yet (LP_MAP). */
static int ldst_plan(lstate *S, lmod *m, int st) {
    const sins *I = &m->code[m->pc];
    int64_t addr;
    if (__builtin_add_overflow(m->regs[I->b], I->imm, &addr)) return 0;
    if (m->bt) { /* (`access_spans`: 8 bytes at b + imm) */
        int64_t span[4][2] = {{0, 0}, {addr, 8}, {0, 0}, {0, 0}};
        if (!bounds_ok(S, m, span)) return 0;
    }
    int64_t g = region_or_map(S, addr, 8);
    if (g < 0) return g == -1 ? -1 : 0;
    const lregion *R = &S->regions[g];
    if (R->space == RS_NONE || (st && R->read_only)) return 0;
    m->ls_addr = addr, m->ls_reg = g, m->ls_dram = R->space <= RS_DRAM;
    int64_t rg[2] = {addr, addr + 8};
    int64_t c = sb_conflict(S, m - S->mods, m->time, st ? 0 : 1, st ? 1 : 0, rg);
    m->ready = m->time > c ? m->time : c;
    return 1;
}

/* Issue the ld / st `m` planned at `t`; returns the module's next issue time. A DRAM load
 * goes on issuing: its register is ready after the DRAM latency (`rr_set`); a DRAM store
 * holds issue for it. */
static int64_t ldst_issue(lstate *S, lmod *m, int64_t t) {
    lregion *g = &S->regions[m->ls_reg];
    char *p = g->ptr + (m->ls_addr - g->base);
    const sins *I = &m->code[m->pc];
    int64_t v;
    if (m->kind == CK_LD) {
        memcpy(&v, p, 8); /* (little endian, as `int.from_bytes(..., "little")`) */
        if (I->a) {
            m->regs[I->a] = v;
            if (m->ls_dram) rr_set(m, I->a, t + S->latency);
        }
        return t + 1;
    }
    v = m->regs[I->a];
    memcpy(p, &v, 8);
    if (g->recycled) {
        int64_t lo = m->ls_addr - g->base, hi = lo + 8;
        if (lo < g->lo) g->lo = lo;
        if (hi > g->hi) g->hi = hi;
    }
    return t + (m->ls_dram ? S->latency : 1);
}

/* ---- the MPU (`Emulator._plan_ldw` / `_plan_mm`, `_execute`'s K_LDW / K_MM) ---- */
static inline int64_t ceil_pos(int64_t a, int64_t b) {
    int64_t q = (a + b - 1) / b;
    return q < 1 ? 1 : q;
}

/* The index of the region of core `core`'s local space that holds [addr, addr + n), or -1 */
static int64_t local_index(lstate *S, int64_t core, int64_t addr, int64_t n) {
    lregion *g = local_region(S, core, addr, n);
    return g ? g - S->regions : -1;
}

/* `_plan_ldw` of `m`'s mpu.ldw into m->mpu and m->ready; 0 when it is the Python's: a trap
 * (top, a tile the MPU does not take, a source outside this core's mpu_buffer, an operand
 * outside its extent), a source in no region this code knows. */
static int ldw_plan(lstate *S, lmod *m) {
    const sins *I = &m->code[m->pc];
    const int64_t *r = m->regs;
    lmpu *P = &m->mpu;
    int64_t src = r[I->a], k = r[I->b], n = r[I->c];
    if (!(1 <= k && k <= S->mpu_tk && 1 <= n && n <= S->mpu_tn)) return 0;
    int64_t g = local_index(S, m->core, src, k * n * 2);
    if (g < 0 || S->regions[g].sname != S->mpubuf_space || ((src - S->regions[g].base) & 1))
        return 0;
    if (m->bt) { /* (`access_spans`: the tile at a) */
        int64_t span[4][2] = {{src, k * n * 2}, {0, 0}, {0, 0}, {0, 0}};
        if (!bounds_ok(S, m, span)) return 0;
    }
    P->src = src, P->k = k, P->n = n, P->sreg = g, P->nr = 1;
    P->rg[0][0] = src, P->rg[0][1] = src + k * n * 2;
    int64_t t = m->time > m->mpu_free ? m->time : m->mpu_free;
    int64_t c = sb_conflict(S, m - S->mods, m->time, 1, 0, &P->rg[0][0]);
    m->ready = t > c ? t : c;
    return 1;
}

#define MM_MAX_ROWS ((int64_t)1 << 20) /* more: the Python's (the scratch would be huge) */

/* `_plan_mm` of `m`'s mpu.mm into m->mpu and m->ready; 0 when it is the Python's: a trap
 * (top, no weight, a negative row count, an operand outside this core's local memory or its
 * extent), the
 * weight is the Python's, no rows, more than mpu_small_m rows when numpy's BLAS was not
 * found, an accumulate into bf16, an operand in no region this code knows or a read-only one. */
static int mm_plan(lstate *S, lmod *m) {
    const sins *I = &m->code[m->pc];
    const int64_t *r = m->regs;
    lmpu *P = &m->mpu;
    if (!m->w_has) return 0;
    int64_t dst = r[I->a], src = r[I->b], rows = r[I->c], k = m->w_k, n = m->w_n;
    int64_t f32 = (I->imm & MMF_F32) != 0, acc = (I->imm & MMF_ACC) != 0;
    if (rows <= 0 || rows > MM_MAX_ROWS || (acc && !f32)) return 0;
    if (rows > S->mpu_small_m && !S->dgemm64 && !S->dgemm32) return 0;
    int64_t osz = f32 ? 4 : 2;
    int64_t sg = local_index(S, m->core, src, rows * k * 2);
    int64_t dg = local_index(S, m->core, dst, rows * n * osz);
    if (sg < 0 || dg < 0 || S->regions[dg].read_only || ((src - S->regions[sg].base) & 1))
        return 0;
    if (m->bt) { /* (`access_spans`: the destination at a, the source at b) */
        int64_t span[4][2] = {{dst, rows * n * osz}, {src, rows * k * 2}, {0, 0}, {0, 0}};
        if (!bounds_ok(S, m, span)) return 0;
    }
    P->src = src, P->dst = dst, P->rows = rows, P->k = k, P->n = n, P->f32 = f32, P->acc = acc;
    P->sreg = sg, P->dreg = dg;
    /* reads: the source (and the destination of an accumulate), then the write */
    P->rg[0][0] = src, P->rg[0][1] = src + rows * k * 2;
    int64_t i = 1;
    if (acc) P->rg[i][0] = dst, P->rg[i][1] = dst + rows * n * osz, i++;
    P->nr = i;
    P->rg[i][0] = dst, P->rg[i][1] = dst + rows * n * osz;
    int64_t t = m->time > m->mpu_free ? m->time : m->mpu_free;
    int64_t c = sb_conflict(S, m - S->mods, m->time, P->nr, 1, &P->rg[0][0]);
    m->ready = t > c ? t : c;
    return 1;
}

/* The MPU's cycles from `t` (`Emulator._unit_op`): 0 out of memory. */
static int mpu_book(lstate *S, lmod *m, int64_t t, int64_t dur, int64_t nw) {
    int64_t end = t + dur;
    m->mpu_free = end;
    m->busy_mpu += dur;
    if (end > m->unit_end) m->unit_end = end;
    return sb_add(S, m - S->mods, end, m->mpu.nr, nw, &m->mpu.rg[0][0]);
}

/* The mpu.ldw `m` planned, issued at `t`: the tile and its column statistics
 * (`mpu_fast.weight`). 0: out of memory. */
static int ldw_issue(lstate *S, lmod *m, int64_t t) {
    const lmpu *P = &m->mpu;
    if (!m->w_vals) {
        m->w_vals = malloc(sizeof(uint16_t) * S->mpu_tk * S->mpu_tn);
        m->w_cm = malloc(sizeof(double) * S->mpu_tn);
        m->w_v = malloc(sizeof(double) * S->mpu_tn);
        if (!m->w_vals || !m->w_cm || !m->w_v) return 0;
    }
    const lregion *g = &S->regions[P->sreg];
    memcpy(m->w_vals, g->ptr + (P->src - g->base), P->k * P->n * 2);
    double vmax;
    m->w_finite = mpu_weight(m->w_vals, (int)P->k, (int)P->n, NULL, m->w_cm, m->w_v, &vmax);
    m->w_vmax = vmax;
    m->w_k = P->k, m->w_n = P->n, m->w_has = 1, m->w_gen++;
    return mpu_book(S, m, t, ceil_pos(P->k * P->n * 2, S->mpu_load_rate), 0);
}

typedef void (*dgemm64_fn)(int order, int ta, int tb, int64_t m, int64_t n, int64_t k,
                           double alpha, const double *a, int64_t lda, const double *b,
                           int64_t ldb, double beta, double *c, int64_t ldc);
typedef void (*dgemm32_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
                           const double *a, int lda, const double *b, int ldb, double beta,
                           double *c, int ldc);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };

/* The scratch arrays of a pass of `rows` rows. 0: out of memory. */
static int mm_scratch(lstate *S, int64_t rows) {
    if (rows <= S->mx_rows) return 1;
    int64_t cap = S->mx_rows ? S->mx_rows : 2, tk = S->mpu_tk, tn = S->mpu_tn;
    while (cap < rows) cap *= 2;
    void *p[7] = {realloc(S->mx_a64, sizeof(double) * cap * tk),
                  realloc(S->mx_rs, sizeof(double) * cap),
                  realloc(S->mx_u, sizeof(double) * cap),
                  realloc(S->mx_s, sizeof(double) * cap * tn),
                  realloc(S->mx_out, sizeof(float) * cap * tn),
                  realloc(S->mx_acc, sizeof(float) * cap * tn),
                  realloc(S->mx_todo, sizeof(long) * cap * tn)};
    /* (a failed realloc keeps its array: the ones that moved are kept either way) */
    if (p[0]) S->mx_a64 = p[0];
    if (p[1]) S->mx_rs = p[1];
    if (p[2]) S->mx_u = p[2];
    if (p[3]) S->mx_s = p[3];
    if (p[4]) S->mx_out = p[4];
    if (p[5]) S->mx_acc = p[5];
    if (p[6]) S->mx_todo = p[6];
    for (int i = 0; i < 7; i++)
        if (!p[i]) return 0;
    S->mx_rows = cap;
    return 1;
}

int mm_commit(lstate *S, int64_t idx, int64_t t);

/* The mpu.mm `m` planned, issued at `t` (`mpu_fast.matmul`: the f64 GEMM by `mpu_small` for
 * few rows, else numpy's BLAS on the tile's f64 values; the proof; the elements it leaves by
 * the exact path, `mpu_settle`; then `mm_commit`): 1 done, 0 (with mm_exact off) elements the
 * proof left to the exact path (nothing written yet: the Python settles them into mx_out and
 * commits, LP_MMTODO), -1 out of memory. */
static int mm_issue(lstate *S, lmod *m, int64_t t) {
    const lmpu *P = &m->mpu;
    int64_t M = P->rows, K = P->k, N = P->n;
    if (!mm_scratch(S, M)) return -1;
    const lregion *sg = &S->regions[P->sreg];
    lregion *dg = &S->regions[P->dreg];
    const uint16_t *a = (const uint16_t *)(sg->ptr + (P->src - sg->base));
    char *dp = dg->ptr + (P->dst - dg->base);
    mpu_rows(a, (int)M, (int)K, S->mx_a64, S->mx_rs, S->mx_u);
    if (M <= S->mpu_small_m) {
        mpu_small(S->mx_a64, (int)M, (int)K, m->w_vals, (int)N, S->mx_s);
    } else {
        int64_t idx = m - S->mods;
        if (!S->mx_w64 && !(S->mx_w64 = malloc(sizeof(double) * S->mpu_tk * S->mpu_tn)))
            return -1;
        if (S->mx_w_owner != idx || S->mx_w_gen != m->w_gen) {
            mpu_bf16_f64(m->w_vals, (long)(K * N), S->mx_w64);
            S->mx_w_owner = idx, S->mx_w_gen = m->w_gen;
        }
        const double *w64 = S->mx_w64;
        if (S->dgemm64)
            ((dgemm64_fn)S->dgemm64)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, M, N, K,
                                     1.0, S->mx_a64, K, w64, N, 0.0, S->mx_s, N);
        else
            ((dgemm32_fn)S->dgemm32)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)M,
                                     (int)N, (int)K, 1.0, S->mx_a64, (int)K, w64, (int)N, 0.0,
                                     S->mx_s, (int)N);
    }
    if (P->acc) memcpy(S->mx_acc, dp, sizeof(float) * M * N);
    long nt = mpu_finish(S->mx_s, (int)M, (int)K, (int)N, S->mx_rs, S->mx_u, m->w_cm, m->w_v,
                         m->w_vmax, P->acc ? S->mx_acc : NULL, S->mx_out, S->mx_todo);
    if (nt && S->mm_exact) {
        mpu_settle(a, (int)M, (int)K, m->w_vals, (int)N, S->mx_rs, m->w_cm, S->mx_todo, nt,
                   P->acc ? S->mx_acc : NULL, S->mx_out);
        S->mm_settled += nt;
    } else if (nt) {
        S->mm_nt = nt, S->mm_m = M, S->mm_k = K, S->mm_n = N, S->mm_src = P->src;
        S->mm_acc = P->acc;
        return 0;
    }
    return mm_commit(S, m - S->mods, t) ? 1 : -1;
}

/* The result of module `idx`'s planned mpu.mm (mx_out, complete) into its destination,
 * rounded to bf16 unless f32, and the MPU's cycles from `t`. 0: out of memory. */
int mm_commit(lstate *S, int64_t idx, int64_t t) {
    lmod *m = &S->mods[idx];
    const lmpu *P = &m->mpu;
    int64_t M = P->rows, K = P->k, N = P->n;
    lregion *dg = &S->regions[P->dreg];
    char *dp = dg->ptr + (P->dst - dg->base);
    if (P->f32) {
        memcpy(dp, S->mx_out, sizeof(float) * M * N);
    } else {
        for (int64_t i = 0; i < M * N; i++) {
            uint32_t u;
            memcpy(&u, &S->mx_out[i], 4);
            uint16_t b = f32_to_bf16(u);
            memcpy(dp + 2 * i, &b, 2);
        }
    }
    if (dg->recycled) {
        int64_t lo = P->dst - dg->base, hi = lo + M * N * (P->f32 ? 4 : 2);
        if (lo < dg->lo) dg->lo = lo;
        if (hi > dg->hi) dg->hi = hi;
    }
    S->macs += M * K * N;
    return mpu_book(S, m, t, ceil_pos(M * K * N, S->mpu_mac_rate), 1);
}

/* ---- planning and the loop ---- */
static inline int64_t qkey(const lmod *m) {
    const sins *I = &m->code[m->pc];
    return (m->core * 16 + I->a) * 256 + I->imm;
}

/* `Emulator._schedule` for an instruction this code plans (qwait, dmawait, VPU, DMA, MPU, ld,
 * st), after `stall_on_loads`; LP_SCHED when it is the Python's to plan, LP_MAP when a core
 * space is to be mapped first. */
static int sched(lstate *S, lmod *m) {
    int k = (m->pc >= 0 && m->pc < m->n) ? m->ck[m->pc] : CK_PY;
    lvplan P;
    int dma = k == CK_DMA || k == CK_DMA2D, mpu = k == CK_LDW || k == CK_MM;
    int ls = k == CK_LD || k == CK_ST, ok = 1;
    if (m->pyonly || (m->nrr && !S->prologue_on)) ok = 0; /* (at a barrier: no stall) */
    else {
        stall(m); /* (`_prepare`'s: the Python's planning stalls again, changing nothing) */
        if (!(dma || ls || k == CK_DMAWAIT ||
              ((k == CK_QWAIT || k == CK_VPU || (mpu && S->mpu_on)) && m->core >= 0)) ||
            (k == CK_VPU && !vpu_operands(S, m, &P)) || (k == CK_LDW && !ldw_plan(S, m)) ||
            (k == CK_MM && !mm_plan(S, m)))
            ok = 0;
        else if (dma)
            ok = dma_plan(S, m, k == CK_DMA2D);
        else if (ls)
            ok = ldst_plan(S, m, k == CK_ST);
    }
    if (ok <= 0) {
        S->idx = m - S->mods;
        return ok < 0 ? LP_MAP : LP_SCHED;
    }
    m->kind = k;
    m->queue = -1;
    if (dma) { /* m->ready: dma_plan's; popped, only the port's slots are planned again */
        m->external = 0;
        m->stable = 0;
    } else if (mpu || ls) { /* m->ready: ldw_plan's, mm_plan's or ldst_plan's */
        m->external = 0;
        m->stable = 1;
    } else if (k == CK_VPU) {
        int64_t t = m->time > m->vpu_free ? m->time : m->vpu_free;
        int64_t c = sb_conflict(S, m - S->mods, m->time, P.nr, 1, &P.rg[0][0]);
        m->ready = t > c ? t : c;
        m->external = 0;
        m->stable = 1;
    } else if (k == CK_DMAWAIT) {
        m->ready = m->time > m->dma_end ? m->time : m->dma_end;
        m->external = 0;
        m->stable = 1;
    } else {
        int64_t key = qkey(m), head;
        m->external = 1;
        if (q_head(S, key, &head)) {
            m->ready = m->time > head ? m->time : head;
            m->stable = 1;
        } else {
            m->ready = LP_INF;
            m->stable = 0;
            m->queue = key;
        }
    }
    m->waiting = 0;
    if (m->ready >= LP_INF) {
        m->version++;
        m->waiting = 1;
    } else {
        if (!loop_push(S, m - S->mods, m->ready)) return LP_NOMEM;
        if (m->external) m->waiting = 1;
    }
    return 0;
}

/* `Emulator._check_limits` of module `m` when no bound is crossed: the next check's count,
 * and 1; 0 when one is (the Python raises its error). */
static int limits_ok(lstate *S, const lmod *m) {
    if (!S->prologue_on || S->total > S->instr_limit) return 0;
    if (S->cycle_limit >= 0 && m->time > S->cycle_limit) return 0;
    if (S->deadline > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec > S->deadline) return 0;
    }
    int64_t next = S->total + S->check_every;
    S->limit = next < S->instr_limit ? next : S->instr_limit;
    return 1;
}

/* After an instruction of `m` retired: its scalar code, then its next plan (the reference's
 * `_run_scalars`, then `_schedule`). */
static int cont(lstate *S, lmod *m) {
    S->idx = m - S->mods;
    while (!m->halted && m->pc >= 0 && m->pc < m->n) {
        int k = m->ck[m->pc];
        if (k == CK_PURE_PY || (k == CK_SCALAR && (m->pyonly || (m->nrr && !S->prologue_on))))
            return LP_SCALARS;
        if (k != CK_SCALAR) break;
        int st;
        long pc = m->pc, budget = S->limit + 1 - S->total;
        if (m->nrr) { /* a load in flight: one instruction at a time, each stalled first */
            m->time = rr_stall(m, m->time, m->rm[m->pc]);
            budget = 1;
        }
        long done = scalar_run(m->code, m->n, m->regs, &pc, budget, (int)m->core,
                               (int)S->num_cores, S->window_base, S->window_size, &st);
        m->pc = pc;
        m->time += done;
        m->count += done;
        S->total += done;
        if (st == 1) { /* halt */
            m->halted = 1;
            m->halt_time = m->time;
        }
        if (S->total > S->limit && !limits_ok(S, m)) return LP_LIMIT;
        if (st == 3) return LP_SCALARS; /* a trap: the Python raises it */
    }
    if (m->halted) return 0;
    return sched(S, m);
}

/* `Emulator._wake` for the waiting modules whose plan this code made, and for those whose plan
 * the Python made when it needs no planning again (a stable one is pushed again, a `qwait` on
 * an empty queue moves its version); the others' indices go to wake_out for the Python (their
 * count is returned; -1: out of memory). */
long loop_wake(lstate *S) {
    long n = 0, out = 0;
    int64_t head;
    for (int64_t i = 0; i < S->nmods; i++)
        if (S->mods[i].waiting) S->wake_buf[n++] = i;
    for (long j = 0; j < n; j++) {
        lmod *m = &S->mods[S->wake_buf[j]];
        if (m->halted) continue;
        if (m->kind == CK_PY) {
            /* `_wake_py`'s two cases that need no planning, here; the rest it plans */
            if (m->pyplan) {
                if (m->ready < LP_INF) {
                    if (m->stable) {
                        if (!loop_push(S, m - S->mods, m->ready)) return -1;
                        continue;
                    }
                } else if (S->fast_wakes && m->queue >= 0 && !q_head(S, m->queue, &head)) {
                    m->version++;
                    continue;
                }
            }
            S->wake_out[out++] = S->wake_buf[j];
            continue;
        }
        if (m->ready < LP_INF) {
            if (m->stable) {
                if (!loop_push(S, m - S->mods, m->ready)) return -1;
                continue;
            }
        } else if (S->fast_wakes && m->queue >= 0 && !q_head(S, m->queue, &head)) {
            m->version++;
            continue;
        }
        if (sched(S, m) == LP_NOMEM) return -1;
    }
    return out;
}

/* `sched` of module `idx` (the first plans of a run): 0, or LP_SCHED / LP_MAP / LP_NOMEM. */
int loop_sched(lstate *S, int64_t idx) { return sched(S, &S->mods[idx]); }

/* Run the loop until the Python is needed; `after` >= 0: first continue that module (its
 * instruction retired in the Python). Returns an LP_* status; S->idx, S->t say for what. */
int loop_run(lstate *S, int64_t after) {
    if (after >= 0) {
        int st = cont(S, &S->mods[after]);
        if (st) return st;
    }
    for (;;) {
        if (!S->hlen) {
            for (int64_t i = 0; i < S->nmods; i++)
                if (!S->mods[i].halted) return LP_DEADLOCK;
            return LP_DONE;
        }
        lhent e = hpop(S);
        lmod *m = &S->mods[e.idx];
        if (e.version != m->version || m->halted) continue;
        S->idx = e.idx;
        S->t = e.ready;
        if (m->kind == CK_PY) return LP_PYPOP;
        /* a plan of this code in the heap is stable: it is the plan planning again gives;
         * a DMA's but for its port's slots (`Emulator._replan_slot`) */
        int64_t t = e.ready;
        if (m->kind == CK_DMA || m->kind == CK_DMA2D) {
            int64_t slot = port_slot(S, m->dma.port, m->time, S->max_inflight);
            if (slot < 0) return LP_NOMEM;
            m->ready = m->dma.base > slot ? m->dma.base : slot;
        }
        if (m->ready > t) {
            if (!loop_push(S, e.idx, m->ready)) return LP_NOMEM;
            continue;
        }
        m->waiting = 0;
        S->now = t;
        if (S->trace_on && t > m->time) return LP_PYEXEC;
        int due = land_here(S, t);
        if (due) return due < 0 ? LP_NOMEM : LP_PYEXEC;
        S->nwake = 0;
        int64_t next = t + 1;
        if (m->kind == CK_QWAIT) q_pop(S, qkey(m));
        else if (m->kind == CK_LD || m->kind == CK_ST) next = ldst_issue(S, m, t);
        else if (m->kind == CK_DMA || m->kind == CK_DMA2D) {
            if (!dma_issue(S, m, t)) return LP_NOMEM;
        } else if (m->kind == CK_LDW) {
            if (!ldw_issue(S, m, t)) return LP_NOMEM;
        } else if (m->kind == CK_MM) {
            int ok = mm_issue(S, m, t);
            if (ok < 0) return LP_NOMEM;
            if (!ok) return LP_MMTODO; /* the Python settles, commits and retires it */
        } else if (m->kind == CK_VPU) {
            lvplan P;
            /* the registers have not changed since it was planned: the same operands */
            if (!vpu_operands(S, m, &P) || !vpu_issue(m, &P)) return LP_PYEXEC;
            lregion *g = P.dst;
            if (g->recycled) {
                int64_t lo = P.rg[P.nr][0] - g->base, hi = P.rg[P.nr][1] - g->base;
                if (lo < g->lo) g->lo = lo;
                if (hi > g->hi) g->hi = hi;
            }
            const lvpu *v = &m->vs[m->pc];
            S->vpu_elems += P.elems;
            if (v->trans) S->vpu_trans_elems += P.elems;
            int64_t rate = v->trans ? S->vpu_trans_rate : S->vpu_lanes;
            int64_t dur = (P.elems + rate - 1) / rate, end;
            if (dur < 1) dur = 1;
            end = t + dur;
            m->vpu_free = end;
            m->busy_vpu += dur;
            if (end > m->unit_end) m->unit_end = end;
            if (!sb_add(S, e.idx, end, P.nr, 1, &P.rg[0][0])) return LP_NOMEM;
        }
        m->pc++;
        m->time = next;
        m->count++;
        S->total++;
        if (S->nwake) return LP_WAKE; /* the Python plans its waiters, then goes on */
        if (S->total > S->limit && !limits_ok(S, m)) return LP_LIMIT;
        int st = cont(S, m);
        if (st) return st;
    }
}
