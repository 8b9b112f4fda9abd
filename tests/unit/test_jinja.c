/*
 * test_jinja.c - the chat-template renderer (src/jinja*.c, docs/chat.md):
 *   - expected renderings worked out from the Jinja2 documentation and
 *     checked against Debian's python3-jinja2 (whitespace control,
 *     scoping, loops, macros, filters, tests, methods, Python's str()
 *     and repr(), tojson);
 *   - errors: one line with the line:column, raise_exception's own
 *     message with its own code (CIS2_E_USAGE), undefined values;
 *   - hostile templates refused within the limits, quickly: endless
 *     macro recursion, huge ranges and loops, deep nesting, output and
 *     memory explosion, a template over max_source;
 *   - a render from several threads at once of one parsed template.
 * The differential test against python3-jinja2 on the real templates is
 * tests/oracle/t_chat_templates.sh, which runs this binary as its driver:
 *     test_jinja --render TEMPLATE < CASES.jsonl
 * prints one JSON line per case: {"text": ...}, {"raise": message} or
 * {"error": message} ({"limit": message} for CIS2_E_NOMEM), strftime_now
 * pinned to 2025-03-07 14:05:09 as the oracle pins it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cis2_toolkit.h"
#include "jinja.h"

#include <fenv.h>

static struct tm pinned(void)
{
    struct tm t;
    memset(&t, 0, sizeof t);
    t.tm_year = 2025 - 1900;
    t.tm_mon = 2;
    t.tm_mday = 7;
    t.tm_hour = 14;
    t.tm_min = 5;
    t.tm_sec = 9;
    t.tm_wday = 5;
    t.tm_yday = 65;
    return t;
}

/* ------------------------------------------------------------ the driver */

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

/* path: the template of every case; NULL: each case is {"template": ...,
 * "vars": {...}} */
static int driver(const char *path)
{
    size_t n = 0;
    char *src = path ? read_all(path, &n) : NULL;
    if (path && !src) {
        fprintf(stderr, "test_jinja: cannot read %s\n", path);
        return 2;
    }
    cis2_error perr = {0};
    cis2_jinja *t = NULL;
    if (path) cis2_jinja_parse(src, n, NULL, &t, &perr);
    struct tm now = pinned();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        json_error_t je;
        json_t *vars = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je), *res = json_object();
        if (!vars) {
            fprintf(stderr, "test_jinja: bad case line: %s\n", je.text);
            return 2;
        }
        cis2_error err = {0};
        char *out = NULL;
        size_t olen = 0;
        int rc;
        if (!path) {
            json_t *tj = json_object_get(vars, "template"), *vj = json_object_get(vars, "vars");
            rc = cis2_jinja_render_string(json_string_value(tj), json_string_length(tj), vj, &now, NULL, &out, &olen, &err);
        } else {
            rc = t ? cis2_jinja_render(t, vars, &now, NULL, &out, &olen, &err) : perr.code;
            if (!t) err = perr;
        }
        if (rc == CIS2_OK) json_object_set_new(res, "text", json_stringn(out, olen));
        else json_object_set_new(res, rc == CIS2_E_USAGE ? "raise" : rc == CIS2_E_NOMEM ? "limit" : "error", json_string(err.msg));
        char *s = json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        free(s);
        free(out);
        json_decref(res);
        json_decref(vars);
    }
    free(line);
    cis2_jinja_free(t);
    free(src);
    return 0;
}

/* ---------------------------------------------------------- the helpers */

/* renders tmpl with the JSON variables vars (NULL: {}); *code its status */
static char *render_lim(const char *tmpl, const char *vars, const cis2_jinja_limits *lim, int *code, cis2_error *err)
{
    json_error_t je;
    json_t *v = json_loads(vars ? vars : "{}", 0, &je);
    assert_non_null(v);
    struct tm now = pinned();
    char *out = NULL;
    size_t n = 0;
    memset(err, 0, sizeof *err);
    *code = cis2_jinja_render_string(tmpl, strlen(tmpl), v, &now, lim, &out, &n, err);
    json_decref(v);
    if (*code == CIS2_OK) {
        assert_non_null(out);
        assert_int_equal(strlen(out), n);
    } else {
        assert_null(out);
        assert_null(strchr(err->msg, '\n'));
        assert_true(err->msg[0] != 0);
    }
    return out;
}

static void expect_vars(const char *tmpl, const char *vars, const char *want)
{
    int code;
    cis2_error err;
    char *out = render_lim(tmpl, vars, NULL, &code, &err);
    if (code != CIS2_OK) fail_msg("template %s: error %d: %s", tmpl, code, err.msg);
    if (strcmp(out, want) != 0) fail_msg("template %s\n got: [%s]\nwant: [%s]", tmpl, out, want);
    free(out);
}
static void expect(const char *tmpl, const char *want) { expect_vars(tmpl, NULL, want); }

