// tests/server/client.js - the official OpenAI Node client (npm `openai`,
// tests/server/package-lock.json) driving `cis2 serve`, for tests/server/t_serve.sh
// and tools/bench-serve.  Unmodified: only baseURL, apiKey and maxRetries 0.
//
//   node client.js concurrent BASE MODEL N OUT   N clients at once, different prompts, lengths and
//                                                parameters (greedy, seeded sampling with top-k/top-p/
//                                                min-p, logprobs, stop ids), every other one streamed:
//                                                a case file OUT/i.json each (below)
//   node client.js choices BASE MODEL OUT        n: 3 seeded, whole and streamed (equal), the same
//                                                seed twice (equal), another seed (different): cases
//   node client.js chat BASE MODEL OUT           chat.completions with logprobs, whole and streamed
//   node client.js stops BASE MODEL OUT          stop rules on tests/server/stopper.py's checkpoint:
//                                                chat ends at <|im_end|>, eos, stop ids, stop strings
//   node client.js stopcut BASE MODEL OUT        stop strings cut from the model's own text (real
//                                                tokenizer): first occurrence, whole and streamed
//   node client.js errors BASE MODEL             the client's error classes for 400/404
//   node client.js refusals BASE MODEL           parameters cis2 will never accept, with the client's
//                                                default retries (maxRetries 2): each a BadRequestError
//                                                (400 unsupported_parameter naming it) at the first
//                                                attempt, fast; prints the request count it made
//   node client.js auth BASE MODEL KEY           401 without/with a wrong key, 200 with KEY
//   node client.js load BASE MODEL C R OUT       C clients x R requests each; OUT/c-r.receipt
//   node client.js bench BASE MODEL C TOKENS S [PARAMS]  C clients looping for S seconds: tokens/s,
//                                                TTFT (PARAMS: JSON added to every request)
//   node client.js join BASE MODEL C L           a prompt of ~L tokens joins C decoding streams
//   node client.js echo BASE MODEL OUT           echo with logprobs (lm-eval's request, max_tokens 0):
//                                                OUT/echo-K.json for t_serve_echo.sh
//   node client.js templates BASE MODEL OUT      chat as OpenAI clients send it, with the checkpoint's
//                                                own template (t_serve_chat_families.sh): plain, tools,
//                                                a tool round (arguments as JSON strings, tool_call_id,
//                                                reasoning_content), chat_template_kwargs (enable_thinking,
//                                                reasoning_effort), each whole and streamed (equal): cases;
//                                                a request the template refuses: OUT/NAME.refused.json
//
// A case file is one choice: {kind, params (the request body as sent, JSON
// text), index (its choice index), text, finish, cis2, logprobs (the OpenAI
// object, a stream's chunks joined)}; tests/server/ref.py compares each with
// `cis2 run` of the same parameters.  Every logprob the client parsed must
// be, as binary32, the bits of cis2.logprob_bits / top_logprob_bits.
'use strict';
const fs = require('fs');
const path = require('path');
const { OpenAI } = require('openai');

const [cmd, base, model] = process.argv.slice(2, 5);
const args = process.argv.slice(5);
const client = (key) => new OpenAI({ baseURL: base + '/v1', apiKey: key || 'unused', maxRetries: 0, timeout: 120000 });

function die(msg) { console.error('FAIL: ' + msg); process.exit(1); }
function check(cond, msg) { if (!cond) die(msg); }

// The hex bits of a number as binary32 (what a logprob decimal stands for).
function f32hex(x) {
  const v = new DataView(new ArrayBuffer(4));
  v.setFloat32(0, x);
  return v.getUint32(0).toString(16).padStart(8, '0');
}

// Joins the logprobs of a stream's chunks (one choice).
function joinLogprobs(acc, lp) {
  if (!lp) return acc;
  if (!acc) return JSON.parse(JSON.stringify(lp));
  for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset', 'content'])
    if (lp[k]) acc[k] = (acc[k] || []).concat(lp[k]);
  return acc;
}

