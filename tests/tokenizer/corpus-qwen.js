// tests/tokenizer/corpus-qwen.js - the differential corpus for the
// NON-NORMATIVE Qwen2.5 extension (outside CIS-2 v0.3b §3): corpus.js plus
// strings aimed at NFC (decomposed accents, Hangul jamo, combining marks
// out of canonical order, singletons, composition exclusions, non-starter
// decompositions, marks encoded after Unicode 9.0), at the Split regex
// (case-insensitive contractions, \s*[\r\n]+, \s+(?!\S), CR/LF-heavy text)
// and at the added tokens of tests/tokenizer/make-qwen-tok.js.
//   generate(seed) -> array of strings
//   sweep()        -> strings that together put the code points of planes
//                     0, 1 and 14 (and a sample of planes 2, 3) through
//                     NFC and the Split pattern in three contexts
'use strict';
const base = require('./corpus.js');

function rng(seed) {                       // mulberry32, as corpus.js
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

// Combining marks of many classes (ccc in brackets), some after Unicode 9.0.
const MARKS = [0x0300 /*230*/, 0x0301 /*230*/, 0x0302, 0x0303, 0x0308, 0x030A, 0x030C, 0x0323 /*220*/,
    0x0327 /*202*/, 0x0328 /*202*/, 0x0331 /*220*/, 0x0334 /*1*/, 0x0338 /*1*/, 0x0345 /*240*/, 0x031B /*216*/,
    0x05B0 /*10*/, 0x05B4 /*14*/, 0x05BC /*21*/, 0x0651 /*33*/, 0x064B /*27*/, 0x093C /*7*/, 0x094D /*9*/,
    0x0E38 /*103*/, 0x0F71 /*129*/, 0x0F72 /*130*/, 0x0F74 /*132*/, 0x302A /*218*/, 0x302E /*224*/,
    0x1DCE /*214*/, 0x20D2 /*1*/, 0x0315 /*232*/, 0x035C /*233*/, 0x035D /*234*/, 0x0306, 0x0313, 0x0314,
    0x0342, 0x3099 /*8*/, 0x309A, 0x0B3E /*0, composes*/, 0x0CD5 /*0*/, 0x0DCF /*0*/, 0x102E /*0*/,
    0x07FD /*220 since 11.0*/, 0x1DF6 /*232 since 10.0*/, 0x1AB0 /*230 since 7.0*/, 0x0C3C /*7 since 14.0*/,
    0x11930 /*since 13.0: composes with 11935 from 13.0*/, 0x1E94A /*7 since 9.0*/];
const BASES = ['a', 'A', 'e', 'E', 'o', 'u', 'y', 'n', 'c', 's', 'z', 'i', 'I', '\u03B1', '\u03C9', '\u0391',
    '\u0415', '\u0438', '\u05D0', '\u0627', '\u0915', '\u0B47', '\u0CC6', '\u0DD9', '\u1025', '\u304B',
    '\u30AB', '\u1100', '\u1161', '\u11A8', '\uAC00', '\uAC01', '\u0226', '\u00C5', '\u212B', '\u017F',
    '\u{11935}', '\u{11131}', '\u{1D157}', ' ', '1', '!', '\n', "'"];

function generate(seed = 20241130) {
    const r = rng(seed);
    const pick = (a) => a[Math.floor(r() * a.length)];
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    const out = base.generate();
    // 1. NFC: decomposed accents, canonical reordering, singletons,
    //    exclusions, non-starter decompositions, Hangul.
    out.push('e\u0301', 'E\u0301', 'a\u0300', 'n\u0303', 'A\u030A', 'Ame\u0301lie', 'cafe\u0301 na\u0131\u0308ve',
        'a\u0323\u0301', 'a\u0301\u0323', 'e\u0323\u0302', 'e\u0302\u0323', 'o\u031B\u0301', 'o\u0301\u031B',
        'a\u0308\u0304', 'a\u0304\u0308', 'u\u0308\u0301', '\u03B1\u0313\u0300\u0345', '\u03B1\u0345\u0300\u0313',
        '\u1F82', '\u1FB2', '\u212B', '\u2126', '\u212A', '\u0340', '\u0341', '\u0343', '\u0374', '\u037E',
        '\u0387', '\u1FEF', '\u2000', '\u2001', '\u2329', '\u232A', '\uF900', '\uFA10', '\uFAD9', '\u{2F800}',
        '\u{2FA1D}', '\u0958', '\u0915\u093C', '\u09DC', '\u0A33', '\u0F43', '\u0F73', '\u0F75', '\u0F81',
        '\u0344', '\u0F77', '\uFB1D', '\u05D9\u05B4', '\uFB2A', '\u05E9\u05C1', '\u{1D15E}', '\u{1D160}',
        '\u{1D157}\u{1D165}', '\u{1D15F}\u{1D16E}', '\u2ADC', '\u2ADD\u0338', '\u0B47\u0B3E', '\u0B47\u0B57',
        '\u0CC6\u0CD5\u0CD6', '\u0DD9\u0DCF\u0DCA', '\u1025\u102E', '\u{11131}\u{11127}', '\u{11347}\u{1133E}',
        '\u{11935}\u{11930}', '\u304B\u3099', '\u30AB\u3099', '\u3099', '\u309B', 'A\u0338', '=\u0338', '<\u0338',
        '\u1100\u1161', '\u1100\u1161\u11A8', '\uAC00\u11A8', '\uAC01\u11A8', '\u1100\u1100\u1161', '\u1161\u11A8',
        '\u1100', '\u1161', '\u11A8', '\u11A7', '\u11C3', '\u1112\u1175\u11C2', '\u1113\u1161', '\u115F\u1161',
        '\u1100\u1176', '\uA960\u1161', '\u1100\u1161\u0301\u11A8', '\u1100\u0301\u1161', '\uD7A3', '\uD7A4',
        '\u1112\u1161\u11AB\u1100\u1173\u11AF', 'a\u07FD\u0301', 'a\u1DF6\u0301', 'a\u0C3C\u0301', 'a\u1AB0\u0323',
        'a\u0301\u07FD', '\u0041\u030A\u0301', '\u00C5\u0301', 'i\u0307\u0301', '\u0130', 'A\u0300\u0300',
        'a\u0334\u0301', 'a\u0301\u0334', '\u0301', '\u0301a', '\u0301\u0323', ' \u0301', '1\u0301', '!\u0301',
        '\n\u0301', "'\u0301s", "'s\u0301", 'x\u0301'.repeat(50), 'a' + '\u0301\u0323'.repeat(40),
        'a' + '\u0301\u0323\u0334\u0345'.repeat(30), '\u1EC7', 'e\u0323\u0302', 'e\u0302\u0323', 'xe\u0323\u0302y',
        '<|im_start|>e\u0323\u0302<|im_end|>', 'e<|endoftext|>\u0301', '\u0301<|im_end|>', 'A<tool_call>\u030A');
    for (let i = 0; i < 1500; i++) {
        let s = '';
        const n = int(1, 10);
        for (let k = 0; k < n; k++) {
            s += pick(BASES);
            const m = int(0, 4);
            for (let j = 0; j < m; j++) s += cp(pick(MARKS));
        }
        out.push(s);
    }
    // 2. Split: contractions (case-insensitive, U+017F folds to s).
    for (const c of ['s', 'S', '\u017F', 't', 'T', 're', 'RE', 'rE', 'Re', 've', 'VE', 'm', 'M', 'll', 'LL',
        'lL', 'd', 'D', 'x', '\uFB05', '\uFB06', '\u212A', 'K', '\u0131', 'ss', '\u00DF', '\u1E9E'])
        for (const pre of ['', 'it', ' ', '!', '1', "'", '\n', '\u00e9'])
            for (const post of ['', 'a', 'up', ' x', '!', '1', "'s", '\r\n', '\u0301']) out.push(pre + "'" + c + post);
    // 3. CR/LF-heavy text and whitespace runs around newlines.
    const NL = ['\r\n', '\n', '\r', '\r\r\n', '\n\r', '\r\n\r\n', '\n\n\n', ' \n', '\t\n', '\n ', '\u00A0\n',
        '\u2028', '\u0085', '\u000B', '\u000C', ' \r\n ', '  \r\n  ', '\t\r\n\t'];
    const PIECES = ['x', 'Word', ' word', '7', '42', '.', '!!', ' !', '...', '//', '\u00e9', '\u4E2D', '\uD55C',
        "'s", '  ', '\t', ' ', '\u3000', '\u00A0', ' \u00A0x', '<|im_end|>'];
    for (const a of NL) for (const b of PIECES) out.push(a + b, b + a, b + a + b, a + a + b, b + a + ' ' + b);
    for (let i = 0; i < 1500; i++) {
        let s = '';
        const n = int(1, 16);
        for (let k = 0; k < n; k++) s += r() < 0.4 ? pick(NL) : pick(PIECES);
        out.push(s);
    }
    out.push('line one\r\nline two\r\n\r\n  indented\r\n\ttabbed\r\n', 'a.\r\n\r\nb', 'x;\n\n\ny', ' ?\r\n',
        'def f():\r\n    return 1\r\n\r\n\r\n', '\r\n'.repeat(500) + 'x', ' \r\n'.repeat(300), 'a!\r\n'.repeat(300));
    return out;
}

// Code points through NFC and the Split pattern in three contexts:
// 'a' X U+0301 (X's combining class, composition with a starter, blocking),
// X U+0301 (X's decomposition: singletons, exclusions, non-starters) and
// U+1100 X (Hangul LV).  All of planes 0 and 1, the CJK compatibility
// ideographs and plane 14; every 7th code point of the unified ideographs,
// the Hangul syllables and the rest of planes 2 and 3 (none of them
// decomposes or combines).  Items are joined by '\n' (nothing composes
// with LF, so no composition crosses it).
function sweep() {
    const ctx = [(c) => 'a' + c + '\u0301', (c) => c + '\u0301', (c) => '\u1100' + c];
    const sparse = [[0x3400, 0x4DBF], [0x4E00, 0x9FFF], [0xAC00, 0xD7A3], [0x20000, 0x2F7FF], [0x2FA20, 0x323FF]];
    const out = [];
    for (const f of ctx) {
        let items = [];
        for (const [lo, hi] of [[0, 0x323FF], [0xE0000, 0xE01EF]])
            for (let c = lo; c <= hi; c++) {
                if (c >= 0xD800 && c <= 0xDFFF) continue;
                if (c % 7 && sparse.some(([a, b]) => c >= a && c <= b)) continue;
                items.push(f(cp(c)));
                if (items.length === 2048) { out.push(items.join('\n')); items = []; }
            }
        if (items.length) out.push(items.join('\n'));
    }
    return out;
}

module.exports = { generate, sweep };