/* the render fails with code; the message contains each of the words */
static void expect_fail(const char *tmpl, const char *vars, int code, const char *words)
{
    int got;
    cis2_error err;
    char *out = render_lim(tmpl, vars, NULL, &got, &err);
    if (got != code) fail_msg("template %s: code %d (want %d), out [%s] msg [%s]", tmpl, got, code, out ? out : "", err.msg);
    if (words && !strstr(err.msg, words)) fail_msg("template %s: message [%s] lacks [%s]", tmpl, err.msg, words);
    free(out);
}

/* ------------------------------------------------------------ the table */

/* Renderings whose expected text is python3-jinja2's in transformers'
 * environment (tests/oracle/t_chat_templates.sh checks this table against
 * it: `test_jinja --table` prints it).  vars NULL: {}. */
typedef struct { const char *name, *tmpl, *vars, *want; } rcase;
static const char *const V = "{\"xs\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": [1, 2]}, \"s\": \"hello\", \"n\": null, "
                             "\"u8\": \"h\\u00e9 \\u65e5\\ud83c\\udf89\", \"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                             "{\"role\": \"assistant\", \"content\": \"yo\"}]}";
static const rcase TABLE[] = {
    /* whitespace: trim_blocks, lstrip_blocks, '-' and '+' (Whitespace Control) */
    {"trim and lstrip", "a\n  {% if true %}\n  x\n  {% endif %}\nb", NULL, "a\n  x\nb"},
    {"one trailing newline dropped", "x\n\n", NULL, "x\n"},
    {"crlf normalised", "a\r\nb\r{% if true %}\r\nc{% endif %}", NULL, "a\nb\nc"},
    {"dash strips unicode whitespace", "a \xe3\x80\x80\n {{- 'b' -}} \n c", NULL, "abc"},
    {"plus keeps", "a  {%+ if true %}x{% endif +%}\ny", NULL, "a  x\ny"},
    {"comment lstrip and trim", "a {# c #}\nb\n  {# c2 #}\nc", NULL, "a b\nc"},
    {"print tag is not lstripped", "  {{ 1 }}  {% if true %}x{% endif %}", NULL, "  1  x"},
    {"tab before newline not trimmed", "{% if true %}\t\nx{% endif %}", NULL, "\t\nx"},
    {"raw", "  {% raw %}{{ x }}{% endraw %}\nz", NULL, "{{ x }}z"},
    /* literals and operators (Expressions, Literals, Math, Comparisons, Logic) */
    {"string escapes", "{{ 'a\\nb\\x41\\u00e9\\101\\z' }}", NULL, "a\nbA\xc3\xa9" "A\\z"},
    {"arithmetic", "{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 }}", NULL,
     "3.5 3 -4 2 1024 64 7"},
    {"floats as python", "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ -0.0 }} {{ 2.5 // 1 }} {{ -7.5 % 2 }}", NULL,
     "1.0 0.30000000000000004 1e+16 1000000000000000.0 1e-05 -0.0 2.0 0.5"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ xs ~ nothing }}", V, "a1NoneTrue1.5[1, 2, 3]"},
    {"and or return operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }}", NULL, "x b []"},
    {"chained comparison", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1] == (1,) }} {{ 1 == 1.0 }}", NULL, "True False False True"},
    {"in", "{{ 2 in xs }} {{ 'ell' in s }} {{ 'a' in d }} {{ 'q' in nothing }} {{ 5 not in xs }}", V, "True True True False True"},
    {"inline if without else", "[{{ 'y' if n }}]{{ 'y' if s else 'n' }}", V, "[]y"},
    {"python str of values", "{{ none }} {{ [1, 'a', none, true, 1.5] }} {{ {'k': (1,)} }} {{ ('x', \"it's\") }}", NULL,
     "None [1, 'a', None, True, 1.5] {'k': (1,)} ('x', \"it's\")"},
    {"repr escapes", "{{ ['\\n\\t\\x01', '\\xa0\\u2028', 'caf\\u00e9'] }}", NULL, "['\\n\\t\\x01', '\\xa0\\u2028', 'caf\xc3\xa9']"},
    /* access, undefined, slicing */
    {"attributes and items", "{{ d.a }}{{ d['b'][1] }}{{ d.b.0 }}{{ xs[-1] }}{{ s[1] }}{{ u8[1] }}", V, "1213e\xc3\xa9"},
    {"missing is empty", "[{{ d.zz }}][{{ xs[9] }}][{{ nothing }}][{{ n.x }}]", V, "[][][][]"},
    {"undefined tests", "{{ nothing is defined }}{{ nothing is undefined }}{{ d.zz is defined }}{{ nothing | length }}", V,
     "FalseTrueFalse0"},
    {"slices", "{{ xs[1:] }}{{ xs[::-1] }}{{ s[1:3] }}{{ u8[::-1] }}{{ xs[5:] }}", V,
     "[2, 3][3, 2, 1]el\xf0\x9f\x8e\x89\xe6\x97\xa5 \xc3\xa9h[]"},
    /* loops and scoping (For, Assignments, Scoping Behavior) */
    {"loop object", "{% for x in xs %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
                    "[{{ loop.previtem }}]{% endfor %}", V, "12TrueFalse3[]21FalseFalse3[1]30FalseTrue3[2]"},
    {"loop filter and else", "{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}|{% for x in [] %}{% else %}E{% endfor %}",
     V, "2232|E"},
    {"break continue", "{% for x in range(9) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 5 %}{% break %}{% endif %}"
                       "{{ x }}{% endfor %}", NULL, "024"},
    {"loop scope is fresh each turn", "{% set x = 0 %}{% for i in xs %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", V, "[0][0][0]0"},
    {"if shares scope", "{% if true %}{% set z = 1 %}{% endif %}{{ z }}", NULL, "1"},
    {"namespace", "{% set ns = namespace(t=0) %}{% for x in xs %}{% set ns.t = ns.t + x %}{% endfor %}{{ ns.t }}", V, "6"},
    {"dict items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}", V,
     "a=1;b=[1, 2];ab"},
    {"macro defaults and kwargs", "{% macro m(a, b=a ~ '!') %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(1) }}{{ m(b=2, a=3) }}", NULL,
     "<1|1!><3|2>"},
    {"macro sees globals at call time", "{% macro m() %}{{ t }}{% endmacro %}{% set t = 5 %}{{ m() }}{% set t = 6 %}{{ m() }}", NULL,
     "56"},
    {"call block", "{% macro w() %}<{{ caller('x') }}>{% endmacro %}{% call(v) w() %}[{{ v }}]{% endcall %}", NULL, "<[x]>"},
    {"block set and filter block", "{% set b | upper %}x{{ s }}{% endset %}{{ b }}{% filter title %}ab cd{% endfilter %}", V,
     "XHELLOAb Cd"},
    {"generation block", "{% generation %}g{{ 1 }}{% endgeneration %}", NULL, "g1"},
    /* filters and tests (List of Builtin Filters / Tests) */
    {"string filters", "{{ '  a  ' | trim }}|{{ s | upper }}|{{ s | capitalize }}|{{ 'a-b c' | title }}|{{ s | replace('l', 'L') }}",
     V, "a|HELLO|Hello|A-B C|heLLo"},
    {"sequence filters", "{{ xs | join(',') }}{{ xs | first }}{{ xs | last }}{{ xs | length }}{{ xs | reverse | list }}"
                         "{{ ['b', 'A', 'c'] | sort }}{{ ['a', 'A'] | unique | list }}", V, "1,2,3133[3, 2, 1]['A', 'b', 'c']['a']"},
    {"selectattr map", "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", V, "['hi']"},
    {"generators are true", "{% if [] | select %}T{% endif %}{{ xs | select('odd') | list }}", V, "T[1, 3]"},
    {"default", "{{ nothing | default('d') }}{{ n | default('d') }}{{ '' | d('e', true) }}", V, "dNonee"},
    {"int float string round", "{{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.5' | float }} {{ 2.5 | round }} {{ 2.675 | round(2) }}", NULL,
     "43 0 3.5 2.0 2.67"},
    {"tojson", "{{ d | tojson }} {{ {'\xc3\xa9': 'x\\ny'} | tojson }} {{ '\xc3\xa9' | tojson(ensure_ascii=true) }}", V,
     "{\"a\": 1, \"b\": [1, 2]} {\"\xc3\xa9\": \"x\\ny\"} \"\\u00e9\""},
    {"tojson indent", "{{ d | tojson(indent=2) }}", V, "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ]\n}"},
    {"indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}", NULL, "a\n  b\n\n  c"},
    {"tests", "{{ s is string }}{{ d is mapping }}{{ xs is sequence }}{{ 1 is number }}{{ true is integer }}{{ n is none }}"
              "{{ 4 is divisibleby 2 }}{{ 'a' is in 'abc' }}{{ false is false }}{{ 0 is false }}", V,
     "TrueTrueTrueTrueFalseTrueTrueTrueTrueFalse"},
    {"escape and safe", "{{ '<a>&' | e }}{{ ('<b>' | safe) + '<i>' }}", NULL, "&lt;a&gt;&amp;<b>&lt;i&gt;"},
    /* case maps of the titlecase digraphs (Lt: neither upper nor lower; capitalize and str.title
     * give the titlecase form, the title filter and upper the uppercase one) */
    {"titlecase digraphs", "{{ s.swapcase() }}|{{ s.isupper() }}|{{ s.islower() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ s | capitalize }}|{{ s is upper }}|{{ s is lower }}|{{ s | title }}|{{ s.upper() }}|{{ t.swapcase() }}|{{ t.capitalize() }}",
     "{\"s\": \"\\u01c5a \\u01c6x \\u01c4\", \"t\": \"\\u01c8\\u01f3 \\u01cb\"}",
     "\xc7\x85" "A \xc7\x84X \xc7\x86|False|False|\xc7\x85" "a \xc7\x85x \xc7\x85|\xc7\x85" "a \xc7\x86x \xc7\x86|\xc7\x85" "a \xc7\x86x \xc7\x86|False|False|\xc7\x84" "a \xc7\x84x \xc7\x84|\xc7\x84" "A \xc7\x84X \xc7\x84|\xc7\x88\xc7\xb1 \xc7\x8b|\xc7\x88\xc7\xb3 \xc7\x8c"},
    /* methods of str and dict */
    {"str methods", "{{ s.upper() }} {{ s.startswith('he') }} {{ ' x '.strip() }} {{ 'a,b'.split(',') }} {{ s.replace('l', '', 1) }} "
                    "{{ s.find('l') }} {{ '-'.join(['a', 'b']) }}", V, "HELLO True x ['a', 'b'] helo 2 a-b"},
    {"qwen3 think split", "{% set c = '<think>\\nr\\n</think>\\n\\nans' %}[{{ c.split('</think>')[-1].lstrip('\\n') }}]"
                          "[{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}]", NULL, "[ans][r]"},
    {"dict get", "{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 7) }}", V, "1None7"},
    /* globals */
    {"range dict", "{{ range(3) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1) }}", NULL, "[0, 1, 2][5, 3, 1]{'a': 1}"},
    {"strftime_now pinned", "{{ strftime_now('%Y-%m-%d %d %B %Y %b %a') }}", NULL, "2025-03-07 07 March 2025 Mar Fri"},
};