// The OpenAI logprobs object of a choice against its cis2 bits: every value
// the client parsed is, as binary32, the bits the cis2 object gives.
function checkLogprobs(kind, lp, text, x, what) {
  if (!x.logprob_bits) { check(lp === null || lp === undefined, `${what}: logprobs without cis2.logprob_bits`); return; }
  const bits = x.logprob_bits, n = x.generated_token_ids.length, tops = x.top_logprob_bits;
  check(lp && bits.length === n, `${what}: ${bits.length} logprob_bits for ${n} tokens`);
  const nonFinite = (b) => (parseInt(b, 16) & 0x7f800000) === 0x7f800000; // null stands for inf or NaN
  const same = (v, b) => (v === null ? nonFinite(b) : f32hex(v) === b);
  if (kind === 'chat') {
    check(lp.content.length === n, `${what}: ${lp.content.length} logprobs entries for ${n} tokens`);
    lp.content.forEach((e, i) => {
      check(typeof e.token === 'string' && (e.bytes === null || Array.isArray(e.bytes)), `${what}: entry ${i} shape`);
      check(same(e.logprob, bits[i]), `${what}: token ${i}: ${e.logprob} is not ${bits[i]}`);
      const want = tops ? tops[i].map((t) => t.bits) : [];
      check(JSON.stringify(e.top_logprobs.map((t) => f32hex(t.logprob))) === JSON.stringify(want),
        `${what}: token ${i}'s top_logprobs are not ${want}`);
    });
  } else {
    check(lp.tokens.length === n && lp.token_logprobs.length === n && lp.top_logprobs.length === n &&
          lp.text_offset.length === n, `${what}: logprobs arrays are not ${n} long`);
    const cps = [...text].length;
    lp.token_logprobs.forEach((v, i) => check(same(v, bits[i]), `${what}: token ${i}: ${v} is not ${bits[i]}`));
    lp.top_logprobs.forEach((d, i) => {
      const want = new Set(tops ? tops[i].map((t) => t.bits) : []);
      for (const v of Object.values(d)) check(want.has(f32hex(v)), `${what}: token ${i}: alternative ${v} not in ${[...want]}`);
    });
    lp.text_offset.forEach((o, i) => check(o <= cps && (i === 0 || o >= lp.text_offset[i - 1]),
      `${what}: text_offset ${lp.text_offset} (text of ${cps} code points)`));
  }
}

// A completion's choices, streamed or not: [{index, text, finish, cis2, logprobs}].
async function completeAll(c, params) {
  const n = params.n || 1;
  if (!params.stream) {
    const r = await c.completions.create(params);
    check(r.object === 'text_completion' && r.choices.length === n, 'completion shape: ' + JSON.stringify(r).slice(0, 200));
    check(r.usage && r.usage.completion_tokens === r.choices.reduce((a, x) => a + x.cis2.generated_token_ids.length, 0), 'usage');
    return r.choices.map((x) => ({ index: x.index, text: x.text, finish: x.finish_reason, cis2: x.cis2, logprobs: x.logprobs }));
  }
  const s = await c.completions.create({ ...params, stream_options: { include_usage: true } });
  const out = [...Array(n).keys()].map((i) => ({ index: i, text: '', finish: null, cis2: null, logprobs: null }));
  let usage = null, chunks = 0;
  for await (const ch of s) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    for (const x of ch.choices) {
      const o = out[x.index];
      check(o && !o.finish, `a chunk for choice ${x.index} after its end`);
      o.text += x.text;
      o.logprobs = joinLogprobs(o.logprobs, x.logprobs);
      if (x.finish_reason) o.finish = x.finish_reason;
      if (x.cis2) o.cis2 = x.cis2;
    }
  }
  check(usage && out.every((o) => o.cis2 && o.finish), 'stream ended without finish_reason, cis2 or usage');
  out.forEach((o) => { o.chunks = chunks; });
  return out;
}

async function complete(c, params) { return (await completeAll(c, params))[0]; }

// One case file per choice (and the receipt beside it), logprobs checked.
function writeCases(out, name, kind, params, choices) {
  for (const o of choices) {
    const f = choices.length > 1 ? `${name}.${o.index}` : name;
    checkLogprobs(kind, o.logprobs, o.text, o.cis2, f);
    check((o.cis2.finish === 'length') === (o.finish === 'length'), `${f}: finish_reason ${o.finish} for ${o.cis2.finish}`);
    fs.writeFileSync(path.join(out, f + '.receipt'), o.cis2.receipt);
    fs.writeFileSync(path.join(out, f + '.json'), JSON.stringify({ kind, params: JSON.stringify(params), index: o.index,
      text: o.text, finish: o.finish, cis2: o.cis2, logprobs: o.logprobs }));
  }
}

