// tests/tokenizer/corpus-families.js - the deterministic differential-test
// corpus for the tokenizers of the model families (Llama-3, Qwen3, Llama-2 /
// Mistral / TinyLlama, Gemma-3; docs/tokenizer.md): several hundred strings
// per tokenizer covering scripts, emoji, whitespace runs, digit runs (the
// \p{N}{1,3} of Llama-3's regex), contractions, the file's own added and
// special tokens (alone, glued, truncated), strings that look like byte
// tokens ("<0x41>", "▁", U+FFFD), code points that have no vocab entry
// (byte_fallback), long words, and a sample of tests/tokenizer/corpus.js.
// Only Unicode scalar values are produced, so every string is valid UTF-8.
// generate(addedContents, seed) -> array of strings.
'use strict';

const { generate: baseCorpus } = require('./corpus.js');

function rng(seed) {                       // mulberry32
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6D2B79F5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const cp = (...c) => String.fromCodePoint(...c);

const WORDS = ['Hello', 'world', 'The', 'quick', 'brown', 'fox', 'naïve', 'café', 'Straße', 'Привет', 'мир',
    'Ελληνικά', 'مرحبا', 'שלום', 'नमस्ते', 'ภาษาไทย', '中文', '你好世界', 'こんにちは', 'カタカナ', '안녕하세요',
    'ქართული', 'Tiếng Việt', 'ﬁnance', 'Ａｂｃ', '𝐁𝐨𝐥𝐝', '𠀀𠀁', 'e\u0301', 'a\u0308\u0323', '\u0915\u094D\u0937',
    'Cafe\u0301', '\u1112\u1161\u11ab', '\u212b', 'ſ', "'ſ",
    '😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷🇩🇪', '❤️', '🧑🏿‍🚀', '#️⃣', '🫠', '🪿',
    "don't", "it's", "we're", "I've", "I'M", "you'll", "HE'D", "We'Re", "y'all", "’s",
    'def f(x):', 'return x**2', '{"a": [1, 2]}', '<div class="x">', 'a->b', '!=', '...', '—', '«»', '¿Qué?',
    'https://example.com/a?b=c&d=e', 'user@example.org', 'C:\\Windows\\', '/usr/bin/env',
    '▁', '▁▁', '▁a', 'a▁b', '<0x41>', '<0x0A>', '<0xZZ>', '<0x+A>', '<unk>', '\uFFFD', '\uFEFF', '\u200D',
    '\u00AD', '\uE000', '\uFFFF', cp(0x10FFFF), cp(0xF0000), cp(0x1D11E), cp(0xE0041), 'Ġ', 'Ċ', 'âĢĿ'];
const DIGITS = ['0', '7', '12', '123', '1234', '12345', '1234567', '3.14159', '1,000,000', '٣٤٥', '١٢٣٤',
    '१२३४', '１２３４', '²³', '½', 'Ⅻ', '①②③④', '𝟘𝟙𝟚𝟛', '2024-06-01', '0x1F', '1e-9', '$5', '-42'];
const WS = [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', ' \n', '\n ', '\u00A0', '\u3000', '\u2009',
    '\u000B', '\u000C', '\u0085', '\u2028', ' '.repeat(7), '\t\t', '\n\n\n', ' \r\n \r\n'];
const PUNCT = ['.', ',', '!', '?', ';', ':', '-', '(', ')', '"', "'", '`', '#', '$', '%', '&', '*', '_',
    '+', '=', '|', '\\', '/', '<', '>', '…', '→', '€'];

function generate(addedContents, seed = 33) {
    const r = rng(seed);
    const pick = (a) => a[Math.floor(r() * a.length)];
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    // the file's added tokens: all of a small list, else a deterministic sample
    const specials = addedContents.length <= 40 ? addedContents.slice()
        : addedContents.filter((_, i) => i < 12 || i % Math.ceil(addedContents.length / 40) === 0);
    const out = [];
    // 1. Edge cases.
    out.push('', ' ', '  ', 'a', ' a', 'a ', '\n', ' \n', 'Hello world', ' Hello world', 'Hello  world',
        'Hello\nworld', 'Hello\r\nworld', 'Once upon a time', 'I am a robot.', '\t\tindented', 'end \n');
    // 2. Words, digits, punctuation and whitespace alone and in contexts.
    for (const w of WORDS) out.push(w, ' ' + w, w + ' ', w + w, '(' + w + ')', w + '123', '1' + w);
    for (const d of DIGITS) out.push(d, ' ' + d, 'a' + d + 'b', d + d, d + ' ' + d);
    for (const p of PUNCT) out.push(p + p + p, ' ' + p + 'x', p + "'s");
    for (const w of WS) out.push(w + 'x', 'x' + w, w + w + 'y', 'a' + w + '1', w + '!', w);
    // 3. The file's added tokens alone, glued, truncated and in text.
    for (const sp of specials) {
        out.push(sp, 'x' + sp, sp + 'x', ' ' + sp + ' ', sp + sp, sp.slice(0, -1), sp.slice(1),
            '\n' + sp + '\n', 'Hello ' + sp + ' world');
    }
    // 4. Random mixtures.
    for (let i = 0; i < 250; i++) {
        let s = '';
        const n = int(1, 14);
        for (let k = 0; k < n; k++) {
            const x = r();
            if (x < 0.45) s += pick(WORDS);
            else if (x < 0.6) s += pick(DIGITS);
            else if (x < 0.7) s += pick(PUNCT);
            else if (x < 0.92) s += pick(WS);
            else if (specials.length) s += pick(specials);
        }
        out.push(s);
    }
    // 5. Long words and runs.
    out.push('a'.repeat(1000), 'ab'.repeat(700), ' '.repeat(500), '1'.repeat(301), '😀'.repeat(100),
        '\n'.repeat(200) + 'x', '▁'.repeat(300), 'Supercalifragilisticexpialidocious'.repeat(20),
        '中'.repeat(400), 'x' + '\u0301'.repeat(200), 'pneumonoultramicroscopicsilicovolcanoconiosis',
        'aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IGFuZCBpdCBnb2VzIG9u'.repeat(5));
    // 6. A sample of the SmolLM2 corpus (scripts, controls, random code points).
    const base = baseCorpus(20240601);
    for (let i = 0; i < base.length; i += 37) out.push(base[i]);
    return out;
}

module.exports = { generate };
