/*
 * test_serve_parse.c - serve/serve_parse.c, a chat model's generated text
 * -> content, reasoning_content and tool_calls (docs/chat-output.md "Tool
 * calls and reasoning"):
 *
 *   - hand-written cases per convention (Hermes/Qwen JSON and Qwen3.5 XML,
 *     <think>, Llama-3.x JSON, Mistral v0.3, gpt-oss harmony), their
 *     expected fields worked out from the rules in docs/chat-output.md and
 *     the formats the families' templates write, including what stays
 *     content (malformed calls, tools off, tags in the wrong place);
 *   - the streaming property, for every case: every split of the text into
 *     2 and 3 pieces, and byte by byte, gives deltas whose concatenation
 *     (per field, per call) is the whole parse, each delta non-empty and,
 *     for valid UTF-8 input, whole UTF-8 sequences, a call's start before
 *     its arguments;
 *   - the JSON the server sends (message, stream delta), finish_reason,
 *     the detection table, the option names, the prompt's open <think>.
 *
 * The cross-check against what the real templates render is
 * tests/oracle/t_tool_parse.sh, with this program as its driver:
 *   test_serve_parse --parse < CASES    one result line per JSON case line
 *   test_serve_parse --detect FILE...   "TOOLS REASONING" per template, a line each
 * The module is the server's (outside the library), so it is compiled in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../serve/serve_buf.c"
#include "../../serve/serve_parse.c"

#define TOOLS_WEATHER                                                                                               \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "  \
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, \"metric\": {\"type\": " \
    "\"boolean\"}, \"opts\": {\"type\": \"object\"}, \"tags\": {\"type\": \"array\"}, \"temp\": {\"type\": "       \
    "[\"number\", \"null\"]}, \"zip\": {\"type\": \"string\"}}}}}]"

typedef struct pcase {
    const char *name;
    serve_tool_style t;
    serve_reason_style r;
    int tools_on, in_think;
    const char *schema; /* the request's tools, or NULL */
    const char *text;
    const char *content, *reasoning;
    int n_calls;
    struct { const char *name, *args; } call[3];
} pcase;

#define H SERVE_TOOLS_HERMES
#define L SERVE_TOOLS_LLAMA3_JSON
#define M SERVE_TOOLS_MISTRAL
#define G SERVE_TOOLS_HARMONY
#define NT SERVE_TOOLS_NONE
#define TK SERVE_REASON_THINK
#define GR SERVE_REASON_HARMONY
#define NR SERVE_REASON_NONE

