/*
 * serve_parse.h - a chat model's generated text -> what OpenAI clients
 * expect: `content`, `reasoning_content`, `tool_calls` and the
 * finish_reason "tool_calls" (docs/chat-output.md "Tool calls and
 * reasoning": every rule below is stated there, per convention).
 *
 * The conventions are those of cis2's families' chat templates:
 *
 *   tool parser   SERVE_TOOLS_HERMES       <tool_call>{JSON}</tool_call> and
 *                                          <tool_call><function=NAME><parameter=K>
 *                                          (Qwen3, Qwen3.5, SmolLM3)
 *                 SERVE_TOOLS_LLAMA3_JSON  the whole answer {"name", "parameters"}
 *                                          (Llama-3.1/3.2), <|python_tag|> allowed
 *                 SERVE_TOOLS_MISTRAL      [TOOL_CALLS] [{...}, ...] (Mistral v0.3)
 *                 SERVE_TOOLS_HARMONY      gpt-oss: a message to=functions.NAME
 *   reasoning     SERVE_REASON_THINK       <think>...</think> (Qwen3, SmolLM3)
 *                 SERVE_REASON_HARMONY     gpt-oss's analysis channel
 *
 * chosen from the chat template's text (serve_parse_detect, a table) or
 * by name (serve_parse_tool_name, serve_parse_reason_name: the names of
 * `--tool-parser` and `--reasoning-parser`, vLLM's among them).
 *
 * One parser per generated sequence (a choice).  It is fed the text piece
 * by piece (serve_parse_feed: pieces split anywhere, inside a tag or a
 * UTF-8 sequence) and emits deltas; what may still be the start of a tag,
 * an undecided tool call or an incomplete UTF-8 sequence waits, and
 * serve_parse_finish flushes it.  The deltas' concatenation, per field,
 * is the same for every way of splitting the text: a whole response is
 * the same parser fed the whole text once.
 *
 * Who calls it: the server's chat responses (serve_response.c for whole
 * ones, serve_stream.c for streamed ones), once the hook-up is made; its
 * unit test, tests/unit/test_serve_parse.c.  It calls serve_buf.c,
 * jansson, and the library's UTF-8 decoder (cis2_utf8_unit).
 */
#ifndef CIS2_SERVE_PARSE_H
#define CIS2_SERVE_PARSE_H

#include <jansson.h>
#include <stddef.h>

typedef enum serve_tool_style {
    SERVE_TOOLS_NONE = 0,
    SERVE_TOOLS_HERMES,
    SERVE_TOOLS_LLAMA3_JSON,
    SERVE_TOOLS_MISTRAL,
    SERVE_TOOLS_HARMONY
} serve_tool_style;

typedef enum serve_reason_style {
    SERVE_REASON_NONE = 0,
    SERVE_REASON_THINK,
    SERVE_REASON_HARMONY
} serve_reason_style;

/* A server's choice of conventions (one per model). */
typedef struct serve_parse_cfg {
    serve_tool_style tools;
    serve_reason_style reasoning;
} serve_parse_cfg;

/* The conventions a chat template's text implies (docs/chat-output.md
 * "Which convention"): the first row of each table whose needle the text
 * holds; none, none when no row matches. */
void serve_parse_detect(const char *tmpl, size_t len, serve_parse_cfg *out);
/* The style a --tool-parser / --reasoning-parser NAME means: 0, or -1 for
 * an unknown name. */
int serve_parse_tool_name(const char *name, serve_tool_style *out);
int serve_parse_reason_name(const char *name, serve_reason_style *out);
const char *serve_parse_tool_str(serve_tool_style t);     /* "hermes", ... */
const char *serve_parse_reason_str(serve_reason_style r); /* "think", ... */
/* NULL when cfg is usable, else why not (one line): harmony is one
 * format, so harmony on one side needs harmony or none on the other. */
