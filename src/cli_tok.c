/*
 * cli_tok.c - `cis2 tokenize` and `cis2 detokenize` (placeholder until the
 * tokenizer module lands; see issue "Tokenizer").
 */
#include "cli.h"

int cmd_tokenize(int argc, char **argv)
{
    (void)argc; (void)argv;
    cis2_error e = {0};
    cis2_fail(&e, CIS2_E_UNSUPPORTED, "tokenize: not implemented yet");
    return cli_report(&e);
}

int cmd_detokenize(int argc, char **argv)
{
    (void)argc; (void)argv;
    cis2_error e = {0};
    cis2_fail(&e, CIS2_E_UNSUPPORTED, "detokenize: not implemented yet");
    return cli_report(&e);
}