static const pcase cases[] = {
    /* ---- Hermes / Qwen3 JSON (chat-output.md "Hermes / Qwen") */
    {"hermes one call after text", H, NR, 1, 0, NULL,
     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
     "Let me check.", "", 1, {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}}},
    {"hermes two calls", H, NR, 1, 0, NULL,
     "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": "
     "{\"x\": [1, 2.50, -3e2], \"s\": \"}<tool_call>\"}}\n</tool_call>",
     "", "", 2, {{"a", "{}"}, {"b", "{\"x\": [1, 2.50, -3e2], \"s\": \"}<tool_call>\"}"}}},
    {"hermes </tool_call> in a JSON string ends the block", H, NR, 1, 0, NULL,
     "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": "
     "{\"s\": \"</tool_call>\"}}</tool_call>",
     "\n<tool_call>{\"name\": \"b\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>", "", 1, {{"a", "{}"}}},
    {"hermes malformed JSON stays content", H, NR, 1, 0, NULL,
     "Sure <tool_call>\n{\"name\": \"a\", \"arguments\": {oops}}\n</tool_call> done",
     "Sure <tool_call>\n{\"name\": \"a\", \"arguments\": {oops}}\n</tool_call> done", "", 0, {{0}}},
    {"hermes a bad block beside a good one", H, NR, 1, 0, NULL,
     "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call> <tool_call>{\"name\": \"ok\", \"arguments\": {\"a\": "
     "true}}</tool_call>",
     "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>", "", 1, {{"ok", "{\"a\": true}"}}},
    {"hermes no tags, a partial tag at the end", H, NR, 1, 0, NULL, "Hello, <b>world</b> <tool_c",
     "Hello, <b>world</b> <tool_c", "", 0, {{0}}},
    {"hermes arguments as a string", H, NR, 1, 0, NULL,
     "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", "", "", 1, {{"f", "{\"a\": 1}"}}},
    {"hermes tools off: the call stays content", H, NR, 0, 0, NULL,
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "", 0, {{0}}},
    {"hermes unterminated but whole", H, NR, 1, 0, NULL, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",
     "", "", 1, {{"f", "{\"a\": 1}"}}},
    {"hermes cut short by max_tokens", H, NR, 1, 0, NULL, "I will call it.\n<tool_call>\n{\"name\": \"f\", \"argu",
     "I will call it.\n<tool_call>\n{\"name\": \"f\", \"argu", "", 0, {{0}}},
    {"hermes no name", H, NR, 1, 0, NULL, "<tool_call>{\"arguments\": {}}</tool_call>",
     "<tool_call>{\"arguments\": {}}</tool_call>", "", 0, {{0}}},
    {"hermes no arguments", H, NR, 1, 0, NULL, "<tool_call>{\"name\": \"f\"}</tool_call>",
     "<tool_call>{\"name\": \"f\"}</tool_call>", "", 0, {{0}}},
    {"hermes arguments an array", H, NR, 1, 0, NULL, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
     "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", "", 0, {{0}}},
    {"hermes text after the call: only the white space before the call is dropped", H, NR, 1, 0, NULL,
     "Checking  \n <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\n\nAnything else?  ",
     "Checking\n\nAnything else?  ",
     "", 1, {{"f", "{}"}}},
    {"hermes Unicode around and inside", H, NR, 1, 0, NULL,
     "Wetter f\xC3\xBCr K\xC3\xB6ln \xF0\x9F\x8C\xA7 <tool_call>{\"name\": \"wetter\", \"arguments\": {\"stadt\": "
     "\"K\xC3\xB6ln\", \"e\": \"\\u00e9\\n\"}}</tool_call>",
     "Wetter f\xC3\xBCr K\xC3\xB6ln \xF0\x9F\x8C\xA7", "", 1,
     {{"wetter", "{\"stadt\": \"K\xC3\xB6ln\", \"e\": \"\\u00e9\\n\"}"}}},
    {"hermes duplicate key: the last", H, NR, 1, 0, NULL,
     "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1},\"arguments\":{\"b\":2}}</tool_call>", "", "", 1,
     {{"f", "{\"b\":2}"}}},
    {"hermes escaped key and name", H, NR, 1, 0, NULL,
     "<tool_call>{\"n\\u0061me\": \"g\\u00e9t\", \"\\u0061rguments\": {\"q\": \"\\\"x\\\"\"}}</tool_call>", "", "",
     1, {{"g\xC3\xA9t", "{\"q\": \"\\\"x\\\"\"}"}}},
    {"hermes nested tag makes it malformed", H, NR, 1, 0, NULL,
     "<tool_call>x<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
     "<tool_call>x<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", "", 0, {{0}}},
    {"hermes big integer", H, NR, 1, 0, NULL,
     "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 123456789012345678901234567890}}</tool_call>", "", "", 1,
     {{"f", "{\"n\": 123456789012345678901234567890}"}}},
    /* ---- Qwen3.5's XML form (chat-output.md "Qwen3.5's XML form") */
    {"xml typed by the schema", H, NR, 1, 0, TOOLS_WEATHER,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
     "<parameter=metric>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=tags>\n"
     "[\"x\"]\n</parameter>\n<parameter=temp>\nNone\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n"
     "</tool_call>",
     "", "", 1,
     {{"get_weather", "{\"city\": \"Paris\", \"days\": 3, \"metric\": true, \"opts\": {\"a\": [1, 2]}, \"tags\": "
                      "[\"x\"], \"temp\": null, \"zip\": \"75001\"}"}}},
    {"xml a value that does not fit its type is a string", H, NR, 1, 0, TOOLS_WEATHER,
     "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=metric>\nyes\n</parameter>"
     "\n<parameter=temp>\n21.5\n</parameter>\n<parameter=opts>\n[1]\n</parameter>\n</function>\n</tool_call>",
     "", "", 1,
     {{"get_weather", "{\"days\": \"three\", \"metric\": \"yes\", \"temp\": 21.5, \"opts\": \"[1]\"}"}}},
    {"xml without a schema: strings", H, NR, 1, 0, NULL,
     "Looking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
     "</parameter>\n</function>\n</tool_call>",
     "Looking.", "", 1, {{"get_weather", "{\"city\": \"Paris\", \"days\": \"3\"}"}}},
    {"xml multi-line value with quotes", H, NR, 1, 0, NULL,
     "<tool_call>\n<function=write>\n<parameter=text>\nline 1\nline \"2\"\t\\\n\n</parameter>\n</function>\n</tool_call>",
     "", "", 1, {{"write", "{\"text\": \"line 1\\nline \\\"2\\\"\\t\\\\\\n\"}"}}},
    {"xml no parameters", H, NR, 1, 0, NULL, "<tool_call>\n<function=now>\n</function>\n</tool_call>", "", "", 1,
     {{"now", "{}"}}},
    {"xml missing </function> stays content", H, NR, 1, 0, NULL,
     "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>",
     "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>", "", 0, {{0}}},
    {"xml text after </function> stays content", H, NR, 1, 0, NULL,
     "<tool_call>\n<function=f>\n</function>\nmore\n</tool_call>",
     "<tool_call>\n<function=f>\n</function>\nmore\n</tool_call>", "", 0, {{0}}},
    /* ---- <think> (chat-output.md "Reasoning: <think>") */
    {"qwen3 reasoning then a call", H, TK, 1, 0, NULL,
     "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"city\": \"Paris\"}}\n</tool_call>",
     "", "The user wants weather.", 1, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"qwen3 empty reasoning", H, TK, 1, 0, NULL, "<think>\n\n</think>\n\nHello!", "Hello!", "", 0, {{0}}},
    {"qwen3.5 prompt opened <think>", H, TK, 1, 1, NULL, "Let me think.\n\nMore.\n</think>\n\nThe answer is 4.\n",
     "The answer is 4.\n", "Let me think.\n\nMore.", 0, {{0}}},
    {"reasoning cut short", H, TK, 1, 0, NULL, "<think>\nstill thinking\n\n", "", "still thinking\n\n", 0, {{0}}},
    {"no <think>: all content, spaces kept", H, TK, 1, 0, NULL, "  Just an answer", "  Just an answer", "", 0, {{0}}},
    {"<think> later is content", H, TK, 1, 0, NULL, "Answer <think>x</think>", "Answer <think>x</think>", "", 0,
     {{0}}},
    {"stray </think> without the prompt's <think> is content", NT, TK, 0, 0, NULL, "abc</think>def",
     "abc</think>def", "", 0, {{0}}},
    {"a call inside reasoning is reasoning", H, TK, 1, 0, NULL,
     "<think>\nmaybe <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\n</think>\nok",
     "ok", "maybe <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>", 0, {{0}}},
    {"white space before <think>", NT, TK, 0, 0, NULL, "\n <think>r</think>c", "c", "r", 0, {{0}}},
    {"in_think, second </think> is content", NT, TK, 0, 1, NULL, "a</think>b</think>c", "b</think>c", "a", 0, {{0}}},
    {"in_think, nothing after", NT, TK, 0, 1, NULL, "\n\nonly reasoning", "", "only reasoning", 0, {{0}}},
    /* ---- Llama 3.x (chat-output.md "Llama 3.x JSON") */
    {"llama one call", L, NR, 1, 0, NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "",
     1, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"llama python_tag", L, NR, 1, 0, NULL, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", "", 1,
     {{"f", "{}"}}},
    {"llama two calls", L, NR, 1, 0, NULL,
     "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"arguments\": {\"y\": 2}}", "", "", 2,
     {{"a", "{\"x\": 1}"}, {"b", "{\"y\": 2}"}}},
    {"llama plain text", L, NR, 1, 0, NULL, "The weather is {sunny}.", "The weather is {sunny}.", "", 0, {{0}}},
    {"llama JSON that is not a call", L, NR, 1, 0, NULL, "{\"answer\": 42}", "{\"answer\": 42}", "", 0, {{0}}},
    {"llama built-in python call stays content", L, NR, 1, 0, NULL, "<|python_tag|>brave_search.call(query=\"x\")",
     "<|python_tag|>brave_search.call(query=\"x\")", "", 0, {{0}}},
    {"llama trailing text", L, NR, 1, 0, NULL, "{\"name\": \"f\", \"parameters\": {}} thanks",
     "{\"name\": \"f\", \"parameters\": {}} thanks", "", 0, {{0}}},
    {"llama white space around", L, NR, 1, 0, NULL, "\n\n{\"name\": \"f\", \"parameters\": {\"a\": \"b;{\"}}\n", "", "",
     1, {{"f", "{\"a\": \"b;{\"}"}}},
    {"llama tools off", L, NR, 0, 0, NULL, "{\"name\": \"f\", \"parameters\": {}}",
     "{\"name\": \"f\", \"parameters\": {}}", "", 0, {{0}}},
    /* ---- Mistral v0.3 (chat-output.md "Mistral") */
    {"mistral one call", M, NR, 1, 0, NULL,
     "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}]", "",
     "", 1, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"mistral two calls", M, NR, 1, 0, NULL,
     "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": null}}]", "", "",
     2, {{"a", "{}"}, {"b", "{\"k\": null}"}}},
    {"mistral text first", M, NR, 1, 0, NULL, "Checking. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}]",
     "Checking.", "", 1, {{"a", "{}"}}},
    {"mistral no arguments", M, NR, 1, 0, NULL, "[TOOL_CALLS] [{\"name\": \"a\"}]", "[TOOL_CALLS] [{\"name\": \"a\"}]",
     "", 0, {{0}}},
    {"mistral empty list", M, NR, 1, 0, NULL, "x [TOOL_CALLS] []", "x [TOOL_CALLS] []", "", 0, {{0}}},
    {"mistral plain", M, NR, 1, 0, NULL, "Just [text] here [TOOL", "Just [text] here [TOOL", "", 0, {{0}}},
    /* ---- gpt-oss harmony (chat-output.md "gpt-oss (harmony)") */
    {"harmony reasoning and a call", G, GR, 1, 0, NULL,
     "<|channel|>analysis<|message|>User asks weather. Need tool.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>",
     "", "User asks weather. Need tool.", 1, {{"get_weather", "{\"location\":\"San Francisco\"}"}}},
    {"harmony reasoning and final", G, GR, 1, 0, NULL,
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.",
     "2 + 2 = 4.", "Simple.", 0, {{0}}},
    {"harmony recipient in the role part", G, GR, 1, 0, NULL,
     "<|channel|>analysis<|message|>think<|end|><|start|>assistant to=functions.f<|channel|>commentary "
     "json<|message|>{\"a\": 1}<|call|>",
     "", "think", 1, {{"f", "{\"a\": 1}"}}},
    {"harmony preamble then a call", G, GR, 1, 0, NULL,
     "<|channel|>commentary<|message|>Working on it.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.g<|constrain|>json<|message|>{}<|call|>",
     "Working on it.", "", 1, {{"g", "{}"}}},
    {"harmony no channel: content", G, GR, 1, 0, NULL, "Hello there", "Hello there", "", 0, {{0}}},
    {"harmony tools off: the call's body is content", G, GR, 0, 0, NULL,
     "<|channel|>analysis<|message|>Need tool.<|end|><|start|>assistant<|channel|>commentary to=functions.w "
     "<|constrain|>json<|message|>{\"l\":\"SF\"}<|call|>",
     "{\"l\":\"SF\"}", "Need tool.", 0, {{0}}},
    {"harmony empty arguments", G, GR, 1, 0, NULL,
     "<|channel|>commentary to=functions.now <|constrain|>json<|message|><|call|>", "", "", 1, {{"now", "{}"}}},
    {"harmony built-in tool is reasoning", G, GR, 1, 0, NULL, "<|channel|>analysis to=python code<|message|>print(1)",
     "", "print(1)", 0, {{0}}},
    {"harmony header without <|message|>", G, GR, 1, 0, NULL, "<|channel|>final no message<|end|>rest",
     "<|channel|>final no message<|end|>rest", "", 0, {{0}}},
    {"harmony two calls", G, GR, 1, 0, NULL,
     "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\":1}<|call|><|start|>assistant"
     "<|channel|>commentary to=functions.b <|constrain|>json<|message|>{\"x\":2}<|call|>",
     "", "", 2, {{"a", "{\"x\":1}"}, {"b", "{\"x\":2}"}}},
    {"harmony Unicode final, a channel without <|start|>", G, GR, 1, 0, NULL,
     "<|channel|>analysis<|message|>\xC3\xA9t\xC3\xA9<|end|><|channel|>final<|message|>Gr\xC3\xBC\xC3\x9F"
     "e \xF0\x9F\x91\x8B<|return|>",
     "Gr\xC3\xBC\xC3\x9F" "e \xF0\x9F\x91\x8B", "\xC3\xA9t\xC3\xA9", 0, {{0}}},
    {"harmony reasoning off: analysis is content", G, NR, 1, 0, NULL,
     "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>ok", "hmmok", "", 0,
     {{0}}},
    {"harmony a stray <|start|> at the end", G, GR, 1, 0, NULL, "<|channel|>final<|message|>a<|end|><|start|>",
     "a<|start|>", "", 0, {{0}}},
    /* ---- none */
    {"none: everything is content", NT, NR, 1, 0, NULL, "<think>x</think><tool_call>{}</tool_call>",
     "<think>x</think><tool_call>{}</tool_call>", "", 0, {{0}}},
    /* ---- bytes that are not UTF-8 pass through */
    {"invalid bytes", H, TK, 1, 0, NULL, "<think>\xFF\xC3</think>\xE2\x82 ab\xC3", "\xE2\x82 ab\xC3", "\xFF\xC3", 0,
     {{0}}},
};