const char *serve_parse_cfg_check(const serve_parse_cfg *cfg);
/* 1 when the rendered prompt ends (trailing whitespace aside) with
 * `<think>`: the template opened the reasoning (Qwen3.5), so the answer
 * starts inside it; pass it as opts.in_think. */
int serve_parse_prompt_in_think(const char *prompt, size_t len);

/* Per request. */
typedef struct serve_parse_opts {
    int tools_on;           /* the request has tools and tool_choice is not "none":
                             * else tool-call text stays content */
    int in_think;           /* the answer starts inside <think> (serve_parse_prompt_in_think) */
    const json_t *tools;    /* the request's `tools` array, or NULL: the schema's
                             * parameter types for <parameter=K> values (borrowed:
                             * it must outlive the parser) */
    const char *id_prefix;  /* tool call k's id is id_prefix + decimal k (k = 0, 1,
                             * ...); NULL: "call_" (copied) */
} serve_parse_opts;

typedef struct serve_parse serve_parse;

typedef enum serve_delta_kind {
    SERVE_DELTA_CONTENT,    /* text: more `content` */
    SERVE_DELTA_REASONING,  /* text: more `reasoning_content` */
    SERVE_DELTA_TOOL_START, /* tool call `tool` begins: text = its name, id = its id */
    SERVE_DELTA_TOOL_ARGS   /* text: more of tool call `tool`'s arguments */
} serve_delta_kind;

typedef struct serve_parse_delta {
    serve_delta_kind kind;
    size_t tool;            /* TOOL_*: the call's index (0, 1, ...) */
    const char *text;       /* never empty; not NUL-terminated by contract */
    size_t len;
    const char *id;         /* TOOL_START only (NUL-terminated), else NULL */
} serve_parse_delta;

/* NULL on a bad cfg (serve_parse_cfg_check) or no memory; opts NULL: all
 * zero (tools off, ids "call_K"). */
serve_parse *serve_parse_new(const serve_parse_cfg *cfg, const serve_parse_opts *opts);
/* Feeds generated bytes; finish once after the last piece (feeding after
 * it is refused).  0, or -1 when memory ran out (the parser is then
 * unusable: answer 500). */
int serve_parse_feed(serve_parse *p, const char *s, size_t n);
int serve_parse_finish(serve_parse *p);
/* The deltas emitted since the previous take, in order (adjacent ones of
 * one kind and call merged), *n of them; valid until the next feed,
 * finish, take or free.  Taking empties the list.  NULL (*n 0) when no
 * memory. */
const serve_parse_delta *serve_parse_take(serve_parse *p, size_t *n);
/* A chat.completion.chunk's `delta` for deltas d[0..n) (the role is the
 * caller's): "content", "reasoning_content", and "tool_calls" as OpenAI
 * streams them ({index, id, type, function: {name, arguments: ""}} when a
 * call starts, {index, function: {arguments}} for more).  NULL for n = 0
 * or no memory. */
json_t *serve_parse_delta_json(const serve_parse_delta *d, size_t n);

/* The whole parse so far (everything emitted: after finish, the answer). */
const char *serve_parse_content(const serve_parse *p, size_t *len);
const char *serve_parse_reasoning(const serve_parse *p, size_t *len);
size_t serve_parse_n_calls(const serve_parse *p);
/* Call k's id, name and arguments (NUL-terminated; *len their bytes). */
const char *serve_parse_call_id(const serve_parse *p, size_t k);
const char *serve_parse_call_name(const serve_parse *p, size_t k);
const char *serve_parse_call_args(const serve_parse *p, size_t k, size_t *len);
/* The assistant `message` of a whole response: role, content (null when
 * empty and there are tool calls), reasoning_content (when not empty),
 * tool_calls (when any).  NULL when no memory. */
json_t *serve_parse_message(const serve_parse *p);
/* "tool_calls" when the answer holds a tool call and reason is "stop",
 * else reason. */
const char *serve_parse_finish_reason(const serve_parse *p, const char *reason);
void serve_parse_free(serve_parse *p);

#endif /* CIS2_SERVE_PARSE_H */