static int dump_table(void)
{
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++) {
        json_error_t je;
        json_t *vars = json_loads(TABLE[i].vars ? TABLE[i].vars : "{}", 0, &je);
        json_t *o = json_pack("{s:s, s:s, s:o, s:s}", "_case", TABLE[i].name, "template", TABLE[i].tmpl, "vars", vars, "want",
                              TABLE[i].want);
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    }
    return 0;
}

/* ------------------------------------------------------------ the tests */

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++) expect_vars(TABLE[i].tmpl, TABLE[i].vars, TABLE[i].want);
}

/* syntax and runtime errors: CIS2_E_FORMAT, one line naming line:column */
static void test_errors(void **state)
{
    (void)state;
    expect_fail("{% if true %}x", NULL, CIS2_E_FORMAT, "template line 1:15: unexpected end of template: 'if' at line 1:4");
    expect_fail("a\n{{ x | nope }}", NULL, CIS2_E_FORMAT, "template line 2:8: no filter named 'nope'");
    expect_fail("{{ x is nope }}", NULL, CIS2_E_FORMAT, "no test named 'nope'");
    expect_fail("{{ 1 + }}", NULL, CIS2_E_FORMAT, "template line 1:8: unexpected end of print statement");
    expect_fail("{% frob %}", NULL, CIS2_E_FORMAT, "unknown or misplaced tag 'frob'");
    expect_fail("{% include 'x' %}", NULL, CIS2_E_FORMAT, "'include' is not supported");
    expect_fail("{% for x in xs recursive %}{% endfor %}", NULL, CIS2_E_FORMAT, "recursive for loops are not supported");
    expect_fail("{% break %}", NULL, CIS2_E_FORMAT, "'break' outside of a for loop");
    expect_fail("a {# open", NULL, CIS2_E_FORMAT, "comment is not closed");
    expect_fail("{{ 'open }}", NULL, CIS2_E_FORMAT, "unterminated string literal");
    expect_fail("{{ '\\N{BULLET}' }}", NULL, CIS2_E_FORMAT, "\\N{...} escapes are not supported");
    expect_fail("{{ 99999999999999999999 }}", NULL, CIS2_E_FORMAT, "integer literal out of range");
    expect_fail("ok\xff", NULL, CIS2_E_FORMAT, "template line 1:3: the template is not valid UTF-8");
    /* runtime: the construct's position */
    expect_fail("line\n  {{ 1 + 'a' }}", NULL, CIS2_E_FORMAT, "template line 2:8: unsupported operand type(s) for +: 'int' and 'str'");
    expect_fail("{{ nothing.x }}", NULL, CIS2_E_FORMAT, "template line 1:11: 'nothing' is undefined");
    expect_fail("{{ s.nope() }}", "{\"s\": \"x\"}", CIS2_E_FORMAT, "'str object' has no attribute 'nope'");
    expect_fail("{{ xs.append(1) }}", "{\"xs\": []}", CIS2_E_FORMAT, "access to attribute 'append' of 'list' object is unsafe.");
    expect_fail("{{ 1 / 0 }}", NULL, CIS2_E_FORMAT, "division by zero");
    expect_fail("{{ 1 < 'a' }}", NULL, CIS2_E_FORMAT, "'<' not supported between instances of 'int' and 'str'");
    expect_fail("{% set x = 1 %}{% set x.y = 2 %}", NULL, CIS2_E_FORMAT, "cannot assign attribute on non-namespace object");
    expect_fail("{% for a, b in [1] %}{% endfor %}", NULL, CIS2_E_FORMAT, "cannot unpack non-iterable int object");
    expect_fail("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, CIS2_E_FORMAT, "macro 'm' takes not more than 1 argument(s)");
    expect_fail("{{ range(100001) | length }}", NULL, CIS2_E_FORMAT, "Range too big");
    expect_fail("{{ 9223372036854775807 + 1 }}", NULL, CIS2_E_FORMAT, "integer overflow");
    expect_fail("{{ 2.0 ** 0.5 }}", NULL, CIS2_E_FORMAT, "powers of floats are not supported");
    expect_fail("{{ d | tojson }}", "{\"d\": {\"x\": 1}}", CIS2_OK, NULL);
    expect_fail("{{ nothing | tojson }}", NULL, CIS2_E_FORMAT, "Object of type Undefined is not JSON serializable");
}

/* raise_exception: CIS2_E_USAGE with the template's message itself */
static void test_raise(void **state)
{
    (void)state;
    int code;
    cis2_error err;
    char *out = render_lim("{% if messages | length == 0 %}{{ raise_exception('No messages provided.') }}{% endif %}x",
                           "{\"messages\": []}", NULL, &code, &err);
    assert_int_equal(code, CIS2_E_USAGE);
    assert_string_equal(err.msg, "No messages provided.");
    assert_null(out);
    /* from inside a macro, inside a loop; newlines become spaces */
    render_lim("{% macro m(x) %}{{ raise_exception('bad\\nrole: ' ~ x) }}{% endmacro %}{% for r in ['a'] %}{{ m(r) }}{% endfor %}",
               NULL, NULL, &code, &err);
    assert_int_equal(code, CIS2_E_USAGE);
    assert_string_equal(err.msg, "bad role: a");
    /* a long message is cut at a character boundary */
    render_lim("{{ raise_exception('\xc3\xa9' * 600) }}", NULL, NULL, &code, &err);
    assert_int_equal(code, CIS2_E_USAGE);
    assert_int_equal(strlen(err.msg), 510);
    assert_int_equal(memcmp(err.msg, "\xc3\xa9\xc3\xa9", 4), 0);
}

/* the API's edges: variables not an object, NUL in data, the clock */
static void test_api(void **state)
{
    (void)state;
    cis2_error err = {0};
    char *out = (char *)1;
    size_t n;
    json_t *arr = json_array();
    assert_int_equal(cis2_jinja_render_string("x", 1, arr, NULL, NULL, &out, &n, &err), CIS2_E_INTERNAL);
    assert_null(out);
    json_decref(arr);
    json_t *v = json_pack("{s:s%}", "s", "a\0b", (size_t)3);
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_jinja_render_string("[{{ s }}]", 9, v, NULL, NULL, &out, &n, &err), CIS2_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "[a\0b]", 5);
    free(out);
    /* now NULL: the local time; a year of four digits */
    assert_int_equal(cis2_jinja_render_string("{{ strftime_now('%Y') }}", 24, v, NULL, NULL, &out, &n, &err), CIS2_OK);
    assert_int_equal(n, 4);
    assert_true(out[0] == '2');
    free(out);
    json_decref(v);
    /* one parse, many renders with other variables */
    cis2_jinja *t;
    assert_int_equal(cis2_jinja_parse("{{ x }}", 7, NULL, &t, &err), CIS2_OK);
    for (int i = 0; i < 3; i++) {
        json_t *x = json_pack("{s:i}", "x", i);
        assert_int_equal(cis2_jinja_render(t, x, NULL, NULL, &out, &n, &err), CIS2_OK);
        assert_int_equal(out[0], '0' + i);
        free(out);
        json_decref(x);
    }
    cis2_jinja_free(t);
    cis2_jinja_free(NULL);
}

