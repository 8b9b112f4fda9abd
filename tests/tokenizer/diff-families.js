// tests/tokenizer/diff-families.js - differential test of cis2's tokenizer
// against the oracle, Hugging Face `tokenizers` (npm 0.23.2), on the real
// tokenizer.json of a model family (docs/tokenizer.md):
//   node tests/tokenizer/diff-families.js CIS2 TOKENIZER_JSON [--sha256 HEX] [--ext] [--no-special]
//       [--corpus-file F]
// --sha256: the file must have this sha256 (SOURCES.md), else exit 3;
// --ext passes --tokenizer-ext to cis2; --no-special skips the
// --add-special-tokens mode; --corpus-file adds the strings of F (a JSON
// array, e.g. make-added-family.js's).  On every string of
// corpus-families.js:
// (a) cis2 tokenize's ids must equal the oracle's encode(x, addSpecialTokens
//     = false), and with --add-special-tokens its encode(x, true);
// (b) cis2 detokenize of the oracle's ids (both modes) must equal the
//     oracle's decode(ids, skipSpecialTokens = false).
// Prints the first mismatches and "tokenizer-diff: N passed, N failed".
'use strict';
const { execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const { generate } = require('./corpus-families.js');

const argv = process.argv.slice(2);
const [cis2, tokPath] = argv;
if (!cis2 || !tokPath) {
    console.error('usage: node diff-families.js CIS2 TOKENIZER_JSON [--sha256 HEX] [--ext] [--no-special]');
    process.exit(2);
}
const ext = argv.includes('--ext') ? ['--tokenizer-ext'] : [];
const special = !argv.includes('--no-special');
const wantSha = argv.includes('--sha256') ? argv[argv.indexOf('--sha256') + 1] : null;
const corpusFile = argv.includes('--corpus-file') ? argv[argv.indexOf('--corpus-file') + 1] : null;

(async () => {
    const t0 = Date.now();
    const bytes = fs.readFileSync(tokPath);
    if (wantSha) {
        const sha = crypto.createHash('sha256').update(bytes).digest('hex');
        if (sha !== wantSha) {
            console.error('tokenizer-diff: ' + tokPath + ' has sha256 ' + sha + ', SOURCES.md says ' + wantSha);
            process.exit(3);
        }
    }
    const json = JSON.parse(bytes.toString('utf8'));
    const corpus = generate((json.added_tokens || []).map((a) => a.content));
    if (corpusFile) corpus.push(...JSON.parse(fs.readFileSync(corpusFile, 'utf8')));
    const oracle = Tokenizer.fromFile(tokPath);
    const modes = special ? [false, true] : [false];
    const want = {}, wantDec = {};
    for (const m of modes) {
        want[m] = [];
        wantDec[m] = [];
        for (const s of corpus) {
            const ids = (await oracle.encode(s, null, { addSpecialTokens: m })).getIds();
            want[m].push(ids);
            wantDec[m].push(await oracle.decode(ids, false));
        }
    }
    const opts = { maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'inherit'] };
    const input = corpus.map((s) => JSON.stringify(s)).join('\n') + '\n';
    const got = {}, dec = {};
    for (const m of modes) {
        const flag = m ? ['--add-special-tokens'] : [];
        got[m] = execFileSync(cis2, ['tokenize', '--tokenizer', tokPath, '--batch', ...flag, ...ext],
            { ...opts, input }).toString().split('\n');
        dec[m] = execFileSync(cis2, ['detokenize', '--tokenizer', tokPath, '--batch', ...ext],
            { ...opts, input: want[m].map((ids) => ids.join(',')).join('\n') + '\n' }).toString().split('\n');
    }
    const esc = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + '...' : s);
    const cut = (x) => (String(x).length > 300 ? String(x).slice(0, 300) + '...' : x);
    let pass = 0, fail = 0, shown = 0;
    const report = (what, s, a, b) => {
        fail++;
        if (shown++ < 20) console.log('MISMATCH ' + what + ' on ' + esc(s) + '\n  oracle: ' + cut(a) + '\n  cis2:   ' + cut(b));
    };
    for (let i = 0; i < corpus.length; i++) {
        let ok = true;
        for (const m of modes) {
            const w = want[m][i].join(','), g = got[m][i];
            if (w !== g) { report('encode(add_special_tokens=' + m + ')', corpus[i], w, g); ok = false; break; }
            let d;
            try { d = JSON.parse(dec[m][i]); } catch (e) { d = dec[m][i]; }
            if (d !== wantDec[m][i]) {
                report('decode(add_special_tokens=' + m + ')', corpus[i], JSON.stringify(wantDec[m][i]), JSON.stringify(d));
                ok = false;
                break;
            }
        }
        if (ok) pass++;
    }
    const nTok = want[false].reduce((a, x) => a + x.length, 0);
    console.log('corpus: ' + corpus.length + ' strings, ' + nTok + ' tokens; ' + ((Date.now() - t0) / 1000).toFixed(1) + ' s');
    console.log('tokenizer-diff: ' + pass + ' passed, ' + fail + ' failed');
    process.exit(fail ? 1 : 0);
})().catch((e) => { console.error('tokenizer-diff: ' + (e.stack || e)); process.exit(10); });
