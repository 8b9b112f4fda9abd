/*
 * cli.h - the `cis2` program: one client of the library (include/cis2.h
 * and include/cis2_toolkit.h, the only cis2 headers any cli_*.c file
 * includes; they compile with include/ alone, tests/build/t_cli_client.sh).  main.c dispatches to the cmd_* functions; cli_util.c holds
 * what they share: the usage texts, option parsing, the id-list grammar,
 * error reporting and output checks.  Each cmd_* returns a process exit
 * code (enum cis2_status).
 */
#ifndef CIS2_CLI_H
#define CIS2_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cis2_toolkit.h" /* and cis2.h */

int cmd_selftest(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_conform(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_verify(int argc, char **argv);
/* cli_verify_shard.c: `verify --manifest` (sharded) and `verify --merge`;
 * cmd_verify hands argv over when cli_verify_many_wanted says so. */
int cli_verify_many_wanted(int argc, char **argv);
int cmd_verify_many(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_score(int argc, char **argv); /* cli_score.c */
int cmd_serve(int argc, char **argv); /* serve_main.c */

/* ---- usage texts, kept in one place (cli_util.c) ---- */
typedef struct cli_command {
    const char *name;
    int (*fn)(int, char **);
    const char *synopsis;   /* one line for `cis2 help` */
    const char *usage;      /* `cis2 NAME --help`: every option */
} cli_command;
extern const cli_command cli_commands[];
extern const size_t cli_ncommands;
const cli_command *cli_find(const char *name);

/* ---- options ---- */
enum { OPT_FLAG, OPT_STR, OPT_SIZE, OPT_U64, OPT_MULTI };
typedef struct cli_opt {
    const char *name;       /* "--gen-toks" */
    int kind;
    void *dest;             /* int* (FLAG, set to 1), const char** (STR), size_t* (SIZE), uint64_t* (U64),
                               cli_multi* (MULTI: may be given up to max times) */
    size_t max;             /* OPT_SIZE: the largest value accepted */
    int seen;               /* set by cli_parse */
} cli_opt;
typedef struct cli_multi { const char *v[16]; size_t n; } cli_multi;
/* Parses argv[1..argc) against opts (a NULL-name-terminated array): a
 * repeated option, an unknown one, a missing or malformed value are usage
 * errors; up to pos_max positional arguments go to pos (*npos of them).
 * Entries with the same dest are one option under several names (an alias:
 * the name another surface uses, docs/receipts.md's glossary); giving two
 * of them is a usage error.  `--help`/`-h` prints the command's usage and
 * returns -1 (exit 0). */
int cli_parse(const char *cmd, int argc, char **argv, cli_opt *opts, const char **pos, size_t pos_max,
              size_t *npos);
/* 1 if the option writing to dest was given (under any of its names). */
int cli_given(const cli_opt *opts, const void *dest);

/* Engine options every model-running command takes. */
typedef struct cli_engine {
    const char *model_dir;  /* default models/SmolLM2-135M */
    const char *kernel;
    size_t threads;         /* 0: online CPUs */
    int tokenizer_ext;
    int need_tokenizer;     /* not an option: text prompts (CIS2_OPEN_NEED_TOKENIZER) */
} cli_engine;
#define CLI_ENGINE_OPTS(e)                                              \
    {"--model-dir", OPT_STR, &(e).model_dir, 0, 0},                     \
    {"--kernel", OPT_STR, &(e).kernel, 0, 0},                           \
    {"--threads", OPT_SIZE, &(e).threads, 1024, 0},                     \
    {"--tokenizer-ext", OPT_FLAG, &(e).tokenizer_ext, 0, 0}
/* Opens the engine (CIS2_E_USAGE for an empty --model-dir). */
int cli_engine_open(cli_engine *c, cis2_engine **e, cis2_error *err);
/* The engine's three input files (for output-path checks). */
void cli_engine_inputs(const cli_engine *c, char paths[3][4200]);
int cli_check_not_weights(const cli_engine *c, const char *out, cis2_error *err);

/* ---- values ---- */
/* The one id-list grammar (--prompt-ids, detokenize): decimal u32 ids
 * separated by single commas ("1,2,3": no spaces, no empty element, no
 * leading zero, no sign), or a JSON array of such integers ("[1, 2, 3]").
 * CIS2_E_USAGE naming `what` when malformed, CIS2_E_NOMEM; *ids cis2_free'd. */
int cli_parse_ids(const char *what, const char *s, uint32_t **ids, size_t *n, cis2_error *err);
/* "1,2,3" (malloc'ed; NULL when out of memory). */
char *cli_ids_csv(const uint32_t *ids, size_t n);
void cli_hex(const uint8_t d[32], char out[65]);
/* docs/sampling.md §S2.3: a decimal (optional sign, digits with an
 * optional point, an optional exponent) converted to binary32 by one
 * correctly rounded conversion; a nonzero number that rounds to 0 or to a
 * subnormal, or overflows, is refused.  CIS2_E_USAGE naming opt. */
int cli_parse_f32(const char *cmd, const char *opt, const char *s, float *out);
/* --speculate's forms checked before the model loads (run, serve) by the
 * library's own grammar (cis2_speculate_check): CIS2_OK, or the usage
 * error printed (exit 2); the draft model itself is set_speculate's to
 * check. */
int cli_speculate_check(const char *cmd, const char *spec);
/* Reads all of stdin, at most limit bytes (CIS2_E_FORMAT beyond). */
int cli_read_stdin(size_t limit, char **buf, size_t *len, cis2_error *err);
/* --prompt-file: cis2_prompts_load, except that `-` (stdin), a pipe, a
 * FIFO or a character device (/dev/stdin) is read whole first, at most
 * the 256 MiB of any prompt file (CIS2_E_FORMAT beyond); errors name path. */
int cli_prompts_load(const char *path, size_t max, cis2_prompts **out, cis2_error *err);
/* Before any work: creates the temporary file an output will be written
 * through, then removes it, so an output that cannot be created fails now
 * (CIS2_E_IO), not after the decode; access() as root or on a read-only
 * or special filesystem (sysfs) can say yes where creating fails.  A target
 * that exists and is not a regular file is written in place: not probed. */
int cli_probe_output(const char *path, cis2_error *err);

/* ---- reporting ---- */
/* Prints "cis2: <msg>" to stderr and returns err->code. */
int cli_report(const cis2_error *err);
/* Prints "cis2 CMD: <msg> (see 'cis2 CMD --help')" and returns CIS2_E_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Flushes stdout; on a write error (a full disk, a closed pipe) reports it
 * and returns CIS2_E_IO, else rc. */
int cli_finish_stdout(int rc);
/* Prints a verdict as `KEY DETAIL` lines (`KEY: DETAIL` with colon=1) and
 * `verdict: SUMMARY`. */
void cli_print_verdict(const cis2_verdict *v, int colon);

#endif
