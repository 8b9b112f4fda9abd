// tests/server/tokenize.js BASE TOKENIZER_JSON MAX_MODEL_LEN [KEY] - cis2 serve's
// POST /tokenize and POST /detokenize (docs/serving.md "Tokenizer endpoints")
// against the Hugging Face tokenizers oracle (npm tokenizers, tests/tokenizer),
// for tests/server/t_serve_tokenize.sh:
//   - every string of tests/tokenizer/corpus-families.js's corpus (the file's
//     added tokens alone, glued and in text among them): /tokenize's tokens
//     are the oracle's encode(s, add_special_tokens) for false and true (and
//     the default, true), count their number, max_model_len the server's;
//   - /detokenize of those ids and of random id runs (bytes that are not
//     UTF-8 among them) is the oracle's decode(ids, skip_special_tokens=false);
//   - every added token's text tokenizes to the oracle's id for it (so an eval
//     harness's tokenize(eos_token)[0] is the eos id).
// A string holding a NUL is refused (400), as every prompt holding one is.
'use strict';
const path = require('path');
const fs = require('fs');
const { Tokenizer } = require(path.join(__dirname, '../tokenizer/node_modules/tokenizers'));
const { generate } = require(path.join(__dirname, '../tokenizer/corpus-families.js'));

const [base, tokPath, maxLen, key] = process.argv.slice(2);
if (!base || !tokPath || !maxLen) {
    console.error('usage: node tokenize.js BASE TOKENIZER_JSON MAX_MODEL_LEN [KEY]');
    process.exit(2);
}
const headers = { 'Content-Type': 'application/json' };
if (key) headers.Authorization = 'Bearer ' + key;

function fail(msg) {
    console.log('FAIL: ' + msg);
    process.exit(1);
}

async function post(p, body) {
    const r = await fetch(base + p, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await r.text();
    if (!text.endsWith('\n') || text.indexOf('\n') !== text.length - 1) fail(p + ': the body is not one line: ' + text);
    return { status: r.status, json: JSON.parse(text) };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

(async () => {
    const json = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
    const added = (json.added_tokens || []).map((a) => a.content);
    const corpus = generate(added);
    const oracle = Tokenizer.fromFile(tokPath);
    let n = 0, refused = 0;
    for (const s of corpus) {
        if (s.includes('\u0000')) {
            const r = await post('/tokenize', { prompt: s });
            if (r.status !== 400 || r.json.error.param !== 'prompt') fail('a NUL in a prompt: ' + JSON.stringify(r));
            refused++;
            continue;
        }
        for (const m of [false, true, undefined]) {
            const want = (await oracle.encode(s, null, { addSpecialTokens: m !== false })).getIds();
            const body = m === undefined ? { prompt: s } : { prompt: s, add_special_tokens: m };
            const r = await post('/tokenize', body);
            if (r.status !== 200) fail('/tokenize ' + JSON.stringify(body) + ': ' + r.status + ' ' + JSON.stringify(r.json));
            const g = r.json;
            if (!same(g.tokens, want))
                fail('/tokenize ' + JSON.stringify(body) + ': ' + JSON.stringify(g.tokens) + ', the oracle: ' + JSON.stringify(want));
            if (g.count !== want.length || g.max_model_len !== Number(maxLen) || g.token_strs !== null)
                fail('/tokenize ' + JSON.stringify(body) + ': count/max_model_len/token_strs ' + JSON.stringify(g));
            if (m === false) {
                const d = await post('/detokenize', { tokens: want });
                const wd = await oracle.decode(want, false);
                if (d.status !== 200 || d.json.prompt !== wd)
                    fail('/detokenize ' + JSON.stringify(want) + ': ' + JSON.stringify(d.json) + ', the oracle: ' + JSON.stringify(wd));
            }
            n++;
        }
    }
    // random id runs, bytes cut inside UTF-8 sequences among them
    let seed = 12345;
    const rnd = () => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed / 4294967296; };
    const vocab = oracle.getVocabSize(true);
    for (let i = 0; i < 300; i++) {
        const ids = [];
        for (let k = 1 + Math.floor(rnd() * 8); k > 0; k--) ids.push(Math.floor(rnd() * vocab));
        const d = await post('/detokenize', { tokens: ids });
        const wd = await oracle.decode(ids, false);
        if (d.status !== 200 || d.json.prompt !== wd)
            fail('/detokenize ' + JSON.stringify(ids) + ': ' + JSON.stringify(d.json) + ', the oracle: ' + JSON.stringify(wd));
    }
    // each added token's text is its id
    for (const a of json.added_tokens || []) {
        if (a.content.includes('\u0000')) continue;
        const r = await post('/tokenize', { prompt: a.content, add_special_tokens: false });
        if (!same(r.json.tokens, [a.id]) || oracle.tokenToId(a.content) !== a.id)
            fail('added token ' + JSON.stringify(a.content) + ' (id ' + a.id + '): ' + JSON.stringify(r.json));
    }
    console.log('tokenize.js: ' + n + ' /tokenize requests (' + corpus.length + ' strings, ' + refused +
        ' with a NUL refused), 300 random /detokenize, ' + (json.added_tokens || []).length +
        ' added tokens: all equal the oracle');
})().catch((e) => fail(String(e && e.stack || e)));