function prompt(i) {
  const words = ['Once upon a time', 'The quick brown fox', 'In a hole in the ground', 'It was a dark night',
    'Call me Ishmael', 'Hello', 'A', 'To be or not to be, that is the question'];
  return words[i % words.length] + ' #' + i + ' ' + 'x'.repeat(i * 2);
}

// The parameters of client i: greedy, greedy with stop strings, seeded
// sampling (top-k; top-p and min-p with logprobs), sampling with stop ids
// and logprobs 0; max_tokens and streaming vary too.
function sampled(i, p) {
  switch (i % 4) {
    case 1: return { ...p, temperature: 0.7, seed: 100 + i, top_k: 40 };
    case 2: return { ...p, temperature: 1.3, top_p: 0.9, min_p: 0.05, seed: 7 * i, logprobs: 3 };
    case 3: return { ...p, temperature: 0.5, seed: i, logprobs: 0, stop_token_ids: [10, 41, 55, 100] };
    default: return i % 8 === 4 ? { ...p, stop: ['))', '\n\n', 'ee', '\x0e\x0e\x0e'], logprobs: 1, stream: i > 8 } : p;
  }
}

async function concurrent() {
  const [n, out] = [parseInt(args[0], 10), args[1]];
  const c = client();
  const jobs = [];
  for (let i = 0; i < n; i++) {
    const p = sampled(i, { model, prompt: prompt(i), max_tokens: 8 + 7 * i, stream: i % 2 === 1 });
    jobs.push(completeAll(c, p).then((r) => writeCases(out, String(i), 'completion', p, r)));
  }
  await Promise.all(jobs);
  console.log(`concurrent: ${n} completions`);
}

// n: 3 seeded: three different samples (sequences 0..2), the same whether
// streamed or not; the same seed again gives the same; another seed differs.
async function choices() {
  const out = args[0];
  const c = client();
  const p = { model, prompt: 'Once upon a time', max_tokens: 24, n: 3, temperature: 1, seed: 42, logprobs: 2 };
  const a = await completeAll(c, p);
  const b = await completeAll(c, { ...p, stream: true });
  const again = await completeAll(c, p);
  const other = await completeAll(c, { ...p, seed: 43 });
  const ids = (r) => JSON.stringify(r.map((o) => o.cis2.generated_token_ids));
  check(ids(a) === ids(b) && ids(a) === ids(again), 'n: 3 with one seed: the runs differ (whole, streamed, again)');
  check(a.map((o) => o.text).join('\0') === b.map((o) => o.text).join('\0'), 'n: 3: the streamed texts differ');
  check(new Set(a.map((o) => JSON.stringify(o.cis2.generated_token_ids))).size === 3, 'n: 3: the three samples are not distinct');
  check(ids(a) !== ids(other), 'seed 42 and 43 give the same samples');
  check(a.every((o, i) => o.index === i && o.cis2.receipt.includes(`\nsequence ${i}\n`)), 'choice i is not sequence i');
  writeCases(out, 'n3', 'completion', p, a);
  writeCases(out, 'n3s', 'completion', { ...p, stream: true }, b);
  console.log('choices: n: 3 = sequences 0..2, whole = streamed = again, another seed differs');
}

// Chat, whole and streamed: the same text, receipt and logprobs.
async function chatBoth(c, params, name, out) {
  const r = await c.chat.completions.create(params);
  check(r.object === 'chat.completion' && r.choices[0].message.role === 'assistant', 'chat shape');
  check(typeof r.choices[0].message.content === 'string', 'chat content');
  const x = r.choices[0].cis2;
  check(x && x.receipt && x.prompt, 'chat cis2 object');
  const s = await c.chat.completions.create({ ...params, stream: true });
  let text = '', role = null, cis2 = null, finish = null, lp = null;
  for await (const ch of s) {
    for (const d of ch.choices) {
      if (d.delta.role) role = d.delta.role;
      if (d.delta.content) text += d.delta.content;
      if (d.finish_reason) finish = d.finish_reason;
      if (d.cis2) cis2 = d.cis2;
      lp = joinLogprobs(lp, d.logprobs);
    }
  }
  check(role === 'assistant' && finish && cis2, 'chat stream: role, finish_reason and cis2');
  check(text === r.choices[0].message.content, `chat stream text ${JSON.stringify(text)} != ${JSON.stringify(r.choices[0].message.content)}`);
  check(cis2.receipt === x.receipt, 'the streamed chat receipt differs from the whole one');
  check(JSON.stringify(lp) === JSON.stringify(r.choices[0].logprobs), 'the streamed chat logprobs differ from the whole ones');
  check(finish === r.choices[0].finish_reason, 'the streamed finish_reason differs');
  writeCases(out, name, 'chat', params, [{ index: 0, text, finish, cis2, logprobs: lp }]);
  return r;
}

