/*
 * fpenv.c - the floating-point environment (spec §1.3, FACTS §1.1, §3).
 *
 * Owns the FTZ/DAZ pin: a read-modify-write of MXCSR (bit 15 FTZ, bit 6 DAZ)
 * on x86-64 with stmxcsr/ldmxcsr, and of FPCR (bit 24 FZ, FZ16 untouched)
 * on aarch64 with mrs/msr, followed by a readback.  Any other ISA is a
 * compile-time error.  The control register is per thread: every thread
 * that does decode-path arithmetic calls cis2_fpenv_pin() itself.
 *
 * The pin is canonical, not just two bits: besides FTZ/DAZ (FZ) it selects
 * round-to-nearest-even (§1.2) and masks every exception trap, so a caller
 * that changed the rounding mode or unmasked a trap still gets the pinned
 * bits.  It remains a read-modify-write: every other bit is kept.
 *
 * API frames (api.h): every library entry point that computes saves the
 * caller's control register, pins, and restores it on return, so an
 * embedder's own arithmetic is never affected (and around callbacks into
 * the caller the caller's register is put back for the call's duration).
 * A frame is the floating-point environment and nothing else: which pool
 * and kernel a call computes with is its explicit context (kernels.h).
 * One entry point computes as Python does instead of pinned: the chat-
 * template renderer (cis2_api_enter_ieee: FTZ/DAZ off, nearest-even).
 *
 * The adversarial self-test passes every operand through `volatile` so the
 * compiler cannot fold the arithmetic at compile time (where FTZ does not
 * apply) and mask a broken pin.
 */
#include "api.h"
#include "cis2_toolkit.h" /* and cis2.h */

#include <string.h>

#if defined(__x86_64__)
#define MXCSR_DAZ (1u << 6)
#define MXCSR_FTZ (1u << 15)
static uint32_t read_ctl(void)
{
    uint32_t csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr) : : "memory");
    return csr;
}
static void write_ctl(uint32_t csr)
{
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
}
#define PIN_BITS (MXCSR_DAZ | MXCSR_FTZ)
#define CANON_SET (PIN_BITS | 0x1F80u) /* FTZ, DAZ, all six exception masks */
#define CANON_CLEAR (3u << 13)         /* rounding control 00: nearest-even */
typedef uint32_t ctl_t;
const char *cis2_isa_name(void) { return "x86-64"; }
#elif defined(__aarch64__)
#define FPCR_FZ (1ull << 24)
static uint64_t read_ctl(void)
{
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr) : : "memory");
    return fpcr;
}
static void write_ctl(uint64_t fpcr)
{
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr) : "memory");
}
#define PIN_BITS FPCR_FZ
#define CANON_SET FPCR_FZ
/* RMode 00 (nearest-even), DN and AHP off, trap enables IOE..IXE and IDE off;
 * FZ16 (bit 19) is left as it is (§1.3). */
#define CANON_CLEAR ((3ull << 22) | (1ull << 25) | (1ull << 26) | (0x9Full << 8))
typedef uint64_t ctl_t;
const char *cis2_isa_name(void) { return "aarch64"; }
#else
#error "CIS-2 §1.3: no FTZ/DAZ control known for this ISA; refusing to build"
#endif

static int ctl_pinned(ctl_t c) { return (c & CANON_SET) == CANON_SET && (c & CANON_CLEAR) == 0; }

int cis2_fpenv_is_pinned(void)
{
    return ctl_pinned(read_ctl());
}

int cis2_fpenv_pin(cis2_error *err)
{
    write_ctl((read_ctl() | CANON_SET) & ~(ctl_t)CANON_CLEAR); /* read-modify-write, §1.3 */
    if (!cis2_fpenv_is_pinned())
        return cis2_fail(err, CIS2_E_FPENV,
                         "FTZ/DAZ pin did not read back set (%s)", cis2_isa_name());
    return CIS2_OK;
}

/* ------------------------------------------------------------ API frames */

static _Thread_local cis2_frame *tls_frame; /* innermost open frame */

int cis2_api_enter(cis2_frame *f)
{
    ctl_t c = read_ctl();
    f->ctl = (uint64_t)c;
    f->prev = tls_frame;
    tls_frame = f;
    if (!ctl_pinned(c)) {
        write_ctl((c | CANON_SET) & ~(ctl_t)CANON_CLEAR);
        if (!cis2_fpenv_is_pinned()) return CIS2_E_FPENV;
    }
    return CIS2_OK;
}

void cis2_api_leave(cis2_frame *f)
{
    if (read_ctl() != (ctl_t)f->ctl) write_ctl((ctl_t)f->ctl); /* also the caller's sticky flags */
    tls_frame = f->prev;
}

