/*
 * fuzz_jinja.c - libFuzzer target for the chat-template renderer
 * (src/jinja_*.c: cis2_jinja_parse, cis2_jinja_render; docs/chat.md).
 *
 * The input is a template, then optionally a NUL byte and a JSON object:
 * the template's variables.  Without the NUL, or when the JSON is not an
 * object, the variables are a fixed small conversation (messages with a
 * system prompt, tool calls and a tool result, tools,
 * add_generation_prompt, bos/eos tokens, enable_thinking), so that a
 * mutated template has real data to walk.
 *
 * The template is parsed once and rendered twice, under limits small
 * enough that each input takes milliseconds (docs/chat.md "Limits"):
 *   - every failure is CIS2_E_FORMAT, CIS2_E_USAGE (raise_exception) or
 *     CIS2_E_NOMEM, with a one-line non-empty message (fuzz_check_error);
 *     a syntax or render error starts "template"; a CIS2_E_NOMEM names the
 *     limit it hit (never a bare "out of memory": every allocation is
 *     bounded by max_memory, far below libFuzzer's malloc limit);
 *   - a rendered text is NUL-terminated and at most max_output bytes;
 *   - the two renders agree byte for byte, error message included (the
 *     parsed tree is immutable, and strftime_now's time is pinned);
 *   - parsing and one render together take well under a second of CPU:
 *     max_steps bounds the work, so a slow input is work the renderer does
 *     without charging it.
 */
#include "fuzz_util.h"

#include <jansson.h>
#include <time.h>

#include "jinja.h"

#define FUZZ_JINJA_CPU_S 2.0 /* 20x the steps' budget even under ASan */

static const char CONTEXT[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are terse.\"},"
    "{\"role\": \"user\", \"content\": \"What is 2+2? {{ not a tag }}\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nadd\\n</think>\\n\\n4\", \"reasoning_content\": \"add\","
    " \"tool_calls\": [{\"type\": \"function\", \"id\": \"c1\", \"function\": {\"name\": \"calc\","
    " \"arguments\": {\"expr\": \"2+2\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"4\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"caf\\u00e9 \\ud83c\\udf89\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"description\": \"math\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"expr\": {\"type\": \"string\"}},"
    " \"required\": [\"expr\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false,"
    " \"n\": 3, \"f\": 1.5, \"z\": null}";

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check_error(int rc, const cis2_error *e)
{
    fuzz_check_error(rc, e);
    if (rc == CIS2_OK || rc == CIS2_E_USAGE) return;
    if (rc != CIS2_E_FORMAT && rc != CIS2_E_NOMEM) {
        fprintf(stderr, "unexpected status %d: %s\n", rc, e->msg);
        abort();
    }
    if (strncmp(e->msg, "template", 8) != 0) {
        fprintf(stderr, "error without its 'template' prefix: %s\n", e->msg);
        abort();
    }
    if (rc == CIS2_E_NOMEM && !strstr(e->msg, "max_") && !strstr(e->msg, "nesting deeper than")) {
        fprintf(stderr, "a refusal that names no limit: %s\n", e->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *fixed;
    if (!fixed) {
        json_error_t je;
        fixed = json_loads(CONTEXT, 0, &je);
        if (!fixed) { fprintf(stderr, "fuzz_jinja: fixed context: %s\n", je.text); abort(); }
    }
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t len = nul ? (size_t)(nul - data) : size;
    json_t *own = NULL, *vars = fixed;
    if (nul) {
        json_error_t je;
        own = json_loadb((const char *)nul + 1, size - len - 1, JSON_ALLOW_NUL, &je);
        if (json_is_object(own)) vars = own;
    }

    cis2_jinja_limits lim = {0};
    lim.max_source = 1 << 16;
    lim.max_output = 1 << 16;
    lim.max_memory = 32 << 20;
    lim.max_steps = 200000;
    /* max_depth: the default, so the C stack is tested at the documented depth */

    struct tm now;
    memset(&now, 0, sizeof now);
    now.tm_year = 125, now.tm_mon = 2, now.tm_mday = 7, now.tm_hour = 14, now.tm_min = 5, now.tm_sec = 9;
    now.tm_wday = 5, now.tm_yday = 65;

    double t0 = cpu_now();
    cis2_jinja *t = NULL;
    cis2_error e = {0};
    int rc = cis2_jinja_parse(src, len, &lim, &t, &e);
    check_error(rc, &e);
    if ((rc == CIS2_OK) != (t != NULL)) abort();
    if (t) {
        char *out[2] = {NULL, NULL};
        size_t n[2] = {0, 0};
        cis2_error re[2];
        int rr[2];
        for (int k = 0; k < 2; k++) {
            memset(&re[k], 0, sizeof re[k]);
            rr[k] = cis2_jinja_render(t, vars, &now, &lim, &out[k], &n[k], &re[k]);
            check_error(rr[k], &re[k]);
            if (rr[k] == CIS2_OK) {
                if (!out[k] || out[k][n[k]] != 0 || n[k] > lim.max_output) {
                    fprintf(stderr, "render: %zu bytes over max_output %zu, or not terminated\n", n[k], lim.max_output);
                    abort();
                }
            } else if (out[k] || n[k]) {
                fprintf(stderr, "render failed (%d) but left a result\n", rr[k]);
                abort();
            }
            if (k == 0) {
                double dt = cpu_now() - t0;
                if (dt > FUZZ_JINJA_CPU_S) {
                    fprintf(stderr, "parse and render took %.2f s of CPU: work not charged to max_steps\n", dt);
                    abort();
                }
            }
        }
        if (rr[0] != rr[1] || n[0] != n[1] || (rr[0] == CIS2_OK && memcmp(out[0], out[1], n[0]) != 0) ||
            strcmp(re[0].msg, re[1].msg) != 0) {
            fprintf(stderr, "two renders differ: %d/%d, %zu/%zu bytes, [%s] [%s]\n", rr[0], rr[1], n[0], n[1], re[0].msg,
                    re[1].msg);
            abort();
        }
        free(out[0]);
        free(out[1]);
        cis2_jinja_free(t);
    }
    json_decref(own);
    return 0;
}
