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

/* Prints "cis2: <msg>" to stderr and returns err->code. */
int cli_report(const cis2_error *err);
/* Prints a usage error and returns CIS2_E_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