uint64_t cis2_api_callout_begin(void)
{
    ctl_t now = read_ctl();
    if (tls_frame && (ctl_t)tls_frame->ctl != now) write_ctl((ctl_t)tls_frame->ctl);
    return (uint64_t)now;
}

int cis2_api_in_frame(void) { return tls_frame != NULL; }

/* The IEEE default (no FTZ/DAZ, nearest-even, traps masked): what
 * Python's float arithmetic runs under, for the chat-template renderer
 * (docs/chat.md "The environment"); left with cis2_api_leave. */
int cis2_api_enter_ieee(cis2_frame *f)
{
    ctl_t c = read_ctl();
    f->ctl = (uint64_t)c;
    f->prev = tls_frame;
    tls_frame = f;
    ctl_t want = (c | (CANON_SET & ~(ctl_t)PIN_BITS)) & ~(ctl_t)(CANON_CLEAR | PIN_BITS);
    if (c != want) write_ctl(want);
    return read_ctl() == want ? CIS2_OK : CIS2_E_FPENV;
}

#if defined(__x86_64__)
unsigned cis2_libc_round_begin(void)
{
    uint16_t cw, nearest;
    __asm__ volatile("fnstcw %0" : "=m"(cw) : : "memory");
    nearest = (uint16_t)(cw & ~0x0C00u); /* RC, bits 10-11: 00 round to nearest even */
    __asm__ volatile("fldcw %0" : : "m"(nearest) : "memory");
    return cw;
}
void cis2_libc_round_end(unsigned saved)
{
    uint16_t cw = (uint16_t)saved;
    __asm__ volatile("fldcw %0" : : "m"(cw) : "memory");
}
#else
unsigned cis2_libc_round_begin(void) { return 0; }
void cis2_libc_round_end(unsigned saved) { (void)saved; }
#endif

void cis2_api_callout_end(uint64_t pinned)
{
    if (read_ctl() != (ctl_t)pinned) write_ctl((ctl_t)pinned);
}

static float f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

enum { OP_MUL, OP_ADD };

static int probe(cis2_error *err, const char *name, int op, uint32_t a, uint32_t b,
                 uint32_t want)
{
    volatile float va = f32(a), vb = f32(b);
    volatile float r = op == OP_MUL ? va * vb : va + vb;
    uint32_t got = bits(r);
    if (got != want)
        return cis2_fail(err, CIS2_E_FPENV,
                         "FTZ/DAZ self-test %s: 0x%08X %c 0x%08X = 0x%08X, want 0x%08X",
                         name, a, op == OP_MUL ? '*' : '+', b, got, want);
    return CIS2_OK;
}

static int probes(cis2_error *err)
{
    if (!cis2_fpenv_is_pinned())
        return cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ not pinned on this thread");
    static const struct { const char *name; int op; uint32_t a, b, want; } rows[] = {
        /* §1.3 spec probe: MIN_POSITIVE * 1e-10 (cannot fail, erratum E-11) */
        {"spec MIN_POSITIVE*1e-10", OP_MUL, 0x00800000, 0x2EDBE6FF, 0x00000000},
        /* FACTS §1.1: MIN_POSITIVE * 0.5 (unpinned 0x00400000) */
        {"E-11 MIN_POSITIVE*0.5", OP_MUL, 0x00800000, 0x3F000000, 0x00000000},
        /* §1.3: smallest subnormal + 0.0 */
        {"subnormal+0", OP_ADD, 0x00000001, 0x00000000, 0x00000000},
        /* FACTS §3 denormal rows */
        {"row1", OP_MUL, 0x20000000, 0x1F800000, 0x00000000},
        {"row2", OP_MUL, 0x33800000, 0x0C000000, 0x00000000},
        {"row3", OP_ADD, 0x00800001, 0x80800000, 0x00000000},
        {"row4", OP_ADD, 0x00000001, 0x00000000, 0x00000000},
        {"row5", OP_MUL, 0x00000001, 0x3F800000, 0x00000000},
        {"row6", OP_MUL, 0x00000001, 0x7F000000, 0x00000000},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = probe(err, rows[i].name, rows[i].op, rows[i].a, rows[i].b, rows[i].want);
        if (rc) return rc;
    }
    return CIS2_OK;
}

int cis2_fpenv_selftest(cis2_error *err)
{
    cis2_frame f;
    int rc = cis2_api_enter(&f) ? cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ pin did not read back set (%s)",
                                             cis2_isa_name())
                                : probes(err);
    cis2_api_leave(&f);
    return rc;
}