/* ------------------------------------------------------------ helpers */

typedef struct acc {
    serve_buf content, reasoning;
    serve_buf name[8], id[8], args[8];
    size_t n_calls;
} acc;

static void acc_free(acc *a)
{
    serve_buf_free(&a->content);
    serve_buf_free(&a->reasoning);
    for (int i = 0; i < 8; i++) {
        serve_buf_free(&a->name[i]);
        serve_buf_free(&a->id[i]);
        serve_buf_free(&a->args[i]);
    }
    memset(a, 0, sizeof *a);
}

/* Every buffer of a with memory, NUL-terminated (an empty one compares too). */
static void acc_init(acc *a)
{
    memset(a, 0, sizeof *a);
    serve_buf *all[] = {&a->content, &a->reasoning};
    for (int i = 0; i < 2; i++) assert_int_equal(buf_init(all[i]), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(buf_init(&a->name[i]), 0);
        assert_int_equal(buf_init(&a->id[i]), 0);
        assert_int_equal(buf_init(&a->args[i]), 0);
    }
}

static void acc_reset(acc *a)
{
    serve_buf *all[] = {&a->content, &a->reasoning};
    for (int i = 0; i < 2; i++) all[i]->p[all[i]->n = 0] = 0;
    for (int i = 0; i < 8; i++) {
        a->name[i].p[a->name[i].n = 0] = 0;
        a->id[i].p[a->id[i].n = 0] = 0;
        a->args[i].p[a->args[i].n = 0] = 0;
    }
    a->n_calls = 0;
}

