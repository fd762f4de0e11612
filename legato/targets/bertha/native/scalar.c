/* The scalar ISA, compiled (issue 15): runs a module's scalar instructions (ALU, branches,
 * li/lih/lsa, nop, halt) back to back, as `emulator._scalar_code` does one at a time (that
 * Python is the reference; tests/unit/targets/test_emulator_fast_paths.py compares them).
 * The caller (`Emulator._run_native_scalars`) builds `sins` from the decoded program once, keeps
 * the issue time, counts and bounds checks, and re-runs in Python any instruction this code
 * stops at with status SC_TRAP (the Python raises the trap with its message). */
#include <stdint.h>

enum {
    SC_STOP = 0, /* not a scalar instruction: the scheduler's */
    SC_ADD, SC_SUB, SC_MUL, SC_DIV, SC_REM, SC_AND, SC_OR, SC_XOR,
    SC_SHL, SC_SHR, SC_SRA, SC_MIN, SC_MAX, SC_SLT, SC_SEQ, /* rd = rs1 op rs2 */
    SC_BEQ = 32, SC_BNE, SC_BLT, SC_BGE, SC_JMP, SC_LI, SC_LIH,
    SC_LSA_SELF, SC_LSA_STATIC, SC_LSA_REG, SC_NOP, SC_HALT,
    SC_IMM = 64, /* flag on an ALU op: the second operand is imm (the *i forms) */
};

enum { ST_OTHER = 0, ST_HALT = 1, ST_BUDGET = 2, ST_TRAP = 3 };

typedef struct {
    int32_t op, a, b, c;
    int64_t imm; /* simm (ALU, branches, li), imm32 << 32 (lih), space offset + imm (lsa) */
} sins;

static inline int64_t wrap(uint64_t v) { return (int64_t)v; }

/* Run from *pc for at most `budget` instructions; *pc is left at the next instruction (or at
 * the one that stopped the run). Returns how many ran; *status says why it stopped. `core` is
 * the running core (-1: top), the window base/size the address map's (lsa). */
long scalar_run(const sins *code, long n, int64_t *r, long *pc, long budget, int core,
                int num_cores, int64_t window_base, int64_t window_size, int *status) {
    long p = *pc, done = 0;
    int st = ST_BUDGET;
    while (done < budget) {
        if (p < 0 || p >= n) {
            st = ST_OTHER;
            break;
        }
        const sins *I = &code[p];
        int op = I->op;
        if (op == SC_STOP) {
            st = ST_OTHER;
            break;
        }
        int64_t x, y, v = 0;
        long next = p + 1;
        if (op < SC_BEQ || op >= SC_IMM) {
            x = r[I->b];
            y = op >= SC_IMM ? I->imm : r[I->c];
            switch (op & 31) {
            case SC_ADD: v = wrap((uint64_t)x + (uint64_t)y); break;
            case SC_SUB: v = wrap((uint64_t)x - (uint64_t)y); break;
            case SC_MUL: v = wrap((uint64_t)x * (uint64_t)y); break;
            case SC_DIV:
            case SC_REM:
                if (y == 0) {
                    st = ST_TRAP;
                    goto out;
                }
                if (x == INT64_MIN && y == -1) /* 2^63 wraps to -2^63; the remainder is 0 */
                    v = (op & 31) == SC_DIV ? INT64_MIN : 0;
                else /* C truncates toward zero, as isa.alu */
                    v = (op & 31) == SC_DIV ? x / y : x % y;
                break;
            case SC_AND: v = x & y; break;
            case SC_OR: v = x | y; break;
            case SC_XOR: v = x ^ y; break;
            case SC_SHL: v = wrap((uint64_t)x << (y & 63)); break;
            case SC_SHR: v = wrap((uint64_t)x >> (y & 63)); break;
            case SC_SRA: v = x >> (y & 63); break; /* gcc: arithmetic */
            case SC_MIN: v = x < y ? x : y; break;
            case SC_MAX: v = x > y ? x : y; break;
            case SC_SLT: v = x < y; break;
            case SC_SEQ: v = x == y; break;
            default: st = ST_TRAP; goto out; /* not built by the caller */
            }
            if (I->a) r[I->a] = v;
        } else {
            switch (op) {
            case SC_BEQ: if (r[I->a] == r[I->b]) next = p + I->imm; break;
            case SC_BNE: if (r[I->a] != r[I->b]) next = p + I->imm; break;
            case SC_BLT: if (r[I->a] < r[I->b]) next = p + I->imm; break;
            case SC_BGE: if (r[I->a] >= r[I->b]) next = p + I->imm; break;
            case SC_JMP: next = p + I->imm; break;
            case SC_LI: if (I->a) r[I->a] = I->imm; break;
            case SC_LIH:
                if (I->a) r[I->a] = wrap((uint64_t)I->imm | ((uint64_t)r[I->a] & 0xFFFFFFFFu));
                break;
            case SC_LSA_SELF:
            case SC_LSA_STATIC:
            case SC_LSA_REG: {
                int64_t k = op == SC_LSA_SELF ? core : op == SC_LSA_STATIC ? I->c : r[I->c];
                if (op == SC_LSA_SELF ? core < 0 : (k < 0 || k >= num_cores)) {
                    st = ST_TRAP;
                    goto out;
                }
                v = wrap((uint64_t)window_base + (uint64_t)k * (uint64_t)window_size +
                         (uint64_t)I->imm);
                if (I->a) r[I->a] = v;
                break;
            }
            case SC_NOP: break;
            case SC_HALT:
                p = next;
                done++;
                st = ST_HALT;
                goto out;
            default: st = ST_TRAP; goto out;
            }
        }
        p = next;
        done++;
    }
out:
    *pc = p;
    *status = st;
    return done;
}
