// tests/tokenizer/diff-pretok.js - differential test of cis2's pre-tokenizer
// (the Split regex of a byte-level file, e.g. gpt-oss's o200k pattern,
// docs/tokenizer.md "The o200k pattern") against the oracle's, Hugging
// Face `tokenizers` (npm 0.23.2), through `cis2 tokenize`:
//   node tests/tokenizer/diff-pretok.js CIS2 TOKENIZER_JSON [--sweep]
// A real vocab hides many wrong splits (a token never spans a boundary the
// pattern puts in its training text, so joining two pieces often gives the
// same ids).  So this test writes a variant of the file whose ids show the
// pieces: no added tokens, and a BPE model with ignore_merges and no
// merges whose vocab is the 256 byte symbols and every piece the oracle's
// pre-tokenizer makes of the corpus.  The oracle then encodes each piece as
// one id; cis2 gives the same ids only if it splits the text the same way:
// a piece it splits or joins wrongly is another token, or byte symbols,
// except two or three pieces of one byte symbol each joined, so these
// joined are in the vocab too.  Corpus:
// corpus-families.js's generate(), or with --sweep its code point sweep
// (in parts, a vocab for each).  Prints the first mismatches as the two
// splits and "pretok-diff: N passed, N failed".
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { generate, sweep } = require('./corpus-families.js');

const argv = process.argv.slice(2);
const [cis2, tokPath] = argv;
if (!cis2 || !tokPath) {
    console.error('usage: node diff-pretok.js CIS2 TOKENIZER_JSON [--sweep]');
    process.exit(2);
}

// GPT-2's byte -> symbol table (the ByteLevel alphabet), and back
const b2u = [];
{
    const keep = (b) => (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    let n = 0;
    for (let b = 0; b < 256; b++) b2u[b] = String.fromCodePoint(keep(b) ? b : 256 + n++);
}
const u2b = new Map(b2u.map((u, b) => [u, b]));
const text = (sym) => Buffer.from([...sym].map((u) => u2b.get(u))).toString('utf8');

(async () => {
    const t0 = Date.now();
    const json = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
    const pre = Tokenizer.fromFile(tokPath).getPreTokenizer();
    if (!pre) { console.error('pretok-diff: ' + tokPath + ' has no pre-tokenizer'); process.exit(3); }
    const all = argv.includes('--sweep') ? sweep() : generate((json.added_tokens || []).map((a) => a.content));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cis2_pretok.'));
    const opts = { maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'inherit'] };
    let pass = 0, fail = 0, shown = 0, npieces = 0;
    const esc = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + '...' : s);
    const cut = (s) => (s.length > 400 ? s.slice(0, 400) + '...' : s);
    try {
        const PART = argv.includes('--sweep') ? 40 : 1000;   // strings per variant file (a vocab of at most about 90k)
        for (let at = 0; at < all.length; at += PART) {
            const corpus = all.slice(at, at + PART);
            const vocab = new Map(b2u.map((u, i) => [u, i]));
            const add = (s) => { if (!vocab.has(s)) vocab.set(s, vocab.size); };
            const pieces = corpus.map((s) => pre.preTokenizeString(s).map((p) => p[0]));
            for (const ps of pieces)
                for (let i = 0; i < ps.length; i++) {
                    add(ps[i]);
                    // (the byte symbols are U+0021..U+0143: one UTF-16 unit each)
                    if (i + 1 < ps.length && ps[i].length === 1 && ps[i + 1].length === 1) {
                        add(ps[i] + ps[i + 1]);
                        if (i + 2 < ps.length && ps[i + 2].length === 1) add(ps[i] + ps[i + 1] + ps[i + 2]);
                    }
                }
            const v = { ...json, added_tokens: [] };
            v.model = { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
                vocab: Object.fromEntries(vocab), merges: [] };
            const vf = path.join(dir, 'variant.json');
            fs.writeFileSync(vf, JSON.stringify(v));
            const oracle = Tokenizer.fromFile(vf);
            const want = [];
            for (let i = 0; i < corpus.length; i++) {
                const ids = (await oracle.encode(corpus[i], null, { addSpecialTokens: false })).getIds();
                // each piece one id: else the variant does not show the split
                if (ids.length !== pieces[i].length) throw new Error('the oracle encodes ' + esc(corpus[i]) +
                    ' as ' + ids.length + ' ids but pre-tokenizes it into ' + pieces[i].length + ' pieces');
                want.push(ids);
                npieces += ids.length;
            }
            const got = execFileSync(cis2, ['tokenize', '--tokenizer', vf, '--batch'],
                { ...opts, input: corpus.map((s) => JSON.stringify(s)).join('\n') + '\n' }).toString().split('\n');
            const byId = [...vocab.keys()];
            const show = (ids) => ids.map((id) => JSON.stringify(text(byId[id] ?? '?'))).join(' | ');
            for (let i = 0; i < corpus.length; i++) {
                if (want[i].join(',') === got[i]) { pass++; continue; }
                fail++;
                if (shown++ < 20) {
                    const g = got[i] ? got[i].split(',').map(Number) : [];
                    console.log('MISMATCH on ' + esc(corpus[i]) + '\n  oracle: ' + cut(show(want[i])) +
                        '\n  cis2:   ' + cut(show(g)));
                }
            }
        }
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
    console.log('corpus: ' + all.length + ' strings, ' + npieces + ' pieces; ' + ((Date.now() - t0) / 1000).toFixed(1) + ' s');
    console.log('pretok-diff: ' + pass + ' passed, ' + fail + ' failed');
    process.exit(fail ? 1 : 0);
})().catch((e) => { console.error('pretok-diff: ' + (e.stack || e)); process.exit(10); });