static int valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int v;
        size_t u = cis2_utf8_unit((const unsigned char *)s + i, n - i, &cp, &v);
        if (v != 1) return 0;
        i += u;
    }
    return 1;
}

/* Takes the parser's deltas into a, checking each. */
static void take_into(serve_parse *p, acc *a, int utf8_in)
{
    size_t n;
    const serve_parse_delta *d = serve_parse_take(p, &n);
    for (size_t i = 0; i < n; i++) {
        assert_true(d[i].len > 0);
        if (i) assert_false(d[i].kind == d[i - 1].kind && d[i].kind != SERVE_DELTA_TOOL_START && d[i].tool == d[i - 1].tool);
        switch (d[i].kind) {
        case SERVE_DELTA_CONTENT:
            serve_buf_put(&a->content, d[i].text, d[i].len);
            break;
        case SERVE_DELTA_REASONING:
            serve_buf_put(&a->reasoning, d[i].text, d[i].len);
            break;
        case SERVE_DELTA_TOOL_START:
            assert_int_equal(d[i].tool, a->n_calls);
            assert_true(a->n_calls < 8);
            serve_buf_put(&a->name[a->n_calls], d[i].text, d[i].len);
            serve_buf_str(&a->id[a->n_calls], d[i].id);
            a->n_calls++;
            break;
        case SERVE_DELTA_TOOL_ARGS:
            assert_true(d[i].tool < a->n_calls);
            assert_null(d[i].id);
            serve_buf_put(&a->args[d[i].tool], d[i].text, d[i].len);
            break;
        }
        if (utf8_in && d[i].kind != SERVE_DELTA_TOOL_START) assert_true(valid_utf8(d[i].text, d[i].len));
    }
}

/* The case's schema, parsed once (cases[] order). */
static json_t *schemas[sizeof cases / sizeof cases[0]];

static serve_parse *new_parser(const pcase *c)
{
    json_t **schema = &schemas[c - cases];
    if (c->schema && !*schema) *schema = json_loads(c->schema, 0, NULL);
    if (c->schema) assert_non_null(*schema);
    serve_parse_cfg cfg = {c->t, c->r};
    serve_parse_opts o = {c->tools_on, c->in_think, *schema, NULL};
    serve_parse *p = serve_parse_new(&cfg, &o);
    assert_non_null(p);
    return p;
}

