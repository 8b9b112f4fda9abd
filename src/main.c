/*
 * main.c - the `cis2` command line: dispatch to subcommands (cli.h).
 * Exit codes are enum cis2_status (include/cis2.h, README "Exit codes").
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cli_report(const cis2_error *err)
{
    fprintf(stderr, "cis2: %s\n", err->msg[0] ? err->msg : cis2_status_name(err->code));
    return err->code ? err->code : CIS2_E_INTERNAL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cis2 %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'cis2 help')\n");
    return CIS2_E_USAGE;
}

int cmd_selftest(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) return cli_usage_error("selftest", "takes no arguments");
    cis2_error err = {0};
    int rc = cis2_selftest(stdout, &err);
    if (rc) {
        printf("selftest=FAIL\n");
        return cli_report(&err);
    }
    return CIS2_OK;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"selftest", cmd_selftest, "FTZ/DAZ pin, adversarial probes, table digests"},
    {"tokenize", cmd_tokenize, "--tokenizer FILE [--text TEXT] [--json]: text (or stdin) -> ids"},
    {"detokenize", cmd_detokenize, "--tokenizer FILE IDS: comma-separated ids -> text"},
    {"run", cmd_run, "[--model-dir DIR] [--prompt T | --prompt-file F | --prompt-ids CSV] [--gen-toks N] [--json]"},
    {"bench", cmd_bench, "[--model-dir DIR | --shape NAME] [--gen-toks N] [--json]: speed vs memory bandwidth"},
    {"conform", cmd_conform, "[--model-dir DIR] [--all]: the §13.1 test vector (needs the real weights)"},
    {"synth", cmd_synth, "(--shape NAME | --config FILE) --seed N --out DIR [--tokenizer FILE] | --list: synthetic checkpoint"},
    {"verify", cmd_verify, "RECEIPT [--model-dir DIR]: recompute every field of a receipt"},
    {"check", cmd_check, "RECEIPT [--tokenizer F] [--config F]: check what needs no weights"},
    {"compare", cmd_compare, "A B: SAME, DIFFERENT-RUN, CONTRADICTION or WITNESS-COLLISION"},
    {"diff", cmd_diff, "TRACE_A TRACE_B: first differing tensor of two run --trace files"},
};

static void help(FILE *f)
{
    fprintf(f, "cis2 %s - canonical fp32 transformer inference (CIS-2 v%s)\n\nusage: cis2 COMMAND [options]\n\n",
            CIS2_VERSION, CIS2_SPEC_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-11s %s\n", "version", "print the version");
    fprintf(f, "\nExit codes: 0 ok, 1 mismatch, 2 usage, 3 io, 4 format, 5 unsupported,\n"
               "6 hash, 7 fpenv, 8 nondeterminism, 9 nomem, 10 internal.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) { help(stderr); return CIS2_E_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { help(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("cis2 %s (CIS-2 v%s, %s)\n", CIS2_VERSION, CIS2_SPEC_VERSION, cis2_isa_name());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            /* §1.3: pin before any decode-path arithmetic, refuse if it fails */
            cis2_error err = {0};
            if (cis2_fpenv_pin(&err) || cis2_fpenv_selftest(&err)) return cli_report(&err);
            return commands[i].fn(argc - 1, argv + 1);
        }
    fprintf(stderr, "cis2: unknown command '%s' (see 'cis2 help')\n", cmd);
    return CIS2_E_USAGE;
}
