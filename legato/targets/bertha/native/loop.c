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

enum { CK_PY = 0, CK_SCALAR = 1, CK_QWAIT = 2, CK_DMAWAIT = 3, CK_PURE_PY = 4 };
enum {
    LP_DONE = 0, LP_PYPOP, LP_SCHED, LP_SCALARS, LP_LIMIT, LP_PYEXEC, LP_DEADLOCK, LP_NOMEM
};
#define LP_INF ((int64_t)1 << 62)
#define LP_QUEUES 256 /* per (core, space): 256 queues (`arch.dma.decode_notify`) */

typedef struct {
    /* synced with the Python `Module` at each hand-over (`_LoopModule`) */
    int64_t pc, time, halted, halt_time, count, dma_end, pyonly;
    int64_t version; /* kept here only: the Python module reads it through a property */
    int64_t core;    /* -1: top */
    /* the plan, when this code made it (kind != CK_PY): ready, stable, external, queue key */
    int64_t kind, ready, stable, external, queue;
    int64_t waiting; /* the reference's `Emulator._waiting` */
    int64_t n;       /* program length */
    int64_t *regs;
    const sins *code;  /* scalar encodings; a qwait's space in `a`, its queue in `imm` */
    const int8_t *ck;  /* per pc: CK_* */
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

/* ---- planning and the loop ---- */
static inline int64_t qkey(const lmod *m) {
    const sins *I = &m->code[m->pc];
    return (m->core * 16 + I->a) * 256 + I->imm;
}

/* `Emulator._schedule` for an instruction this code plans (qwait, dmawait); LP_SCHED when it is
 * the Python's to plan. */
static int sched(lstate *S, lmod *m) {
    int k = (m->pc >= 0 && m->pc < m->n) ? m->ck[m->pc] : CK_PY;
    if (m->pyonly || !(k == CK_DMAWAIT || (k == CK_QWAIT && m->core >= 0))) {
        S->idx = m - S->mods;
        return LP_SCHED;
    }
    m->kind = k;
    m->queue = -1;
    if (k == CK_DMAWAIT) {
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
        m->pc++;
        m->time = t + 1;
        m->count++;
        S->total++;
        if (S->total > S->limit) return LP_LIMIT;
        int st = cont(S, m);
        if (st) return st;
    }
}
