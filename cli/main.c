/*
 * main.c - the `cis2` command line: dispatch to the subcommands of the
 * usage table (cli_util.c).  The program is a client of the library
 * (include/cis2.h): the library pins the floating-point environment for
 * its own work, and the §1.3 self-test runs here before any command, so a
 * broken pin is refused before anything else happens.  Exit codes are
 * enum cis2_status (README "Exit codes").
 */
#include "cli.h"

#include <string.h>

int cmd_selftest(int argc, char **argv)
{
    cli_opt opts[] = {{0}};
    int rc = cli_parse("selftest", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    cis2_error err = {0};
    if ((rc = cis2_selftest(stdout, &err))) {
        printf("selftest=FAIL\n");
        return cli_report(&err);
    }
    return cli_finish_stdout(CIS2_OK);
}

static void help(FILE *f)
{
    fprintf(f, "cis2 %s - canonical fp32 transformer inference (CIS-2 v%s)\n\nusage: cis2 COMMAND [options]"
               "   (cis2 COMMAND --help: every option)\n\n", CIS2_VERSION, CIS2_SPEC_VERSION);
    for (size_t i = 0; i < cli_ncommands; i++) fprintf(f, "  %-11s %s\n", cli_commands[i].name, cli_commands[i].synopsis);
    fprintf(f, "  %-11s %s\n", "version", "print the versions: the program's, the library's and its ABI (also --version)");
    fprintf(f, "\nExit codes: 0 ok, 1 mismatch, 2 usage, 3 io, 4 format, 5 unsupported,\n"
               "6 hash, 7 fpenv, 8 nondeterminism, 9 nomem, 10 internal, 11 cancelled.\n");
}

static void help_all(FILE *f)
{
    help(f);
    for (size_t i = 0; i < cli_ncommands; i++) fprintf(f, "\n%s", cli_commands[i].usage);
}

int main(int argc, char **argv)
{
    if (argc < 2) { help(stderr); return CIS2_E_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2 && cli_find(argv[2])) fputs(cli_find(argv[2])->usage, stdout);
        else help_all(stdout);
        return cli_finish_stdout(0);
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        /* the program's CIS2_VERSION, then what the library it runs says of itself */
        printf("cis2 %s (library %s, ABI %u, CIS-2 v%s, %s)\n", CIS2_VERSION, cis2_version(), cis2_abi_version(),
               CIS2_SPEC_VERSION, cis2_isa_name());
        return cli_finish_stdout(0);
    }
    const cli_command *c = cli_find(cmd);
    if (!c) {
        fprintf(stderr, "cis2: unknown command '%s' (see 'cis2 help')\n", cmd);
        return CIS2_E_USAGE;
    }
    cis2_error err = {0};
    if (cis2_fpenv_selftest(&err)) return cli_report(&err); /* §1.3: refuse a broken pin */
    cis2_cleanup_install(); /* interrupted: no temporary files left behind */
    return c->fn(argc - 1, argv + 1);
}