/* The public entry points (cis2_toolkit.h section 6): variables as JSON
 * text, the codes, and Python's float arithmetic whatever the caller's
 * environment: a caller with FTZ/DAZ set (the §1.3 pin) still gets the
 * subnormal Python prints (2.5e-308 / 1e10 is 2.5e-318 in CPython, 0.0
 * under FTZ), and its environment back. */
static void test_public(void **state)
{
    (void)state;
    cis2_error err = {0};
    cis2_chat_template *t = NULL;
    const char *src = "{% if boom %}{{ raise_exception('no ' ~ boom) }}{% endif %}{{ 2.5e-308 / 1e10 }} {{ x | tojson }}";
    assert_int_equal(cis2_chat_template_parse(src, strlen(src), &t, &err), CIS2_OK);
    fenv_t saved;
    fegetenv(&saved);
    assert_int_equal(cis2_fpenv_pin(&err), CIS2_OK);
    char *out = NULL;
    size_t n = 0;
    const char *vars = "{\"x\": {\"b\": 1, \"a\": [0.1, \"\u00e9\"]}}";
    int rc = cis2_chat_template_render(t, vars, strlen(vars), NULL, &out, &n, &err);
    int still = cis2_fpenv_is_pinned();
    fesetenv(&saved);
    assert_int_equal(rc, CIS2_OK);
    assert_true(still);
    assert_string_equal(out, "2.5e-318 {\"b\": 1, \"a\": [0.1, \"\u00e9\"]}");
    assert_int_equal(n, strlen(out));
    cis2_free(out);
    const char *boom = "{\"boom\": \"way\"}";
    memset(&err, 0, sizeof err); /* an error keeps its first code and message (cis2_fail) */
    assert_int_equal(cis2_chat_template_render(t, boom, strlen(boom), NULL, &out, &n, &err), CIS2_E_USAGE);
    assert_string_equal(err.msg, "no way");
    assert_null(out);
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_chat_template_render(t, "[1]", 3, NULL, &out, &n, &err), CIS2_E_FORMAT);
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_chat_template_render(t, "{\"x\":", 5, NULL, &out, &n, &err), CIS2_E_FORMAT);
    cis2_chat_template_free(t);
    cis2_chat_template_free(NULL);
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_chat_template_parse("{% if %}", 8, &t, &err), CIS2_E_FORMAT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "template line 1:"));
}

