/*
 * api_sampling.c - the public face of the sampling extension's rules
 * (include/cis2.h section 5, docs/sampling.md): the §S2.2 check and the
 * §S7.1 decision "extension run or the spec's run", each made in one
 * place (sample.c's cis2_sampling_check, session.c's rule) and offered to
 * clients here so that none of them repeats it.
 */
#include "sample.h"
#include "session.h"

#include <string.h>

int cis2_sampling_validate(const cis2_engine *e, const cis2_sampling *s, const char **param, cis2_error *err)
{
    cis2_error mine = {0};
    if (param) *param = NULL;
    int rc = cis2_sampling_check(s, cis2_engine_info(e)->vocab_size, &mine);
    if (!rc) return CIS2_OK;
    /* the check's message begins with the parameter's name (sample.c) */
    static const char *const names[] = {"temperature", "top_k", "top_p", "min_p"};
    for (size_t i = 0; param && i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(mine.msg, names[i], strlen(names[i]))) *param = names[i];
    return cis2_fail(err, rc, "%s", mine.msg);
}

int cis2_result_is_extension(const cis2_result *r)
{
    return r && r->priv && r->priv->rule.extension;
}
