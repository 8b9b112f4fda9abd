/*
 * cli.h - the subcommands of the `cis2` program.  main.c dispatches;
 * each cmd_* lives beside the module it drives (cli_*.c).
 * Each returns a process exit code (enum cis2_status).
 */
#ifndef CIS2_CLI_H
#define CIS2_CLI_H

#include "cis2.h"

int cmd_selftest(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_conform(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_verify(int argc, char **argv);  /* cli_receipt.c */
int cmd_check(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_diff(int argc, char **argv);

/* Options shared by every command that runs a model (cli_run.c). */
#include <stddef.h>
#include <stdint.h>
struct cis2_model;
typedef struct cli_engine {
    const char *model_dir; /* default models/SmolLM2-135M */
    const char *kernel;    /* --kernel, default auto */
    int threads;           /* --threads, 0 = online CPUs */
} cli_engine;
/* If argv[*i] is an engine option, consumes it (and its value) and returns
 * 0 or a usage error code; returns -1 if it is not one. */
int cli_engine_opt(const char *cmd, int argc, char **argv, int *i, cli_engine *e);
/* Applies kernel/threads and loads the model. */
int cli_engine_start(cli_engine *e, struct cis2_model *m, cis2_error *err);
int cli_parse_size(const char *cmd, const char *opt, const char *s, size_t max, size_t *out);
int cli_parse_ids(const char *cmd, const char *csv, uint32_t **ids, size_t *n);
void cli_hex(const uint8_t d[32], char out[65]);
/* "1,2,3" (malloc'ed; NULL when out of memory). */
char *cli_ids_csv(const uint32_t *ids, size_t n);

/* `cis2 run --receipt` (cli_receipt.c).  prompt_from_ids: the prompt bytes
 * for a --prompt-ids run (the ids must round-trip decode->encode, else a
 * usage error); receipt_write: writes PATH (or PATH.IDX when np > 1). */
struct cis2_seq;
int cli_receipt_prompt_from_ids(const cis2_tokenizer *tok, const uint32_t *ids, size_t n, char **text, size_t *len,
                                cis2_error *err);
int cli_receipt_write(const char *path, size_t idx, size_t np, const struct cis2_model *m, const char *text,
                      size_t len, const struct cis2_seq *s, size_t gen, cis2_error *err);

/* Prints "cis2: <msg>" to stderr and returns err->code. */
int cli_report(const cis2_error *err);
/* Prints a usage error and returns CIS2_E_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
