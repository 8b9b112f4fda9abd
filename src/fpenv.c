/*
 * fpenv.c - the floating-point environment (spec §1.3, FACTS §1.1, §3).
 *
 * Owns the FTZ/DAZ pin: a read-modify-write of MXCSR (bit 15 FTZ, bit 6 DAZ)
 * on x86-64 with stmxcsr/ldmxcsr, and of FPCR (bit 24 FZ, FZ16 untouched)
 * on aarch64 with mrs/msr, followed by a readback.  Any other ISA is a
 * compile-time error.  The control register is per thread: every thread
 * that does decode-path arithmetic calls cis2_fpenv_pin() itself.
 *
 * The adversarial self-test passes every operand through `volatile` so the
 * compiler cannot fold the arithmetic at compile time (where FTZ does not
 * apply) and mask a broken pin.
 */
#include "cis2.h"

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
const char *cis2_isa_name(void) { return "aarch64"; }
#else
#error "CIS-2 §1.3: no FTZ/DAZ control known for this ISA; refusing to build"
#endif

int cis2_fpenv_is_pinned(void)
{
    return (read_ctl() & PIN_BITS) == PIN_BITS;
}

int cis2_fpenv_pin(cis2_error *err)
{
    write_ctl(read_ctl() | PIN_BITS); /* read-modify-write, §1.3 */
    if (!cis2_fpenv_is_pinned())
        return cis2_fail(err, CIS2_E_FPENV,
                         "FTZ/DAZ pin did not read back set (%s)", cis2_isa_name());
    return CIS2_OK;
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

int cis2_fpenv_selftest(cis2_error *err)
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
