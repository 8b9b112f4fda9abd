// tests/server/chat_tokens.js TOKENIZER_JSON CHECKS.jsonl - the ids a chat
// prompt must run on (docs/serving.md "Chat templates"), for
// tests/server/t_serve_chat_families.sh: each line {name, want, got,
// got_ids} holds the oracle's rendering of a request (want,
// tests/server/chat_oracle.py) and what the server reported (cis2.prompt,
// cis2.prompt_token_ids).  The text must be the oracle's, and the ids the
// Hugging Face tokenizers oracle's encode(want, add_special_tokens=false):
// transformers' tokenization of a rendered chat, special tokens in the text
// matched as special tokens and none added (so a template that writes the
// BOS gets one BOS even where the tokenizer's post-processor adds one; the
// line says when add_special_tokens=true would have given other ids).
'use strict';
const path = require('path');
const fs = require('fs');
const { Tokenizer } = require(path.join(__dirname, '../tokenizer/node_modules/tokenizers'));

const [tokPath, checks] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
let n = 0, bos = 0;
(async () => {
  for (const line of fs.readFileSync(checks, 'utf8').split('\n').filter((l) => l)) {
    const c = JSON.parse(line);
    if (c.got !== c.want) {
      console.log(`FAIL: ${c.name}: the server's prompt is not the oracle's:\n  server: ${JSON.stringify(c.got)}\n  oracle: ${JSON.stringify(c.want)}`);
      process.exit(1);
    }
    const ids = Array.from((await tok.encode(c.want, null, { addSpecialTokens: false })).getIds());
    const withSpecial = Array.from((await tok.encode(c.want, null, { addSpecialTokens: true })).getIds());
    if (!same(ids, c.got_ids)) {
      console.log(`FAIL: ${c.name}: prompt_token_ids ${JSON.stringify(c.got_ids.slice(0, 12))}... are not the oracle's ` +
        `${JSON.stringify(ids.slice(0, 12))}... (add_special_tokens=true gives ${JSON.stringify(withSpecial.slice(0, 12))}...)`);
      process.exit(1);
    }
    if (!same(ids, withSpecial)) bos++;
    n++;
  }
  console.log(`${n} prompts: the oracle's text and ids` +
    (bos ? ` (${bos} where add_special_tokens=true would add tokens the template already wrote)` : ''));
})().catch((e) => { console.log('FAIL: ' + e.message); process.exit(1); });
