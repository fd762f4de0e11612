/* The scheduler's event loop, compiled (issue 15, docs/architecture.md "The compiled loop").
 *
 * `Emulator._run_native` keeps in these structs what the loop needs of every module (pc, issue
 * time, halt, counts, version, its plan when the plan is one this code made, its registers:
 * the module's own `regs` array), the scheduler's heap, the waiting flags and the arrival
 * queues. `loop_run` pops the heap as `Emulator._run` does and runs what it can itself: scalar
 * code (native/scalar.c's `scalar_run`), `qwait` and `dmawait` (planning and issue). At anything
 * else it returns a status naming the module and time (`lp_status`), and the Python reference
 * does that one step on the same state: a plan Python made (`LP_PYPOP`), an instruction to plan
 * (`LP_SCHED`), scalar code it cannot run (`LP_SCALARS`: a trap, an unencodable `lsa`, a pending
 * `ld`), a bounds check (`LP_LIMIT`), an issue that needs Python (`LP_PYEXEC`: a landing is due or
 * a trace event is to be written), the end (`LP_DONE`) or a deadlock (`LP_DEADLOCK`).
 * `Emulator.native_loop = False` runs the Python loop, the reference that
 * tests/unit/targets/test_emulator_native_loop.py compares this with. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CK_PY = 0, CK_SCALAR = 1, CK_QWAIT = 2, CK_DMAWAIT = 3, CK_PURE_PY = 4, CK_VPU = 5 };
/* native/vpu.c's forms (`lvpu.nat`) and the VPU formats (`lvpu.fmt`) */
enum { NV_BIN = 1, NV_UN, NV_CVT, NV_FILL, NV_TRANSPOSE, NV_RSUM };
enum { VF_BIN = 1, VF_UN, VF_CVT, VF_FILL, VF_2D };
enum { BC_NONE = 0, BC_SCALAR, BC_ROW, BC_COL };
#define SB_RANGES 6 /* the most ranges of one scoreboard entry (reads and writes) */
enum {
    LP_DONE = 0, LP_PYPOP, LP_SCHED, LP_SCALARS, LP_LIMIT, LP_PYEXEC, LP_DEADLOCK, LP_NOMEM
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

/* A region of memory that lies wholly in one core's local space (`Emulator._local_of`), one
 * array at `ptr`; lo/hi: the bytes written here (of a recycled region, `_RecycledRegion`). */
typedef struct {
    int64_t base, size, core, read_only, recycled, lo, hi;
    char *ptr;
} lregion;

typedef struct {
    /* synced with the Python `Module` at each hand-over (`_LoopModule`) */
    int64_t pc, time, halted, halt_time, count, vpu_free, dma_end, pyonly;
    int64_t version; /* kept here only: the Python module reads it through a property */
    int64_t core;    /* -1: top */
    /* the plan, when this code made it (kind != CK_PY): ready, stable, external, queue key */
    int64_t kind, ready, stable, external, queue;
    int64_t waiting; /* the reference's `Emulator._waiting` */
    int64_t n;       /* program length */
    int64_t *regs;
    const sins *code;  /* scalar encodings; a qwait's space in `a`, its queue in `imm` */
    const int8_t *ck;  /* per pc: CK_* */
    const lvpu *vs;    /* per pc: a VPU instruction's encoding */
    lsb *sb;           /* the scoreboard, kept here only */
    int64_t nsb, csb;
    int64_t unit_end, busy_vpu; /* of the VPU instructions run here (added to the Python's) */
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
    int64_t total, limit, now, next_land, trace_on, fast_wakes;
    int64_t idx, t; /* out: the module and time a status names */
    int64_t num_cores, window_base, window_size;
    int64_t *wake_buf, *wake_out; /* nmods each */
    lregion *regions;
    int64_t nregions, cregions;
    int64_t vpu_lanes, vpu_trans_rate, vpu_elems, vpu_trans_elems;
} lstate;

int loop_init(lstate *S) {
    S->hcap = 64;
    S->hlen = 0;
    S->heap = malloc(sizeof(lhent) * S->hcap);
    S->nqueues = S->num_cores * 16;
    S->queues = calloc(S->nqueues ? S->nqueues : 1, sizeof(lfifo *));
    return S->heap != NULL && S->queues != NULL;
}

void loop_free(lstate *S) {
    free(S->heap);
    S->heap = NULL;
    for (int64_t i = 0; i < S->nmods; i++) {
        free(S->mods[i].sb);
        S->mods[i].sb = NULL;
    }
    free(S->regions);
    S->regions = NULL;
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

/* `Emulator._schedule`'s bookkeeping of a plan the Python made for module `idx` (ready at
 * `ready`, `external`: its readiness depends on others): not waiting; then waiting with a new
 * version (INF), else pushed, and waiting too if external. 0: out of memory. */
/* The fields of module `idx` that the Python keeps too, as it left them (`_put`). */
void loop_put(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
              int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
              int64_t pyonly) {
    lmod *m = &S->mods[idx];
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
int loop_plan(lstate *S, int64_t idx, int64_t ready, int64_t external);

int loop_put_plan(lstate *S, int64_t idx, int64_t pc, int64_t time, int64_t halted,
                  int64_t halt_time, int64_t count, int64_t vpu_free, int64_t dma_end,
                  int64_t pyonly, int64_t ready, int64_t external) {
    loop_put(S, idx, pc, time, halted, halt_time, count, vpu_free, dma_end, pyonly);
    return loop_plan(S, idx, ready, external);
}

int loop_plan(lstate *S, int64_t idx, int64_t ready, int64_t external) {
    lmod *m = &S->mods[idx];
    m->kind = CK_PY;
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
                int64_t recycled, char *ptr) {
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
    r->ptr = ptr;
    return 1;
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
    }
    return 0;
}

/* ---- planning and the loop ---- */
static inline int64_t qkey(const lmod *m) {
    const sins *I = &m->code[m->pc];
    return (m->core * 16 + I->a) * 256 + I->imm;
}

/* `Emulator._schedule` for an instruction this code plans (qwait, dmawait); LP_SCHED when it is
 * the Python's to plan. */
static int sched(lstate *S, lmod *m) {
    int k = (m->pc >= 0 && m->pc < m->n) ? m->ck[m->pc] : CK_PY;
    lvplan P;
    if (m->pyonly || !(k == CK_DMAWAIT || ((k == CK_QWAIT || k == CK_VPU) && m->core >= 0)) ||
        (k == CK_VPU && !vpu_operands(S, m, &P))) {
        S->idx = m - S->mods;
        return LP_SCHED;
    }
    m->kind = k;
    m->queue = -1;
    if (k == CK_VPU) {
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

/* After an instruction of `m` retired: its scalar code, then its next plan (the reference's
 * `_run_scalars`, then `_schedule`). */
static int cont(lstate *S, lmod *m) {
    S->idx = m - S->mods;
    while (!m->halted && m->pc >= 0 && m->pc < m->n) {
        int k = m->ck[m->pc];
        if (k == CK_PURE_PY || (k == CK_SCALAR && m->pyonly)) return LP_SCALARS;
        if (k != CK_SCALAR) break;
        int st;
        long pc = m->pc;
        long done = scalar_run(m->code, m->n, m->regs, &pc, S->limit + 1 - S->total,
                               (int)m->core, (int)S->num_cores, S->window_base, S->window_size,
                               &st);
        m->pc = pc;
        m->time += done;
        m->count += done;
        S->total += done;
        if (st == 1) { /* halt */
            m->halted = 1;
            m->halt_time = m->time;
        }
        if (S->total > S->limit) return LP_LIMIT;
        if (st == 3) return LP_SCALARS; /* a trap: the Python raises it */
    }
    if (m->halted) return 0;
    return sched(S, m);
}

/* `Emulator._wake` for the waiting modules whose plan this code made; the others' indices go
 * to wake_out for the Python (their count is returned; -1: out of memory). */
long loop_wake(lstate *S) {
    long n = 0, out = 0;
    int64_t head;
    for (int64_t i = 0; i < S->nmods; i++)
        if (S->mods[i].waiting) S->wake_buf[n++] = i;
    for (long j = 0; j < n; j++) {
        lmod *m = &S->mods[S->wake_buf[j]];
        if (m->halted) continue;
        if (m->kind == CK_PY) {
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

/* Run the loop until the Python is needed; `after` >= 0: first continue that module (its
 * instruction retired in the Python); next_land: the end of the first DMA whose bytes have not
 * landed (INF: none). Returns an LP_* status; S->idx, S->t say for what. */
int loop_run(lstate *S, int64_t after, int64_t next_land) {
    S->next_land = next_land;
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
        /* a plan of this code in the heap is stable: it is the plan planning again gives */
        int64_t t = e.ready;
        if (m->ready > t) {
            if (!loop_push(S, e.idx, m->ready)) return LP_NOMEM;
            continue;
        }
        m->waiting = 0;
        S->now = t;
        if (S->next_land <= t || (S->trace_on && t > m->time)) return LP_PYEXEC;
        if (m->kind == CK_QWAIT) q_pop(S, qkey(m));
        else if (m->kind == CK_VPU) {
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
        m->time = t + 1;
        m->count++;
        S->total++;
        if (S->total > S->limit) return LP_LIMIT;
        int st = cont(S, m);
        if (st) return st;
    }
}