async function chat() {
  const out = args[0];
  const c = client();
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi in two words.' }];
  const r = await chatBoth(c, { model, messages, max_tokens: 12 }, 'chat', out);
  check(r.choices[0].logprobs === null, 'chat logprobs without logprobs: true');
  await chatBoth(c, { model, messages, max_tokens: 12, logprobs: true, top_logprobs: 3 }, 'chat-lp', out);
  await chatBoth(c, { model, messages, max_tokens: 12, logprobs: true, temperature: 0.9, top_p: 0.95, seed: 5 }, 'chat-sampled', out);
  // the default system prompt (no system message)
  const d = await c.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  fs.writeFileSync(path.join(out, 'default-system.prompt'), JSON.stringify({ prompt: d.choices[0].cis2.prompt }));
  console.log('chat: whole and streamed agree (text, receipt, logprobs)');
}

// On the stopper checkpoint (tests/server/stopper.py): every step is "A" or
// <|im_end|> (also its eos).
async function stops() {
  const out = args[0];
  const c = client();
  const messages = [{ role: 'user', content: 'Hello' }];
  const r = await chatBoth(c, { model, messages, max_tokens: 30, logprobs: true, top_logprobs: 2 }, 'chat-stop', out);
  const x = r.choices[0].cis2;
  check(r.choices[0].finish_reason === 'stop' && x.finish === 'stop-id', `chat did not stop at <|im_end|>: ${x.finish}`);
  check(x.generated_token_ids.length < 30 && !r.choices[0].message.content.includes('<|im_end|>'), 'chat: <|im_end|> in the content');
  check(r.choices[0].logprobs.content.length === x.generated_token_ids.length, 'chat: the stopping token has no logprobs entry');
  await chatBoth(c, { model, messages, max_tokens: 30, temperature: 0.8, seed: 9 }, 'chat-stop-sampled', out);
  const cases = [
    ['eos', { prompt: 'Once upon a time', stop_at_eos: true }, 'eos'],
    ['stop-id', { prompt: 'Once upon a time', stop_token_ids: [65] }, 'stop-id'],
    // "AAAAA" then <|im_end|>: the occurrence spans two tokens, the text before it stays
    ['stop-string', { prompt: 'Once upon a time', stop: ['zz', 'A<|im_end|>'], logprobs: 1 }, 'stop-string'],
    ['no-stop', { prompt: 'Once upon a time', stop: ['AAB'], stop_token_ids: [66] }, 'length'],
  ];
  for (const [name, extra, want] of cases) {
    for (const stream of [false, true]) {
      const p = { model, max_tokens: want === 'length' ? 4 : 30, ...extra, stream };
      // a stream sends each token as it comes unless it may begin a stop
      // string: how the tokens meet the HTTP thread varies, so try a few times
      for (let k = 0; k < (stream ? 6 : 1); k++) {
        const o = await complete(c, p);
        check(o.cis2.finish === want && o.finish === (want === 'length' ? 'length' : 'stop'),
          `${name}: finish ${o.finish} / ${o.cis2.finish}, expected ${want}`);
        if (want !== 'stop-id') check(o.text === 'AAAA' || want === 'eos', `${name}: text ${JSON.stringify(o.text)}, expected "AAAA"`);
        if (k === 0) writeCases(out, name + (stream ? '-s' : ''), 'completion', p, [o]);
      }
    }
  }
  console.log('stops: chat ends at <|im_end|>; eos, stop ids, stop strings end completions, whole and streamed');
}