/* Feeds text cut at cuts[0..nc) (ascending), taking after every piece. */
static void run(const pcase *c, const size_t *cuts, size_t nc, acc *a)
{
    serve_parse *p = new_parser(c);
    size_t n = strlen(c->text), from = 0;
    int utf8_in = valid_utf8(c->text, n);
    for (size_t i = 0; i <= nc; i++) {
        size_t to = i < nc ? cuts[i] : n;
        assert_int_equal(serve_parse_feed(p, c->text + from, to - from), 0);
        take_into(p, a, utf8_in);
        from = to;
    }
    assert_int_equal(serve_parse_finish(p), 0);
    take_into(p, a, utf8_in);
    assert_int_equal(serve_parse_feed(p, "x", 1), -1); /* after finish */
    /* the whole parse the parser keeps is the deltas' concatenation */
    size_t l;
    const char *s = serve_parse_content(p, &l);
    assert_int_equal(l, a->content.n);
    assert_memory_equal(s, a->content.p, l);
    s = serve_parse_reasoning(p, &l);
    assert_int_equal(l, a->reasoning.n);
    assert_memory_equal(s, a->reasoning.p, l);
    assert_int_equal(serve_parse_n_calls(p), a->n_calls);
    for (size_t k = 0; k < a->n_calls; k++) {
        assert_string_equal(serve_parse_call_name(p, k), a->name[k].p);
        assert_string_equal(serve_parse_call_id(p, k), a->id[k].p);
        s = serve_parse_call_args(p, k, &l);
        assert_int_equal(l, a->args[k].n);
        assert_memory_equal(s, a->args[k].p, l);
    }
    serve_parse_free(p);
}

static int eq(const serve_buf *x, const serve_buf *y)
{
    return x->n == y->n && !memcmp(x->p, y->p, x->n);
}

/* The same fields, calls and ids. */
static int same(const acc *a, const acc *b)
{
    if (!eq(&a->content, &b->content) || !eq(&a->reasoning, &b->reasoning) || a->n_calls != b->n_calls) return 0;
    for (size_t k = 0; k < a->n_calls; k++)
        if (!eq(&a->name[k], &b->name[k]) || !eq(&a->id[k], &b->id[k]) || !eq(&a->args[k], &b->args[k])) return 0;
    return 1;
}

/* ------------------------------------------------------------- tests */

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pcase *c = &cases[i];
        acc a;
        acc_init(&a);
        run(c, NULL, 0, &a);
        const char *got_c = a.content.p ? a.content.p : "", *got_r = a.reasoning.p ? a.reasoning.p : "";
        if (strcmp(got_c, c->content)) fail_msg("%s: content [%s], want [%s]", c->name, got_c, c->content);
        if (strcmp(got_r, c->reasoning)) fail_msg("%s: reasoning [%s], want [%s]", c->name, got_r, c->reasoning);
        if ((int)a.n_calls != c->n_calls) fail_msg("%s: %zu calls, want %d", c->name, a.n_calls, c->n_calls);
        for (int k = 0; k < c->n_calls; k++) {
            char id[32];
            snprintf(id, sizeof id, "call_%d", k);
            if (strcmp(a.name[k].p, c->call[k].name)) fail_msg("%s: call %d name [%s]", c->name, k, a.name[k].p);
            if (strcmp(a.id[k].p, id)) fail_msg("%s: call %d id [%s]", c->name, k, a.id[k].p);
            if (strcmp(a.args[k].p ? a.args[k].p : "", c->call[k].args))
                fail_msg("%s: call %d arguments [%s], want [%s]", c->name, k, a.args[k].p, c->call[k].args);
            /* the arguments are JSON (what clients JSON.parse) */
            json_t *j = json_loads(a.args[k].p, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
            if (!json_is_object(j)) fail_msg("%s: call %d arguments are not a JSON object", c->name, k);
            json_decref(j);
        }
        acc_free(&a);
    }
}

/* Under AddressSanitizer (the SET=san leg, there for memory errors, at
 * several times the cost per run) the second cut of a 3-piece split runs
 * over the 8 bytes after the first and the end only; the plain build
 * takes every pair. */
#if defined(__SANITIZE_ADDRESS__)
#define SPLIT_SPAN 8
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPLIT_SPAN 8
#endif
#endif
#ifndef SPLIT_SPAN
#define SPLIT_SPAN ((size_t)-1)
#endif

/* Every split into 2 and 3 pieces, and byte by byte, = the whole parse. */
static void test_splits(void **state)
{
    (void)state;
    acc whole, a;
    acc_init(&whole);
    acc_init(&a);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pcase *c = &cases[i];
        size_t n = strlen(c->text);
        acc_reset(&whole);
        run(c, NULL, 0, &whole);
        for (size_t x = 0; x <= n; x++) {
            for (size_t y = x; y <= n; y = y - x >= SPLIT_SPAN && y < n ? n : y + 1) {
                size_t cuts[2] = {x, y};
                acc_reset(&a);
                run(c, cuts, 2, &a);
                if (!same(&whole, &a)) fail_msg("%s, cut at %zu and %zu: differs from the whole parse", c->name, x, y);
            }
            acc_reset(&a);
            run(c, &x, 1, &a);
            if (!same(&whole, &a)) fail_msg("%s, cut at %zu: differs from the whole parse", c->name, x);
        }
        size_t *cuts = malloc((n + 1) * sizeof *cuts);
        assert_non_null(cuts);
        for (size_t x = 0; x < n; x++) cuts[x] = x + 1;
        acc_reset(&a);
        run(c, cuts, n ? n - 1 : 0, &a);
        if (!same(&whole, &a)) fail_msg("%s, byte by byte: differs from the whole parse", c->name);
        free(cuts);
    }
    acc_free(&a);
    acc_free(&whole);
}