/* This thread's CPU time. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TIMED 1
#else
#define TIMED 0
#endif

/* A hostile template is answered in bounded time and memory (docs/chat.md
 * "Limits"): native builds with the default limits take under
 * HOSTILE_CPU_S of CPU (20M steps are about half a second); under qemu or
 * the sanitizers, lim NULL means a tenth of the steps and a quarter of the
 * memory, so the test stays short there.  A render that hangs fails the
 * test after 60 s (the watchdog) instead of stalling it, and one whose
 * memory is not bounded by max_memory fails on the process's peak RSS
 * (native builds: the sanitizers' quarantine holds freed memory). */
#define HOSTILE_CPU_S 1.0

static const char *volatile watched;
static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_jinja: a render still running after 60 s: ";
    ssize_t w = write(2, m, sizeof m - 1);
    if (watched) w = write(2, watched, strnlen(watched, 200));
    w = write(2, "\n", 1);
    (void)w;
    _exit(1);
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* renders tmpl (vars: JSON text, NULL {}) under lim: the status must be
 * code, and want the text (CIS2_OK) or words of the message */
static void bounded_lim(const char *tmpl, const char *vars, const cis2_jinja_limits *lim, int code, const char *want)
{
    int got;
    cis2_error err;
    cis2_jinja_limits slow = {0};
    slow.max_steps = 2000000;
    slow.max_memory = 64 << 20;
    if (!lim && !TIMED) lim = &slow;
    cis2_jinja_limits L;
    cis2_jinja_limits_resolve(&L, lim);
    long rss0 = peak_rss_kb();
    watched = tmpl;
    signal(SIGALRM, on_alarm);
    alarm(60);
    double t0 = cpu_now();
    char *out = render_lim(tmpl, vars, lim, &got, &err);
    double dt = cpu_now() - t0;
    alarm(0);
    long grew = peak_rss_kb() - rss0;
    if (got != code) fail_msg("%.60s: code %d (want %d), msg [%s]", tmpl, got, code, err.msg);
    if (code == CIS2_OK && strcmp(out, want) != 0) fail_msg("%.60s:\n got: [%.200s]\nwant: [%.200s]", tmpl, out, want);
    if (code != CIS2_OK && !strstr(err.msg, want)) fail_msg("%.60s: message [%s] lacks [%s]", tmpl, err.msg, want);
    if (TIMED && dt > HOSTILE_CPU_S) fail_msg("%.60s: %.2f s of CPU", tmpl, dt);
    if (TIMED && grew > (long)(L.max_memory >> 10) + (64 << 10)) fail_msg("%.60s: the peak RSS grew by %ld KiB", tmpl, grew);
    free(out);
}