// Stop strings cut from the model's own greedy text (the mid checkpoint's
// real tokenizer: tokens of several bytes, some non-ASCII): an occurrence
// that begins inside a token and spans several, a single code point, the
// earliest of several strings, and a near miss (a piece of the text, then a
// byte it never has) whose bytes are held back and then released.  Whole
// and streamed (a few times: how tokens meet the HTTP thread varies), the
// text is exactly the greedy text up to the first occurrence, and `length`
// with all of it for the near miss; ref.py then checks each against
// `cis2 run --stop`.
async function stopcut() {
  const out = args[0];
  const c = client();
  let hits = 0, cases = 0;
  for (const [pi, pr] of ['Once upon a time', 'The quick brown fox', 'Call me Ishmael', 'Hello'].entries()) {
    const base = await complete(c, { model, prompt: pr, max_tokens: 24, logprobs: 0 });
    const T = base.text, cp = [...T];
    if (base.finish !== 'length' || T.includes('\ufffd') || T.includes('\u0001') || cp.length < 12) continue;
    const piece = (a, n) => cp.slice(a, a + n).join('');
    const a = Math.floor(cp.length / 3), b = Math.floor(cp.length / 2), z = cp.length - 4;
    const sets = [
      [piece(a, 4)],                                  // from a third of the way, 4 code points
      [piece(b, 1)],                                  // one code point from the middle
      ['\u0001\u0001', piece(z, 3), piece(a + 1, 5)], // the earliest of several
      [piece(a, 3) + '\u0001'],                       // a near miss: never matches
    ];
    // all but the last byte of the string end a token: those bytes must wait for the next token
    const toks = base.logprobs.tokens, ends = [];
    if (toks.join('') === T) toks.reduce((at, t) => { ends.push(at + t.length); return at + t.length; }, 0);
    const P = ends.find((e) => e >= T.length / 2 && e >= 3 && e < T.length && /^[\x20-\x7e]{4}$/.test(T.slice(e - 3, e + 1)));
    if (P !== undefined) sets.push([T.slice(P - 3, P + 1)]);
    for (const [si, stop] of sets.entries()) {
      const at = Math.min(...stop.map((x) => { const i = T.indexOf(x); return i < 0 ? Infinity : i; }));
      const want = at === Infinity ? T : T.slice(0, at), finish = at === Infinity ? 'length' : 'stop';
      for (const stream of [false, true]) {
        const p = { model, prompt: pr, max_tokens: 24, stop, stream, logprobs: stream ? 1 : null };
        if (!stream) delete p.logprobs;
        for (let k = 0; k < (stream ? 4 : 1); k++) {
          const o = await complete(c, p);
          const what = `prompt ${pi} stops ${JSON.stringify(stop)}${stream ? ' (streamed)' : ''}`;
          check(o.text === want, `${what}: text ${JSON.stringify(o.text)}, expected ${JSON.stringify(want)} of ${JSON.stringify(T)}`);
          check(o.finish === finish && o.cis2.finish === (finish === 'stop' ? 'stop-string' : 'length'),
            `${what}: finish ${o.finish} / ${o.cis2.finish}`);
          if (k === 0) { writeCases(out, `cut-${pi}-${si}${stream ? '-s' : ''}`, 'completion', p, [o]); cases++; }
        }
      }
      if (at !== Infinity) hits++;
    }
  }
  check(hits >= 6, `only ${hits} stop strings cut the text (the greedy texts were too short or not valid UTF-8)`);
  console.log(`stopcut: ${hits} stop strings cut the model's own text at their first occurrence, whole and streamed (${cases} cases)`);
}