static json_t *parse_all(serve_tool_style t, serve_reason_style r, const char *text, serve_parse **out)
{
    serve_parse_cfg cfg = {t, r};
    serve_parse_opts o = {1, 0, NULL, "call_7f_"};
    serve_parse *p = serve_parse_new(&cfg, &o);
    assert_non_null(p);
    assert_int_equal(serve_parse_feed(p, text, strlen(text)), 0);
    assert_int_equal(serve_parse_finish(p), 0);
    *out = p;
    return serve_parse_message(p);
}

static void expect_json(json_t *j, const char *want)
{
    assert_non_null(j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(s);
    if (strcmp(s, want)) fail_msg("JSON\n  got  %s\n  want %s", s, want);
    free(s);
    json_decref(j);
}

static void test_message_json(void **state)
{
    (void)state;
    serve_parse *p;
    json_t *m = parse_all(H, TK, "<think>\nr\n</think>\n\n<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>", &p);
    expect_json(m, "{\"content\":null,\"reasoning_content\":\"r\",\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                   "{\"arguments\":\"{\\\"a\\\": 1}\",\"name\":\"f\"},\"id\":\"call_7f_0\",\"type\":\"function\"}]}");
    assert_string_equal(serve_parse_finish_reason(p, "stop"), "tool_calls");
    assert_string_equal(serve_parse_finish_reason(p, "length"), "length");
    serve_parse_free(p);
    m = parse_all(H, TK, "plain", &p);
    expect_json(m, "{\"content\":\"plain\",\"role\":\"assistant\"}");
    assert_string_equal(serve_parse_finish_reason(p, "stop"), "stop");
    serve_parse_free(p);
    m = parse_all(NT, NR, "", &p);
    expect_json(m, "{\"content\":\"\",\"role\":\"assistant\"}");
    serve_parse_free(p);
    /* bytes that are not UTF-8 are U+FFFD in JSON (the library's display text) */
    m = parse_all(NT, NR, "a\xFF" "b\xC3", &p);
    expect_json(m, "{\"content\":\"a\xEF\xBF\xBD" "b\xEF\xBF\xBD\",\"role\":\"assistant\"}");
    serve_parse_free(p);
}

static void test_delta_json(void **state)
{
    (void)state;
    serve_parse_cfg cfg = {G, GR};
    serve_parse_opts o = {1, 0, NULL, NULL};
    serve_parse *p = serve_parse_new(&cfg, &o);
    assert_non_null(p);
    size_t n;
    const char *t1 = "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.f "
                     "<|constrain|>json<|message|>{\"a\"";
    assert_int_equal(serve_parse_feed(p, t1, strlen(t1)), 0);
    const serve_parse_delta *d = serve_parse_take(p, &n);
    expect_json(serve_parse_delta_json(d, n),
                "{\"reasoning_content\":\"hm\",\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"a\\\"\",\"name\":"
                "\"f\"},\"id\":\"call_0\",\"index\":0,\"type\":\"function\"}]}");
    assert_int_equal(serve_parse_feed(p, ": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.g<|message|>{}",
                                      strlen(": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.g<|message|>{}")),
                     0);
    d = serve_parse_take(p, &n);
    expect_json(serve_parse_delta_json(d, n),
                "{\"tool_calls\":[{\"function\":{\"arguments\":\": 1}\"},\"index\":0},{\"function\":{\"arguments\":"
                "\"{}\",\"name\":\"g\"},\"id\":\"call_1\",\"index\":1,\"type\":\"function\"}]}");
    d = serve_parse_take(p, &n); /* taken already: nothing */
    assert_int_equal(n, 0);
    assert_null(serve_parse_delta_json(d, n));
    assert_int_equal(serve_parse_finish(p), 0);
    d = serve_parse_take(p, &n);
    assert_int_equal(n, 0);
    assert_string_equal(serve_parse_finish_reason(p, "stop"), "tool_calls");
    serve_parse_free(p);
}

static void test_detect_and_names(void **state)
{
    (void)state;
    static const struct { const char *tmpl; serve_tool_style t; serve_reason_style r; } rows[] = {
        {"{{- '<|start|>assistant<|channel|>final<|message|>' }}", G, GR},
        {"{{- '<tool_call>\\n' }}{%- if '</think>' in c %}<think>", H, TK},
        {"<tool_call> only", H, NR},
        {"<think> only", NT, TK},
        {"{{- ' [TOOL_CALLS] [' }}", M, NR},
        {"{{- '\"parameters\": ' }}", L, NR},
        {"{{- \"<|python_tag|>\" + x }}", L, NR},
        {"{{- '<|start_header_id|>' }}", NT, NR},
        {"", NT, NR},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        serve_parse_cfg c;
        serve_parse_detect(rows[i].tmpl, strlen(rows[i].tmpl), &c);
        if (c.tools != rows[i].t || c.reasoning != rows[i].r)
            fail_msg("detect [%s]: %s %s", rows[i].tmpl, serve_parse_tool_str(c.tools), serve_parse_reason_str(c.reasoning));
        assert_null(serve_parse_cfg_check(&c));
    }
    static const struct { const char *n; int t; } tn[] = {{"none", NT}, {"hermes", H}, {"qwen3_xml", H},
        {"qwen3_coder", H}, {"llama3_json", L}, {"mistral", M}, {"harmony", G}, {"openai", G}};
    for (size_t i = 0; i < sizeof tn / sizeof tn[0]; i++) {
        serve_tool_style t;
        assert_int_equal(serve_parse_tool_name(tn[i].n, &t), 0);
        assert_int_equal(t, tn[i].t);
    }
    static const struct { const char *n; int r; } rn[] = {{"none", NR}, {"think", TK}, {"qwen3", TK},
        {"deepseek_r1", TK}, {"harmony", GR}, {"openai_gptoss", GR}};
    for (size_t i = 0; i < sizeof rn / sizeof rn[0]; i++) {
        serve_reason_style r;
        assert_int_equal(serve_parse_reason_name(rn[i].n, &r), 0);
        assert_int_equal(r, rn[i].r);
    }
    serve_tool_style t;
    serve_reason_style r;
    assert_int_equal(serve_parse_tool_name("Hermes", &t), -1);
    assert_int_equal(serve_parse_tool_name("", &t), -1);
    assert_int_equal(serve_parse_reason_name("deepseek", &r), -1);
    assert_string_equal(serve_parse_tool_str(L), "llama3_json");
    assert_string_equal(serve_parse_reason_str(GR), "harmony");
    /* harmony is one format: not beside <think> or another tool syntax */
    serve_parse_cfg bad1 = {G, TK}, bad2 = {H, GR}, ok1 = {NT, GR}, ok2 = {G, NR}, bad3 = {(serve_tool_style)9, NR};
    assert_non_null(serve_parse_cfg_check(&bad1));
    assert_non_null(serve_parse_cfg_check(&bad2));
    assert_non_null(serve_parse_cfg_check(&bad3));
    assert_null(serve_parse_cfg_check(&ok1));
    assert_null(serve_parse_cfg_check(&ok2));
    assert_null(serve_parse_new(&bad1, NULL));
    /* the prompt opened <think> (Qwen3.5) or closed it (enable_thinking false, SmolLM3 /no_think) */
    assert_true(serve_parse_prompt_in_think("<|im_start|>assistant\n<think>\n", strlen("<|im_start|>assistant\n<think>\n")));
    assert_true(serve_parse_prompt_in_think("<think>", strlen("<think>")));
    assert_false(serve_parse_prompt_in_think("<|im_start|>assistant\n<think>\n\n</think>\n\n", strlen("<|im_start|>assistant\n<think>\n\n</think>\n\n")));
    assert_false(serve_parse_prompt_in_think("<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n", strlen("<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n")));
    assert_false(serve_parse_prompt_in_think("think>", strlen("think>")));
    assert_false(serve_parse_prompt_in_think("", strlen("")));
}

/* Hostile output: long, many calls, a long harmony header, NULs. */
static void test_hostile(void **state)
{
    (void)state;
    serve_buf b = {0};
    for (int i = 0; i < 200; i++) serve_buf_printf(&b, "<tool_call>{\"name\": \"f%d\", \"arguments\": {\"i\": %d}}</tool_call>", i, i);
    serve_parse *p;
    json_t *m = parse_all(H, NR, b.p, &p);
    assert_non_null(m);
    assert_int_equal(serve_parse_n_calls(p), 200);
    assert_string_equal(serve_parse_call_id(p, 199), "call_7f_199");
    assert_string_equal(serve_parse_call_name(p, 199), "f199");
    assert_null(serve_parse_call_name(p, 200));
    json_decref(m);
    serve_parse_free(p);
    /* a harmony header that never ends is content once past its bound */
    b.n = 0;
    serve_buf_str(&b, "<|start|>assistant");
    for (int i = 0; i < 100; i++) serve_buf_str(&b, " word word");
    serve_buf_str(&b, "<|message|>x");
    serve_parse_cfg cfg = {G, GR};
    p = serve_parse_new(&cfg, NULL);
    assert_non_null(p);
    size_t head = b.n - strlen("<|message|>x"), n, l;
    for (size_t i = 0; i < head; i++) assert_int_equal(serve_parse_feed(p, b.p + i, 1), 0);
    serve_parse_content(p, &l);
    assert_true(l >= HDR_MAX); /* released before <|message|>: held no further than the bound */
    assert_int_equal(serve_parse_feed(p, b.p + head, b.n - head), 0);
    serve_parse_take(p, &n);
    assert_int_equal(serve_parse_finish(p), 0);
    const char *s = serve_parse_content(p, &l);
    assert_int_equal(l, b.n);
    assert_memory_equal(s, b.p, l);
    serve_parse_free(p);
    /* NUL bytes are text like any other */
    serve_parse_cfg ch = {H, TK};
    serve_parse_opts on = {1, 0, NULL, NULL};
    p = serve_parse_new(&ch, &on);
    static const char nul[] = "<think>a\0b</think>c\0<tool_call>{\"name\":\"f\",\"arguments\":{\"x\":\"\\u0000\"}}</tool_call>";
    assert_int_equal(serve_parse_feed(p, nul, sizeof nul - 1), 0);
    assert_int_equal(serve_parse_finish(p), 0);
    s = serve_parse_reasoning(p, &l);
    assert_int_equal(l, 3);
    assert_memory_equal(s, "a\0b", 3);
    s = serve_parse_content(p, &l);
    assert_int_equal(l, 2);
    assert_memory_equal(s, "c\0", 2);
    assert_int_equal(serve_parse_n_calls(p), 1);
    serve_parse_free(p);
    serve_buf_free(&b);
}

/* White space and newlines that wait are looked at once, not once per
 * piece: 256 KiB of them fed byte by byte take linear time (a quadratic
 * scan takes tens of seconds). */
static void test_linear_time(void **state)
{
    (void)state;
    static const struct { serve_tool_style t; serve_reason_style r; int in_think; const char *head; char fill; } runs[] = {
        {H, TK, 0, "", ' '},      /* before a possible <think> */
        {H, TK, 1, "r", '\n'},    /* newlines that may end the reasoning */
        {H, NR, 0, "text", ' '},  /* white space that may precede <tool_call> */
        {L, NR, 0, "", '\n'},     /* before a possible Llama call */
        {M, NR, 0, "x", '\t'},    /* before a possible [TOOL_CALLS] */
    };
    enum { N = 1 << 18 };
    char *fill = malloc(N);
    assert_non_null(fill);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        memset(fill, runs[i].fill, N);
        serve_parse_cfg cfg = {runs[i].t, runs[i].r};
        serve_parse_opts o = {1, runs[i].in_think, NULL, NULL};
        serve_parse *p = serve_parse_new(&cfg, &o);
        assert_non_null(p);
        clock_t t0 = clock();
        assert_int_equal(serve_parse_feed(p, runs[i].head, strlen(runs[i].head)), 0);
        for (size_t k = 0; k < N; k++) assert_int_equal(serve_parse_feed(p, fill + k, 1), 0);
        assert_int_equal(serve_parse_feed(p, "z", 1), 0);
        assert_int_equal(serve_parse_finish(p), 0);
        double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
        size_t lc, lr;
        serve_parse_content(p, &lc);
        serve_parse_reasoning(p, &lr);
        assert_int_equal(lc + lr, strlen(runs[i].head) + N + 1); /* nothing dropped: text follows */
        if (s > 5.0) fail_msg("run %zu: %.1f s for 256 KiB fed byte by byte (quadratic?)", i, s);
        serve_parse_free(p);
    }
    free(fill);
}

/* ---------------------------------------------------- oracle driver */

/* tests/oracle/t_tool_parse.sh: each stdin line {"tools": NAME,
 * "reasoning": NAME, "tools_on": bool, "in_think": bool, "schema": [...],
 * "text": ...} -> {"content", "reasoning", "calls": [{"id", "name",
 * "arguments"}], "finish", "stream_same"} (stream_same: fed byte by byte,
 * the same). */
static int parse_line(json_t *in, json_t **out)
{
    serve_parse_cfg cfg;
    if (serve_parse_tool_name(json_string_value(json_object_get(in, "tools")), &cfg.tools) ||
        serve_parse_reason_name(json_string_value(json_object_get(in, "reasoning")), &cfg.reasoning))
        return -1;
    json_t *tx = json_object_get(in, "text");
    const char *text = json_string_value(tx);
    size_t len = json_string_length(tx);
    json_t *pr = json_object_get(in, "prompt");
    serve_parse_opts o = {json_is_true(json_object_get(in, "tools_on")),
                          pr ? serve_parse_prompt_in_think(json_string_value(pr), json_string_length(pr))
                             : json_is_true(json_object_get(in, "in_think")),
                          json_object_get(in, "schema"), NULL};
    serve_parse *p = serve_parse_new(&cfg, &o), *q = serve_parse_new(&cfg, &o);
    if (!p || !q || !text) return -1;
    if (serve_parse_feed(p, text, len) || serve_parse_finish(p)) return -1;
    for (size_t i = 0; i < len; i++)
        if (serve_parse_feed(q, text + i, 1)) return -1;
    if (serve_parse_finish(q)) return -1;
    json_t *m = serve_parse_message(p), *mq = serve_parse_message(q);
    int same_stream = json_equal(m, mq);
    json_decref(mq);
    size_t l;
    const char *s = serve_parse_content(p, &l);
    json_t *r = json_object(), *calls = json_array();
    json_object_set_new(r, "content", json_stringn(s, l));
    s = serve_parse_reasoning(p, &l);
    json_object_set_new(r, "reasoning", json_stringn(s, l));
    for (size_t k = 0; k < serve_parse_n_calls(p); k++) {
        s = serve_parse_call_args(p, k, &l);
        json_array_append_new(calls, json_pack("{s:s, s:s, s:s%}", "id", serve_parse_call_id(p, k), "name",
                                               serve_parse_call_name(p, k), "arguments", s, l));
    }
    json_object_set_new(r, "calls", calls);
    json_object_set_new(r, "finish", json_string(serve_parse_finish_reason(p, "stop")));
    json_object_set_new(r, "stream_same", json_boolean(same_stream));
    json_decref(m);
    serve_parse_free(p);
    serve_parse_free(q);
    *out = r;
    return 0;
}

static int driver(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        json_t *in = json_loadb(line, (size_t)got, 0, NULL), *out = NULL;
        if (!in || parse_line(in, &out)) {
            fprintf(stderr, "test_serve_parse --parse: bad case line\n");
            rc = 1;
            out = json_pack("{s:s}", "error", "bad case");
        }
        char *s = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(s ? s : "{}");
        free(s);
        json_decref(in);
        json_decref(out);
    }
    free(line);
    return rc;
}

static int detect_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "test_serve_parse --detect: cannot open %s\n", path); return 1; }
    serve_buf b = {0};
    char tmp[4096];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) serve_buf_put(&b, tmp, k);
    fclose(f);
    serve_parse_cfg c;
    serve_parse_detect(b.p ? b.p : "", b.n, &c);
    printf("%s %s\n", serve_parse_tool_str(c.tools), serve_parse_reason_str(c.reasoning));
    serve_buf_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--parse")) return driver();
    if (argc >= 3 && !strcmp(argv[1], "--detect")) {
        int rc = 0;
        for (int i = 2; i < argc; i++) rc |= detect_file(argv[i]);
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),        cmocka_unit_test(test_splits),  cmocka_unit_test(test_message_json),
        cmocka_unit_test(test_delta_json),   cmocka_unit_test(test_detect_and_names),
        cmocka_unit_test(test_hostile),      cmocka_unit_test(test_linear_time),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) json_decref(schemas[i]);
    return rc;
}
