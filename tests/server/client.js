// tests/server/client.js - the official OpenAI Node client (npm `openai`,
// tests/server/package-lock.json) driving `cis2 serve`, for tests/t_serve.sh
// and tools/bench-serve.  Unmodified: only baseURL, apiKey and maxRetries 0.
//
//   node client.js concurrent BASE MODEL N OUT   N clients at once, different prompts and
//                                                lengths, every other one streamed; OUT/i.receipt,
//                                                OUT/i.json {prompt, max_tokens, text, stream}
//   node client.js chat BASE MODEL OUT           chat.completions, whole and streamed
//   node client.js errors BASE MODEL             the client's error classes for 400/404/501
//   node client.js auth BASE MODEL KEY           401 without/with a wrong key, 200 with KEY
//   node client.js load BASE MODEL C R OUT       C clients x R requests each; OUT/c-r.receipt
//   node client.js bench BASE MODEL C TOKENS S   C clients looping for S seconds: tokens/s, TTFT
//   node client.js join BASE MODEL C L           a prompt of ~L tokens joins C decoding streams
'use strict';
const fs = require('fs');
const path = require('path');
const { OpenAI } = require('openai');

const [cmd, base, model] = process.argv.slice(2, 5);
const args = process.argv.slice(5);
const client = (key) => new OpenAI({ baseURL: base + '/v1', apiKey: key || 'unused', maxRetries: 0, timeout: 120000 });

function die(msg) { console.error('FAIL: ' + msg); process.exit(1); }
function check(cond, msg) { if (!cond) die(msg); }

// A completion's parts, streamed or not: text, finish_reason, cis2 object.
async function complete(c, params) {
  if (!params.stream) {
    const r = await c.completions.create(params);
    check(r.object === 'text_completion' && r.choices.length === 1, 'completion shape: ' + JSON.stringify(r).slice(0, 200));
    check(r.usage && r.usage.completion_tokens === r.choices[0].cis2.generated_token_ids.length, 'usage');
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, cis2: r.choices[0].cis2 };
  }
  const s = await c.completions.create({ ...params, stream_options: { include_usage: true } });
  let text = '', finish = null, cis2 = null, usage = null, chunks = 0;
  for await (const ch of s) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    for (const x of ch.choices) {
      text += x.text;
      if (x.finish_reason) finish = x.finish_reason;
      if (x.cis2) cis2 = x.cis2;
    }
  }
  check(cis2 && finish && usage, 'stream ended without finish_reason, cis2 or usage');
  return { text, finish, cis2, chunks };
}

function prompt(i) {
  const words = ['Once upon a time', 'The quick brown fox', 'In a hole in the ground', 'It was a dark night',
    'Call me Ishmael', 'Hello', 'A', 'To be or not to be, that is the question'];
  return words[i % words.length] + ' #' + i + ' ' + 'x'.repeat(i * 2);
}

async function concurrent() {
  const [n, out] = [parseInt(args[0], 10), args[1]];
  const c = client();
  const jobs = [];
  for (let i = 0; i < n; i++) {
    const p = { model, prompt: prompt(i), max_tokens: 8 + 7 * i, stream: i % 2 === 1 };
    jobs.push(complete(c, p).then((r) => {
      fs.writeFileSync(path.join(out, i + '.receipt'), r.cis2.receipt);
      fs.writeFileSync(path.join(out, i + '.json'), JSON.stringify({ prompt: p.prompt, max_tokens: p.max_tokens,
        text: r.text, stream: p.stream, finish: r.finish }));
    }));
  }
  await Promise.all(jobs);
  console.log(`concurrent: ${n} completions`);
}

async function chat() {
  const out = args[0];
  const c = client();
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi in two words.' }];
  const r = await c.chat.completions.create({ model, messages, max_tokens: 12 });
  check(r.object === 'chat.completion' && r.choices[0].message.role === 'assistant', 'chat shape');
  check(typeof r.choices[0].message.content === 'string', 'chat content');
  const x = r.choices[0].cis2;
  check(x && x.receipt && x.prompt, 'chat cis2 object');
  fs.writeFileSync(path.join(out, 'chat.receipt'), x.receipt);
  fs.writeFileSync(path.join(out, 'chat.json'), JSON.stringify({ prompt: x.prompt, text: r.choices[0].message.content,
    max_tokens: 12 }));
  const s = await c.chat.completions.create({ model, messages, max_tokens: 12, stream: true });
  let text = '', role = null, cis2 = null, finish = null;
  for await (const ch of s) {
    for (const d of ch.choices) {
      if (d.delta.role) role = d.delta.role;
      if (d.delta.content) text += d.delta.content;
      if (d.finish_reason) finish = d.finish_reason;
      if (d.cis2) cis2 = d.cis2;
    }
  }
  check(role === 'assistant' && finish && cis2, 'chat stream: role, finish_reason and cis2');
  check(text === r.choices[0].message.content, `chat stream text ${JSON.stringify(text)} != ${JSON.stringify(r.choices[0].message.content)}`);
  check(cis2.receipt === x.receipt, 'the streamed chat receipt differs from the whole one');
  // the default system prompt (no system message)
  const d = await c.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  fs.writeFileSync(path.join(out, 'chat-default.json'), JSON.stringify({ prompt: d.choices[0].cis2.prompt }));
  console.log('chat: whole and streamed agree');
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
  await expectError(c.completions.create({ model, prompt: 'a', max_tokens: 1, temperature: 0.8 }), 501,
    OpenAI.APIError, 'sampling (not in this build)');
  // temperature 0 is greedy: served
  const r = await c.completions.create({ model, prompt: 'a', max_tokens: 2, temperature: 0 });
  check(r.choices[0].finish_reason === 'length', 'temperature 0');
  const m = await c.models.list();
  check(m.data.length === 1 && m.data[0].id === model, 'models.list');
  console.log('errors: the client raises its own error classes');
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
        stream: true });
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

const cmds = { concurrent, chat, errors, auth, load, bench, join };
if (!cmds[cmd]) die('unknown command ' + cmd);
cmds[cmd]().catch((e) => die(`${cmd}: ${e.status || ''} ${e.message}`));