async function expectError(p, status, cls, what) {
  try {
    await p;
  } catch (e) {
    check(e instanceof cls, `${what}: expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    check(e.status === status, `${what}: expected status ${status}, got ${e.status}`);
    check(e.error && typeof e.error.message === 'string' && e.error.type, `${what}: no OpenAI error body`);
    return;
  }
  die(`${what}: no error`);
}

async function errors() {
  const c = client();
  await expectError(c.completions.create({ model: 'no-such-model', prompt: 'a', max_tokens: 1 }), 404,
    OpenAI.NotFoundError, 'unknown model');
  await expectError(c.completions.create({ model, prompt: '', max_tokens: 1 }), 400, OpenAI.BadRequestError, 'empty prompt');
  await expectError(c.completions.create({ model, prompt: 'a', max_tokens: 100000 }), 400, OpenAI.BadRequestError,
    'max_tokens beyond the limit');
  await expectError(c.completions.create({ model, prompt: ' a'.repeat(2100), max_tokens: 1 }), 400,
    OpenAI.BadRequestError, 'prompt longer than the context');
  await expectError(c.completions.create({ model, prompt: 'a', max_tokens: 1, temperature: 0.8, top_p: 0 }), 400,
    OpenAI.BadRequestError, 'top_p 0');
  await expectError(c.chat.completions.create({ model, messages: [{ role: 'user', content: 'a' }], logprobs: true,
    top_logprobs: 21 }), 400, OpenAI.BadRequestError, 'top_logprobs 21');
  await expectError(c.completions.create({ model, prompt: 'a', max_tokens: 1, echo: true, stream: true }), 400,
    OpenAI.BadRequestError, 'echo with stream (not implemented: a 4xx, which the client does not retry)');
  // temperature 0 is greedy, 0.8 samples: both served
  const r = await c.completions.create({ model, prompt: 'a', max_tokens: 2, temperature: 0 });
  check(r.choices[0].finish_reason === 'length', 'temperature 0');
  const t = await c.completions.create({ model, prompt: 'a', max_tokens: 2, temperature: 0.8 });
  check(t.choices[0].cis2.receipt.startsWith('CIS-2-RECEIPT ext-sampling-1\n'), 'temperature 0.8: not a sampled receipt');
  const m = await c.models.list();
  check(m.data.length === 1 && m.data[0].id === model, 'models.list');
  console.log('errors: the client raises its own error classes');
}

// docs/serving.md "Errors": what the server will never accept is a 4xx, so the
// client (its default maxRetries, 2, retries every 5xx after 0.375-0.5 s,
// then 0.75-1 s) gives up at once.  Each case: the client's own
// BadRequestError with status 400, code unsupported_parameter and param,
// in less than the retries' 1.125 s.  The exact count is the caller's: the
// server's access log must show one request per case.
async function refusals() {
  const c = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', timeout: 60000 }); // default retries
  check(c.maxRetries === 2, `the client's default maxRetries is ${c.maxRetries}, not 2`);
  const msgs = [{ role: 'user', content: 'a' }];
  const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
  const cases = [
    ['frequency_penalty', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, frequency_penalty: 0.5 })],
    ['presence_penalty', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, presence_penalty: -1 })],
    ['logit_bias', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, logit_bias: { 65: 5 } })],
    ['echo', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, echo: true, stream: true })],
    ['best_of', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, best_of: 3 })],
    ['suffix', () => c.completions.create({ model, prompt: 'a', max_tokens: 1, suffix: 'z' })],
    ['frequency_penalty', () => c.chat.completions.create({ model, messages: msgs, frequency_penalty: 0.5 })],
    ['response_format', () => c.chat.completions.create({ model, messages: msgs, response_format: { type: 'json_object' } })],
    ['tool_choice', () => c.chat.completions.create({ model, messages: msgs, tool_choice: 'required', tools })],
    ['store', () => c.chat.completions.create({ model, messages: msgs, store: true })],
    ['tool_choice', () => c.chat.completions.create({ model, messages: msgs, tools,
      tool_choice: { type: 'function', function: { name: 'f' } } })],
    ['messages[0]', () => c.chat.completions.create({ model, messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] })],
  ];
  for (const [param, make] of cases) { // one at a time, so each one's time is its own
    const t0 = Date.now();
    let e = null;
    try { await make(); } catch (x) { e = x; }
    const ms = Date.now() - t0;
    check(e, `${param}: no error`);
    check(e instanceof OpenAI.BadRequestError && e.status === 400,
      `${param}: expected a BadRequestError (400), got ${e.constructor.name} (${e.status}): ${e.message}`);
    check(e.code === 'unsupported_parameter' && e.param === param && e.type === 'invalid_request_error',
      `${param}: code ${e.code}, param ${e.param}, type ${e.type}`);
    check(ms < 1000, `${param}: refused after ${ms} ms (the client's two retries wait 1.125 s at least)`);
  }
  console.log(`refusals: ${cases.length} requests, each a BadRequestError at its first attempt`);
}

async function auth() {
  const key = args[0];
  await expectError(client('wrong-key').completions.create({ model, prompt: 'a', max_tokens: 1 }), 401,
    OpenAI.AuthenticationError, 'wrong key');
  const r = await client(key).completions.create({ model, prompt: 'a', max_tokens: 1 });
  check(r.choices.length === 1, 'right key');
  console.log('auth: 401 for a wrong key, 200 for the right one');
}

