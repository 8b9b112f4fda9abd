/*
 * genconfig.h - generation_config.json's published stop tokens: its
 * eos_token_id joins config.json's in the eos list stop-at-eos uses
 * (docs/sampling.md §S5.1, docs/inputs.md "generation_config.json").
 * Callers: model.c (every engine open), judge.c (cis2_check with a
 * config.json path: the file beside it).
 */
#ifndef CIS2_GENCONFIG_H
#define CIS2_GENCONFIG_H

#include <stddef.h>

#include "config.h"

/* Appends to c's eos list (config.json's, §S5.1) the ids of a
 * generation_config.json's eos_token_id (an id or a list of ids, each
 * 0..2^32-1; absent or null: none) that are not in it yet, in the file's
 * order.  Every other key is ignored.  Refused with one line naming
 * `name` (CIS2_E_FORMAT): JSON that does not parse, a root that is not an
 * object, an eos_token_id of another form, a list of more than 64, more
 * than 64 ids in all.  config.json's eos_token_id malformed: the file is
 * still checked, nothing is added (stop-at-eos stays refused). */
int cis2_genconfig_merge(cis2_config *c, const char *json, size_t len, const char *name, cis2_error *err);

/* dir/generation_config.json merged when the file exists (its absence,
 * ENOENT, leaves c as it was); unreadable, not a regular file or over
 * CIS2_CFG_MAX_FILE bytes: an error naming it. */
int cis2_genconfig_merge_dir(cis2_config *c, const char *dir, cis2_error *err);

#endif