static void bounded(const char *tmpl, int code, const char *want) { bounded_lim(tmpl, NULL, NULL, code, want); }

/* refused with CIS2_E_NOMEM naming the limit */
static void refused(const char *tmpl, const cis2_jinja_limits *lim, const char *words)
{
    bounded_lim(tmpl, NULL, lim, CIS2_E_NOMEM, words);
}

static char *repeated(const char *a, int n, const char *mid, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *o = s;
    for (int i = 0; i < n; i++) memcpy(o, a, la), o += la;
    memcpy(o, mid, lm), o += lm;
    for (int i = 0; i < n; i++) memcpy(o, b, lb), o += lb;
    *o = 0;
    return s;
}

static void test_hostile(void **state)
{
    (void)state;
    cis2_jinja_limits small = {0};
    small.max_output = 5000;
    small.max_steps = 100000;
    small.max_memory = 8 << 20;
    small.max_depth = 50;
    small.max_source = 4096;
    /* each limit, small */
    refused("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", &small, "max_output");
    refused("{% for i in range(100000) %}{% set k = i %}{% endfor %}", &small, "max_steps");
    refused("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &small, "max_depth");
    refused("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", &small,
            "max_memory");
    char *big = repeated("x", 5000, "", "");
    int code;
    cis2_error err;
    char *out = render_lim(big, NULL, &small, &code, &err);
    assert_int_equal(code, CIS2_E_NOMEM);
    assert_non_null(strstr(err.msg, "max_source"));
    free(big);
    /* the defaults */
    refused("{% macro f(n) %}x{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "max_depth");
    refused("{% macro m() %}{{ caller() }}{% endmacro %}{% macro r() %}{% call m() %}{{ r() }}{% endcall %}{% endmacro %}{{ r() }}",
            NULL, "max_depth");
    refused("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", NULL, "max_steps");
    refused("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}", NULL, "max_output");
    refused("{{ 'x' * 1000000000000 }}", NULL, "max_output");
    refused("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", NULL, "max_memory");
    refused("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('', ns.s) %}{% endfor %}", NULL,
            "max_memory");
    refused("{{ '%999999999s' % 'x' }}", NULL, "max_output");
    refused("{{ range(100000) | unique | list | length }}", NULL, "max_steps");
    refused("{% set s = '\xc3\xa9' * 100000 %}{% for i in range(100000) %}{{ s[i] }}{% endfor %}", NULL, "max_steps");
    /* nesting: refused while parsing, before the C stack is at risk */
    char *t = repeated("(", 100000, "1", ")");
    char *w = repeated("", 0, "{{ ", "");
    size_t lt = strlen(t);
    char *e = malloc(lt + 7);
    memcpy(e, "{{ ", 3), memcpy(e + 3, t, lt), memcpy(e + 3 + lt, " }}", 4);
    refused(e, NULL, "nesting deeper than 200");
    free(e), free(t), free(w);
    t = repeated("{% if true %}", 20000, "x", "{% endif %}");
    refused(t, NULL, "nesting deeper than 200");
    free(t);
    t = repeated("[", 100000, "", "]");
    e = malloc(strlen(t) + 7);
    sprintf(e, "{{ %s }}", t);
    refused(e, NULL, "nesting deeper than 200");
    free(e), free(t);
    t = repeated("1 + ", 30000, "1", "");
    e = malloc(strlen(t) + 7);
    sprintf(e, "{{ %s }}", t);
    refused(e, NULL, "nesting deeper than 256");
    free(e), free(t);
    t = repeated("not ", 100000, "1", "");
    e = malloc(strlen(t) + 7);
    sprintf(e, "{{ %s }}", t);
    refused(e, NULL, "nesting deeper than 200");
    free(e), free(t);
    /* a namespace holding itself prints as Python prints it, not a crash */
    expect("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "<Namespace {'me': <Namespace {...}>}>");
    /* deep JSON variables */
    char *deep = repeated("[", 3000, "", "]");
    json_error_t je;
    json_t *dv = json_loads(deep, 0, &je);
    free(deep);
    if (dv) { /* jansson may refuse it itself */
        json_t *vars = json_pack("{s:o}", "x", dv);
        memset(&err, 0, sizeof err);
        out = NULL;
        size_t n;
        assert_int_equal(cis2_jinja_render_string("{{ x }}", 7, vars, NULL, NULL, &out, &n, &err), CIS2_E_FORMAT);
        assert_non_null(strstr(err.msg, "nest deeper than 200"));
        json_decref(vars);
    }
}

/* "x0=1, x1=1, ..." (n of them), with prefix and suffix around */
static char *numbered(const char *prefix, const char *fmt, int n, const char *sep, const char *suffix)
{
    size_t cap = strlen(prefix) + strlen(suffix) + (size_t)n * (strlen(fmt) + strlen(sep) + 12) + 1, o;
    char *b = malloc(cap);
    o = (size_t)sprintf(b, "%s", prefix);
    for (int i = 0; i < n; i++) {
        if (i) o += (size_t)sprintf(b + o, "%s", sep);
        o += (size_t)sprintf(b + o, fmt, i, i);
    }
    sprintf(b + o, "%s", suffix);
    return b;
}

/* Hostile inputs that once escaped their bounds, each fixed in
 * src/jinja_*.c (docs/chat.md "Limits"): now answered within them */
static void test_bounds(void **state)
{
    (void)state;
    /* [] * n is [] at once (it was n turns of an empty loop: 10^18 here) */
    bounded("{{ [] * 10**18 }}{{ () * 10**18 }}{{ 10**18 * [] }}", CIS2_OK, "[]()[]");
    /* a list repeated past max_memory names the limit (it said "out of memory") */
    bounded("{% set l = [1, 2] * 10**9 %}", CIS2_E_NOMEM, "cis2_jinja_limits.max_memory");
    /* a %-format's width or precision past what fits: refused before the C
     * library formats it (it wrote 10^9 characters, and for %.Nf took 4 GB) */
    bounded("{{ '%999999999d' % 1 }}", CIS2_E_FORMAT, "format too wide");
    bounded("{{ '%.999999999f' % 1.5 }}", CIS2_E_FORMAT, "format too wide");
    bounded("{{ '%-99999999.9e' % 1.5 }}", CIS2_E_FORMAT, "format too wide");
    bounded("{{ '%5.2f|%-4d|%.3e|%x' % (1.5, 3, 0.5, 255) }}{{ ('%.300f' % 0.5) | length }}{{ ('%511d' % 1) | length }}",
            CIS2_OK, " 1.50|3   |5.000e-01|ff302511");
    /* names and keywords are looked up one by one: calls of thousands of
     * keywords and scopes of thousands of names are charged for it (it
     * took seconds without a step: every pair of keywords was compared) */
    char *t = numbered("{{ dict(", "a%d=%d", 50000, ", ", ") | length }}");
    bounded(t, CIS2_E_NOMEM, "cis2_jinja_limits.max_steps");
    free(t);
    t = numbered("{{ dict(", "a%d=%d", 1000, ", ", ") | length }}");
    bounded(t, CIS2_OK, "1000");
    free(t);
    t = numbered("{% macro m(", "p%d=%d", 20000, ", ", ") %}{% endmacro %}");
    char *call = numbered("{{ m(", "p%d=%d", 20000, ", ", ") }}"), *both = malloc(strlen(t) + strlen(call) + 1);
    sprintf(both, "%s%s", t, call);
    bounded(both, CIS2_E_NOMEM, "cis2_jinja_limits.max_steps");
    free(t), free(call), free(both);
    t = numbered("{% set ", "a%d", 30000, ", ", " = (1,) * 30000 %}");
    bounded(t, CIS2_E_NOMEM, "cis2_jinja_limits.max_steps");
    free(t);
    t = numbered("", "{%% set a%d = %d %%}", 20000, "", "{% for i in range(100000) %}{{ a0 }}{% endfor %}");
    bounded(t, CIS2_E_NOMEM, "cis2_jinja_limits.max_steps");
    free(t);
    char *vars = numbered("{\"d\": {", "\"k%d\": %d", 50000, ", ", "}}");
    bounded_lim("{{ dict(**d) | length }}", vars, NULL, CIS2_E_NOMEM, "cis2_jinja_limits.max_steps");
    free(vars);
    vars = numbered("{", "\"k%d\": %d", 50000, ", ", "}"); /* a name not among 50,000 variables */
    bounded_lim("{% for i in range(100000) %}{{ nothing }}{% endfor %}", vars, NULL, CIS2_E_NOMEM,
                "cis2_jinja_limits.max_steps");
    free(vars);
}

/* one parsed template rendered from several threads at once */
typedef struct { const cis2_jinja *t; json_t *vars; const char *want; int ok; } job;

static void *worker(void *arg)
{
    job *j = arg;
    struct tm now = pinned();
    j->ok = 1;
    for (int i = 0; i < 200; i++) {
        cis2_error err = {0};
        char *out;
        size_t n;
        if (cis2_jinja_render(j->t, j->vars, &now, NULL, &out, &n, &err) != CIS2_OK || strcmp(out, j->want) != 0) j->ok = 0;
        free(out);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    static const char *T =
        "{%- set ns = namespace(n=0) %}{%- for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}{{ ns.n }} {{ strftime_now('%d') }}";
    cis2_error err = {0};
    cis2_jinja *t;
    assert_int_equal(cis2_jinja_parse(T, strlen(T), NULL, &t, &err), CIS2_OK);
    json_error_t je;
    json_t *vars = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", "
                              "\"content\": \"yo\"}], \"add_generation_prompt\": true}", 0, &je);
    const char *want = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n<|im_start|>assistant\n2 07";
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){t, vars, want, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(jobs[i].ok);
    }
    json_decref(vars);
    cis2_jinja_free(t);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--render") == 0) return driver(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--render-each") == 0) return driver(NULL);
    if (argc == 2 && strcmp(argv[1], "--table") == 0) return dump_table();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),  cmocka_unit_test(test_errors), cmocka_unit_test(test_raise),
        cmocka_unit_test(test_api),    cmocka_unit_test(test_hostile), cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_threads), cmocka_unit_test(test_public),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