async function load() {
  const [nc, nr, out] = [parseInt(args[0], 10), parseInt(args[1], 10), args[2]];
  const c = client();
  let ok = 0, failed = 0;
  const worker = async (ci) => {
    for (let r = 0; r < nr; r++) {
      const p = { model, prompt: prompt(ci * nr + r).slice(0, 40), max_tokens: 4 + ((ci + r) % 13), stream: (ci + r) % 3 === 0 };
      try {
        const res = await complete(c, p);
        fs.writeFileSync(path.join(out, `${ci}-${r}.receipt`), res.cis2.receipt);
        ok++;
      } catch (e) {
        failed++;
        console.error(`client ${ci} request ${r}: ${e.status || ''} ${e.message}`);
      }
    }
  };
  await Promise.all([...Array(nc).keys()].map(worker));
  console.log(`load: ${ok} ok, ${failed} failed`);
  if (failed) process.exit(1);
}

async function bench() {
  const [nc, tokens, secs] = [parseInt(args[0], 10), parseInt(args[1], 10), parseFloat(args[2])];
  const extra = args[3] ? JSON.parse(args[3]) : {};
  const c = client();
  const end = Date.now() + secs * 1000;
  let total = 0, reqs = 0;
  const ttft = [];
  const t0 = Date.now();
  const worker = async (ci) => {
    let k = 0;
    while (Date.now() < end) {
      const start = Date.now();
      const s = await c.completions.create({ model, prompt: prompt(ci * 1000 + k++).slice(0, 24), max_tokens: tokens,
        stream: true, ...extra });
      let first = true;
      for await (const ch of s) {
        if (first && ch.choices.length && ch.choices[0].text) { ttft.push(Date.now() - start); first = false; }
        for (const x of ch.choices) if (x.cis2) total += x.cis2.generated_token_ids.length;
      }
      reqs++;
    }
  };
  await Promise.all([...Array(nc).keys()].map(worker));
  const el = (Date.now() - t0) / 1000;
  ttft.sort((a, b) => a - b);
  const med = ttft.length ? ttft[Math.floor(ttft.length / 2)] : NaN;
  console.log(JSON.stringify({ clients: nc, requests: reqs, tokens: total, seconds: el, tokens_per_s: total / el,
    ttft_median_ms: med, ttft_p90_ms: ttft.length ? ttft[Math.floor(ttft.length * 0.9)] : NaN }));
}

// C streaming clients decode; after a second one request with a prompt of
// about L tokens joins: the decoders' longest gap between two tokens, and
// the joining request's time to its (one) token.
async function join() {
  const [nc, L] = [parseInt(args[0], 10), parseInt(args[1], 10)];
  const c = client();
  let joinAt = 0, joined = false;
  const gaps = [];
  const decoder = async (ci) => {
    const s = await c.completions.create({ model, prompt: prompt(ci).slice(0, 20), max_tokens: 400, stream: true });
    let last = 0, maxGap = 0, before = [];
    for await (const ch of s) {
      const t = Date.now();
      if (last) {
        if (joinAt && t > joinAt) maxGap = Math.max(maxGap, t - last);
        else before.push(t - last);
      }
      last = t;
      if (joined) { s.controller.abort(); break; }
    }
    before.sort((a, b) => a - b);
    gaps.push({ maxGap, median: before[Math.floor(before.length / 2)] });
  };
  const ds = [...Array(nc).keys()].map(decoder);
  await new Promise((r) => setTimeout(r, 1500));
  joinAt = Date.now();
  const r = await c.completions.create({ model, prompt: ' a'.repeat(L), max_tokens: 1 });
  const ttft = Date.now() - joinAt;
  await new Promise((r2) => setTimeout(r2, 300));
  joined = true;
  await Promise.allSettled(ds);
  const med = gaps.map((g) => g.median).sort((a, b) => a - b)[0];
  const mx = Math.max(...gaps.map((g) => g.maxGap));
  console.log(JSON.stringify({ decoders: nc, prompt_tokens: r.usage.prompt_tokens, join_ms: ttft,
    decoder_gap_median_ms: med, decoder_gap_max_ms: mx }));
}

