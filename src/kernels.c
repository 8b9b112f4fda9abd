/*
 * kernels.c - packing, dispatch and the scalar reference of the matrix
 * kernel contract (kernels.h).  PLACEHOLDER: single-threaded scalar only,
 * until the fast-kernels work lands.
 */
#include "kernels.h"
#include "pmath.h"

#include <stdlib.h>
#include <string.h>

int cis2_pmat_pack(cis2_pmat *m, cis2_wtype type, const uint8_t *src, size_t rows, size_t cols,
                   cis2_error *err)
{
    size_t es = type == CIS2_W_BF16 ? 2 : 4;
    memset(m, 0, sizeof *m);
    m->type = type; m->rows = rows; m->cols = cols;
    m->groups = (rows + CIS2_KG - 1) / CIS2_KG;
    size_t bytes = m->groups * cols * CIS2_KG * es;
    size_t alloc = (bytes + 63) / 64 * 64;
    m->data = aligned_alloc(64, alloc ? alloc : 64);
    if (!m->data) return cis2_fail(err, CIS2_E_NOMEM, "out of memory packing a %zux%zu matrix", rows, cols);
    memset(m->data, 0, alloc ? alloc : 64);
    uint8_t *d = m->data;
    for (size_t o = 0; o < rows; o++)
        for (size_t i = 0; i < cols; i++)
            memcpy(d + (((o / CIS2_KG) * cols + i) * CIS2_KG + o % CIS2_KG) * es, src + (o * cols + i) * es, es);
    return CIS2_OK;
}

void cis2_pmat_free(cis2_pmat *m) { free(m->data); m->data = NULL; }

size_t cis2_pmat_bytes(const cis2_pmat *m)
{
    return m->groups * m->cols * CIS2_KG * (m->type == CIS2_W_BF16 ? 2 : 4);
}

static float elem(const cis2_pmat *m, size_t o, size_t i)
{
    size_t k = ((o / CIS2_KG) * m->cols + i) * CIS2_KG + o % CIS2_KG;
    if (m->type == CIS2_W_BF16) return bf16_to_f32(((const uint16_t *)m->data)[k]);
    return ((const float *)m->data)[k];
}

void cis2_pmat_row(const cis2_pmat *m, size_t r, float *out)
{
    for (size_t i = 0; i < m->cols; i++) out[i] = elem(m, r, i);
}

void cis2_matmul(const cis2_pmat *w, const float *x, size_t npos, float *y)
{
    for (size_t p = 0; p < npos; p++)
        for (size_t o = 0; o < w->rows; o++) {
            float acc = 0.0f; /* §5.1 */
            for (size_t i = 0; i < w->cols; i++) {
                float prod = elem(w, o, i) * x[p * w->cols + i];
                acc = acc + prod;
            }
            y[p * w->rows + o] = acc;
        }
}

int cis2_kernel_select(const char *name, cis2_error *err)
{
    if (!strcmp(name, "auto") || !strcmp(name, "scalar")) return CIS2_OK;
    return cis2_fail(err, CIS2_E_UNSUPPORTED, "kernel '%s' not available in this build", name);
}
const char *cis2_kernel_name(void) { return "scalar"; }
int cis2_threads_set(int n, cis2_error *err) { (void)n; (void)err; return CIS2_OK; }
int cis2_threads_get(void) { return 1; }
void cis2_parallel_for(size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    for (size_t i = 0; i < n; i++) fn(ctx, i);
}
