// tests/tokenizer/diff.js - differential test of cis2's tokenizer against
// the oracle, Hugging Face `tokenizers` (npm 0.23.2, the same Rust library
// as the reference's crate 0.23.1; CIS-2 §3.1.2, FACTS §2).
//   node tests/tokenizer/diff.js CIS2_BINARY TOKENIZER_JSON [--ext] [--corpus qwen|sweep] [--corpus-file F]
// --ext passes --tokenizer-ext to cis2 (the NON-NORMATIVE Qwen2.5 shape);
// --corpus qwen / sweep use corpus-qwen.js's generate() / sweep();
// --corpus-file F a JSON array of strings (make-added-tok.js).  With a
// normalizer, the round trip (c) expects the oracle normalizer's output
// (strings holding an added token's content are checked against the
// oracle's decode only, since the normalizer runs between them).
// (a) encode: cis2's ids must equal the oracle's encode(x, addSpecialTokens
//     = false) on every corpus string (corpus.js);
// (c) decode: cis2's detokenize of those ids must equal x with the bytes
//     that have no single-byte token removed (computed here from the vocab
//     with an independent byte->unicode map), rendered lossily as UTF-8 -
//     and must equal the oracle's own decode.
// Prints the first mismatches and "tokenizer-diff: N passed, N failed".
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const { generate } = require('./corpus.js');

const argv = process.argv.slice(2);
const [cis2, tokPath] = argv;
if (!cis2 || !tokPath) { console.error('usage: node diff.js CIS2 TOKENIZER_JSON [--ext] [--corpus qwen|sweep]'); process.exit(2); }
const ext = argv.includes('--ext') ? ['--tokenizer-ext'] : [];
const corpusName = argv.includes('--corpus') ? argv[argv.indexOf('--corpus') + 1] : 'base';
const corpusFile = argv.includes('--corpus-file') ? argv[argv.indexOf('--corpus-file') + 1] : null;

// GPT-2 bytes_to_unicode, written independently of src/tokenizer.c.
function byteToChar() {
    const bs = [];
    for (let b = 0x21; b <= 0x7E; b++) bs.push(b);
    for (let b = 0xA1; b <= 0xAC; b++) bs.push(b);
    for (let b = 0xAE; b <= 0xFF; b++) bs.push(b);
    const cs = bs.slice();
    let n = 0;
    for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
    const m = new Array(256);
    bs.forEach((b, i) => { m[b] = String.fromCodePoint(cs[i]); });
    return m;
}

(async () => {
    const t0 = Date.now();
    const q = corpusName === 'base' ? null : require('./corpus-qwen.js');
    const corpus = corpusFile ? JSON.parse(fs.readFileSync(corpusFile, 'utf8'))
        : !q ? generate() : corpusName === 'sweep' ? q.sweep() : q.generate();
    const json = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
    let normalize = (x) => x;
    if (json.normalizer) {
        if (json.normalizer.type !== 'NFC') throw new Error('diff.js knows only the NFC normalizer');
        const n = require('tokenizers').nfcNormalizer();
        normalize = (x) => n.normalizeString(x);
    }
    const addedContents = (json.added_tokens || []).map((a) => a.content);
    const b2c = byteToChar();
    // An added token made only of byte-map characters decodes through the
    // map (the reference's ByteLevel decoder): "é" becomes the byte 0xE9,
    // not itself, so strings holding one do not round-trip; they are
    // checked against the oracle's decode only.
    const c2b = new Map(b2c.map((c, b) => [c, b]));
    const remapped = addedContents.filter((a) => {
        const cs = [...a];
        return cs.every((c) => c2b.has(c)) && Buffer.compare(Buffer.from(cs.map((c) => c2b.get(c))), Buffer.from(a, 'utf8')) !== 0;
    });
    const hasTok = b2c.map((c) => Object.prototype.hasOwnProperty.call(json.model.vocab, c));

    const oracle = Tokenizer.fromFile(tokPath);
    const want = [];
    for (const s of corpus) want.push((await oracle.encode(s, null, { addSpecialTokens: false })).getIds());
    const oracleDec = [];
    for (const ids of want) oracleDec.push(await oracle.decode(ids, false));

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cis2-tokdiff-'));
    const inFile = path.join(dir, 'corpus.jsonl');
    fs.writeFileSync(inFile, corpus.map((s) => JSON.stringify(s)).join('\n') + '\n');
    const opts = { maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'inherit'] };
    const got = execFileSync(cis2, ['tokenize', '--tokenizer', tokPath, '--batch', ...ext],
        { ...opts, input: fs.readFileSync(inFile) }).toString().split('\n');
    const idsFile = want.map((ids) => ids.join(',')).join('\n') + '\n';
    const dec = execFileSync(cis2, ['detokenize', '--tokenizer', tokPath, '--batch', ...ext],
        { ...opts, input: idsFile }).toString().split('\n');
    fs.rmSync(dir, { recursive: true, force: true });

    const esc = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + '...' : s);
    const td = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
    let pass = 0, fail = 0, shown = 0;
    const report = (what, s, a, b) => {
        fail++;
        const cut = (x) => (String(x).length > 300 ? String(x).slice(0, 300) + '...' : x);
        if (shown++ < 20) console.log('MISMATCH ' + what + ' on ' + esc(s) + '\n  oracle: ' + cut(a) + '\n  cis2:   ' + cut(b));
    };
    for (let i = 0; i < corpus.length; i++) {
        const s = corpus[i];
        const w = want[i].join(','), g = got[i];
        if (w !== g) { report('encode', s, w, g); continue; }
        // (c) round trip, except for the dropped bytes (and normalization).
        const pieces = (json.normalizer && addedContents.some((a) => s.includes(a))) || remapped.some((a) => s.includes(a));
        const bytes = Buffer.from(normalize(s), 'utf8').filter((b) => hasTok[b]);
        const expect = td.decode(bytes);
        let d;
        try { d = JSON.parse(dec[i]); } catch (e) { report('decode', s, JSON.stringify(expect), dec[i]); continue; }
        if (!pieces && d !== expect) { report('decode vs input', s, JSON.stringify(expect), JSON.stringify(d)); continue; }
        if (d !== oracleDec[i]) { report('decode vs oracle', s, JSON.stringify(oracleDec[i]), JSON.stringify(d)); continue; }
        pass++;
    }
    const nTok = want.reduce((a, x) => a + x.length, 0);
    console.log('corpus: ' + corpus.length + ' strings, ' + nTok + ' tokens; ' + ((Date.now() - t0) / 1000).toFixed(1) + ' s');
    console.log('tokenizer-diff: ' + pass + ' passed, ' + fail + ' failed');
    process.exit(fail ? 1 : 0);
})().catch((e) => { console.error('tokenizer-diff: ' + (e.stack || e)); process.exit(10); });