// echo (docs/sampling.md S11) through the client: lm-evaluation-harness's loglikelihood request
// (max_tokens 1, logprobs 1, echo) and max_tokens 0; the text is the prompt and the completion,
// the first prompt token's logprob and top_logprobs null, every other decimal (as binary32) the
// bits of cis2.prompt_logprob_bits, the rest the non-echo request's.  OUT/echo-K.json: the
// responses, which t_serve_echo.sh compares with `cis2 score`.
async function echo() {
  const c = client();
  const out = args[0];
  const prompts = ['Once upon a time there was', 'The cat sat on the mat'];
  const cases = [{ max_tokens: 1, logprobs: 1, temperature: 0, seed: 1234 }, { max_tokens: 0, logprobs: 2 }];
  for (const [k, p] of cases.entries()) {
    const r = await c.completions.create({ model, prompt: prompts, echo: true, ...p });
    const g = p.max_tokens ? await c.completions.create({ model, prompt: prompts, ...p }) : null;
    check(r.choices.length === prompts.length, `echo ${k}: ${r.choices.length} choices`);
    for (const [i, ch] of r.choices.entries()) {
      const lp = ch.logprobs, x = ch.cis2, n = x.prompt_token_ids.length;
      const gt = g ? g.choices[i].text : '';
      check(ch.index === i && ch.text === prompts[i] + gt, `echo ${k}.${i}: text ${JSON.stringify(ch.text)}`);
      check(lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, `echo ${k}.${i}: first not null`);
      check(lp.tokens.length === n + (g ? g.choices[i].logprobs.tokens.length : 0), `echo ${k}.${i}: tokens`);
      for (let t = 1; t < n; t++) {
        check(f32hex(lp.token_logprobs[t]) === x.prompt_logprob_bits[t], `echo ${k}.${i}: token ${t}'s bits`);
        // the first of alternatives whose strings coincide is kept (serve_logprobs.c)
        const vals = Object.values(lp.top_logprobs[t]).map(f32hex);
        const want = x.prompt_top_logprob_bits[t].map((b) => b.bits);
        check(vals.includes(want[0]) && vals.length <= want.length && vals.every((v) => want.includes(v)),
          `echo ${k}.${i}: token ${t}'s top_logprobs ${vals} against ${want}`);
      }
      if (g) {
        const gl = g.choices[i].logprobs;
        check(JSON.stringify(lp.token_logprobs.slice(n)) === JSON.stringify(gl.token_logprobs) &&
          JSON.stringify(lp.tokens.slice(n)) === JSON.stringify(gl.tokens), `echo ${k}.${i}: generated part`);
      } else {
        check(x.receipt === null && r.usage.completion_tokens === 0, `echo ${k}.${i}: max_tokens 0 generated`);
      }
    }
    fs.writeFileSync(path.join(out, `echo-${k}.json`), JSON.stringify(r));
  }
  console.log(`echo: ${cases.length} requests of ${prompts.length} prompts`);
}

// Chat with the checkpoint's own template: each request whole and
// streamed (chatBoth: the same text, receipt and logprobs) into a case
// file; a 400 from the template's raise_exception (Gemma-3 refuses a tool
// turn, roles that do not alternate) is a BadRequestError at once, its
// message saved for the test to hold against the oracle's.
async function templates() {
  const out = args[0];
  const c = client();
  const weather = { type: 'function', function: { name: 'get_weather', description: 'Get the weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city'] } } };
  const round = [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: '4', reasoning_content: 'Two and two make four.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_7', type: 'function',
      function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' } }] },
    { role: 'tool', tool_call_id: 'call_7', content: '{"temp": 21}' },
  ];
  const hi = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi — héllo 日本 🎉' }];
  const cases = [
    ['plain', { messages: hi }],
    ['tools', { messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: [weather], tool_choice: 'auto' }],
    ['round', { messages: round, tools: [weather] }],
    ['think-on', { messages: hi, chat_template_kwargs: { enable_thinking: true } }],
    ['think-off', { messages: hi, chat_template_kwargs: { enable_thinking: false }, tools: [weather] }],
    ['effort', { messages: hi, chat_template_kwargs: { reasoning_effort: 'high' }, logprobs: true, top_logprobs: 2 }],
  ];
  let done = 0, refused = 0;
  for (const [name, p] of cases) {
    const params = { model, max_tokens: 6, ...p };
    try {
      await chatBoth(c, params, name, out);
      done++;
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.code === 'chat_template_refused' &&
        e.param === 'messages', `${name}: ${e.constructor.name} ${e.status} ${e.code}: ${e.message}`);
      fs.writeFileSync(path.join(out, name + '.refused.json'), JSON.stringify({ params: JSON.stringify(params),
        message: e.error && e.error.message }));
      refused++;
    }
  }
  console.log(`templates: ${done} chats whole and streamed alike, ${refused} refused by the template`);
}

const cmds = { concurrent, choices, chat, stops, stopcut, errors, refusals, auth, load, bench, join, echo, templates };
if (!cmds[cmd]) die('unknown command ' + cmd);
cmds[cmd]().catch((e) => die(`${cmd}: ${e.status || ''} ${e.message}`));
