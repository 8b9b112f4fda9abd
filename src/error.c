/*
 * error.c - error reporting shared by every module.
 *
 * Functions return an enum cis2_status code and fill a cis2_error with a
 * one-line message; the CLI prints "cis2: <message>" and exits with the code
 * (README "Exit codes").  The first recorded error wins so that a low-level
 * message (naming the file and the problem) is not overwritten by callers.
 */
#include "cis2_toolkit.h" /* and cis2.h */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cis2_fail(cis2_error *err, int code, const char *fmt, ...)
{
    if (err && err->code == CIS2_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        for (char *p = err->msg; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
        err->code = code;
    }
    return code;
}

const char *cis2_status_name(int code)
{
    switch (code) {
    case CIS2_OK: return "ok";
    case CIS2_E_MISMATCH: return "mismatch";
    case CIS2_E_USAGE: return "usage";
    case CIS2_E_IO: return "io";
    case CIS2_E_FORMAT: return "format";
    case CIS2_E_UNSUPPORTED: return "unsupported";
    case CIS2_E_HASH: return "hash";
    case CIS2_E_FPENV: return "fpenv";
    case CIS2_E_NONDET: return "nondeterminism";
    case CIS2_E_NOMEM: return "nomem";
    case CIS2_E_CANCELLED: return "cancelled";
    default: return "internal";
    }
}
