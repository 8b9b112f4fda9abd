// tests/tokenizer/make-qwen-tok.js - writes a synthetic tokenizer.json of
// Qwen2.5's shape (NON-NORMATIVE extension, outside CIS-2 v0.3b §3):
// normalizer NFC; pre_tokenizer Sequence [Split(Qwen regex, Isolated),
// ByteLevel(use_regex=false)]; post_processor and decoder ByteLevel; model
// BPE over the 256 byte symbols (ids 0..255 in GPT-2 bytes_to_unicode
// order, as Qwen2.5's vocab starts) plus NMERGES merges learned here by
// plain BPE training on a fixed text, so that merges fire on the corpus;
// then added tokens: <|endoftext|>, <|im_start|>, <|im_end|> (special,
// normalized=false, as Qwen2.5's), <tool_call> (special=false,
// normalized=false, as Qwen2.5's) and one normalized=true token U+1EC7
// (not in Qwen2.5: it exercises matching after NFC, e.g. of e U+0323 U+0302).  Deterministic; every id is
// < 640 (cis2 synth --shape tiny-qwen's vocab).
//   node tests/tokenizer/make-qwen-tok.js OUT.json
'use strict';
const fs = require('fs');
const { generate } = require('./corpus.js');

const NMERGES = 376;
const REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// A JavaScript rendering of REGEX, for training only (word boundaries need
// not be exact there; the test compares cis2 with the oracle).
const JS_SPLIT = /'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

function bytesToUnicode() {                  // GPT-2's, in its order
    const bs = [];
    for (let b = 0x21; b <= 0x7E; b++) bs.push(b);
    for (let b = 0xA1; b <= 0xAC; b++) bs.push(b);
    for (let b = 0xAE; b <= 0xFF; b++) bs.push(b);
    const cs = bs.slice();
    let n = 0;
    for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
    return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
}

const TRAIN = [
    'Once upon a time, there was a little girl who lived in a village near the forest. ',
    "She didn't know what the world's largest tree looked like, but she'd heard they're tall.\r\n",
    'The quick brown fox jumps over the lazy dog.\r\n\r\nThe end.\r\n',
    'def main():\r\n    return 42\r\n\r\nif __name__ == "__main__":\r\n    main()\r\n',
    'Café, naïve, résumé, Ångström, Straße, 한국어 텍스트, 안녕하세요, 中文文本, 日本語のテキスト. ',
    'Hello World! HELLO WORLD! hello world? I\'M HERE, YOU\'LL SEE, WE\'VE DONE IT.\n',
];

function train() {
    const text = TRAIN.join('').repeat(20) + generate().slice(0, 3000).join('\n');
    const b2u = new Map(bytesToUnicode());
    const words = new Map();
    for (const m of text.normalize('NFC').matchAll(JS_SPLIT)) {
        const w = [...Buffer.from(m[0], 'utf8')].map((b) => b2u.get(b)).join('\u0000');
        words.set(w, (words.get(w) || 0) + 1);
    }
    let ws = [...words].map(([w, n]) => [w.split('\u0000'), n]);
    const merges = [];
    for (let it = 0; it < NMERGES; it++) {
        const cnt = new Map();
        for (const [syms, n] of ws)
            for (let i = 0; i + 1 < syms.length; i++) {
                const k = syms[i] + ' ' + syms[i + 1];
                cnt.set(k, (cnt.get(k) || 0) + n);
            }
        let best = null, bn = 0;
        for (const [k, n] of cnt) if (n > bn || (n === bn && k < best)) { best = k; bn = n; }
        if (!best) break;
        merges.push(best);
        const [a, b] = best.split(' ');
        ws = ws.map(([syms, n]) => {
            const o = [];
            for (let i = 0; i < syms.length; i++) {
                if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) { o.push(a + b); i++; } else o.push(syms[i]);
            }
            return [o, n];
        });
    }
    return merges;
}

const out = process.argv[2];
if (!out) { console.error('usage: node make-qwen-tok.js OUT.json'); process.exit(2); }
const vocab = {};
bytesToUnicode().forEach(([, c], i) => { vocab[c] = i; });
let next = 256;
const merges = train();
for (const m of merges) {
    const tok = m.replace(' ', '');
    if (!(tok in vocab)) vocab[tok] = next++;
}
const added = [['<|endoftext|>', true, false], ['<|im_start|>', true, false], ['<|im_end|>', true, false],
    ['<tool_call>', false, false], ['\u1EC7', false, true]]
    .map(([content, special, normalized]) => ({
        id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized, special,
    }));
if (next > 640) throw new Error('vocab too large: ' + next);
const bl = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
const tok = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
            { type: 'Split', pattern: { Regex: REGEX }, behavior: 'Isolated', invert: false },
            { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
        ],
    },
    post_processor: bl,
    decoder: bl,
    model: {
        type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
        fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges,
    },
};
fs.writeFileSync(out, JSON.stringify(tok, null, 2) + '\n');
console.log('make-qwen-tok: ' + Object.keys(vocab).length + ' vocab, ' + merges.length + ' merges, ' +
    added.length + ' added tokens -> ' + out);
