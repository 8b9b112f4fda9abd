// tests/tokenizer/corpus.js - the deterministic differential-test corpus for
// the tokenizer (CIS-2 §3.1, FACTS §2): several thousand strings covering
// many scripts, emoji and ZWJ sequences, combining marks, every ASCII
// control, whitespace runs of every kind before letters/digits/punctuation/
// end, contractions in all cases, digits of many scripts, the special-token
// strings alone and glued, long inputs and random valid UTF-8.
// Only Unicode scalar values are produced (no lone surrogates), so every
// string is valid UTF-8.  generate(seed) -> array of strings.
'use strict';

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
const range = (lo, hi) => { const r = []; for (let c = lo; c <= hi; c++) r.push(c); return r; };

// White_Space (FACTS §2) plus look-alikes that are not \s.
const WS = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, ...range(0x2000, 0x200A),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000].map((c) => cp(c));
const NOT_WS = [0x1C, 0x1D, 0x1E, 0x1F, 0x200B, 0x180E, 0xFEFF, 0x2060].map((c) => cp(c));
const SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<repo_name>', '<reponame>',
    '<file_sep>', '<filename>', '<gh_stars>', '<issue_start>', '<issue_comment>', '<issue_closed>',
    '<jupyter_start>', '<jupyter_text>', '<jupyter_code>', '<jupyter_output>', '<jupyter_script>',
    '<empty_output>'];
const WORDS = [
    'Once', 'upon', 'a', 'time', 'hello', 'World', 'THE', 'naïve', 'café', 'Straße', 'œuvre',
    'Ελληνικά', 'καλημέρα', 'Привет', 'мир', 'Україна', 'مرحبا', 'العربية', 'שלום', 'עברית',
    'नमस्ते', 'हिन्दी', 'ภาษาไทย', 'สวัสดี', '中文', '你好世界', '日本語', 'こんにちは', 'カタカナ',
    '한국어', '안녕하세요', 'ქართული', 'Հայերեն', 'አማርኛ', 'தமிழ்', 'বাংলা', 'ગુજરાતી', 'ಕನ್ನಡ',
    'മലയാളം', 'සිංහල', 'ລາວ', 'ខ្មែរ', 'မြန်မာ', 'བོད་', 'ᠮᠣᠩᠭᠣᠯ', 'ꦗꦮ', 'Tiếng Việt', 'Türkçe',
    'Ǆemal', 'ǅ', 'ﬁnance', 'Ａｂｃ', 'ｶﾀｶﾅ', '𝐁𝐨𝐥𝐝', '𝔉𝔯𝔞𝔨', '𐌰𐌱𐌲', '𓀀𓀁', '𠀀𠀁', 'ℌℍ',
    'e\u0301', 'a\u0308\u0323', 'Z\u0351\u0352\u0353\u0354alg\u0300\u0301o', '\u0915\u094D\u0937',
    '😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷🇩🇪', '❤️', '☃', '✈︎', '🧑🏿‍🚀', '#️⃣', '🫠', '🪿',
    'x²', 'H₂O', '½', 'Ⅻ', '①②', 'ↂ', '〇', '𝟘𝟙', '٣٤٥', '۱۲۳', '१२३', '๑๒', '１２３', '𑷠𑷡', '𖿴',
    "don't", "it's", "we're", "I've", "I'm", "you'll", "he'd", "DON'T", "IT'S", "We'Re", "I'M",
    "y'all", "rock'n'roll", "''s", "'", "'''", "’s", "it’s",
    '3.14', '1,000,000', '$5', '-42', '1e-9', '0x1F', '2024-06-01', '12:30', '100%', '#1',
    'https://example.com/a?b=c&d=e', 'user@example.org', 'C:\\Windows\\', '/usr/bin/env',
    'def f(x):', 'return x**2', '{"a": [1, 2]}', '<div class="x">', 'a->b', '!=', '==', '...', '—', '–',
    '«»', '“quoted”', '¿Qué?', '¡Hola!', '§3.1', '©®™', '\u00AD', '\uFFFD', '\uFEFF', '\u200D', '\u200C',
    '\uE000', '\uFFFF', '\uFFFE', cp(0x10FFFF), cp(0x40000), cp(0xF0000), cp(0x1FFFF),
];
const PUNCT = ['.', ',', '!', '?', ';', ':', '-', '(', ')', '[', ']', '{', '}', '"', "'", '`', '~', '@',
    '#', '$', '%', '^', '&', '*', '_', '+', '=', '|', '\\', '/', '<', '>', '…', '·', '•', '→', '€', '£'];
const DIGITS = ['0', '7', '9', '٣', '۵', '७', '৫', '๕', '໕', '༥', '၅', '៥', '᠕', '５', '𝟓', '²', '³', '¹',
    '¼', 'Ⅷ', 'ⅷ', '⑤', '⓹', '❺', '〥', '𐒥', '𑁫', '𞥕', '𝍤', '🄂',
    // Unicode 17.0 N (FACTS §1.14) and their neighbours.
    ...[0x11DDF, 0x11DE0, 0x11DE5, 0x11DE9, 0x11DEA, 0x16FF3, 0x16FF4, 0x16FF5, 0x16FF6, 0x16FF7].map((c) => cp(c))];

// Random scalar values, weighted towards what text contains.
const BANDS = [[0x20, 0x7E, 30], [0x00, 0x1F, 3], [0x7F, 0xFF, 6], [0x100, 0x24F, 4], [0x370, 0x52F, 4],
    [0x590, 0x6FF, 3], [0x900, 0xDFF, 4], [0xE00, 0xFFF, 2], [0x1000, 0x1FFF, 2], [0x2000, 0x2BFF, 4],
    [0x3000, 0x30FF, 3], [0x4E00, 0x9FFF, 4], [0xAC00, 0xD7A3, 2], [0xE000, 0xF8FF, 1], [0xF900, 0xFFFF, 2],
    [0x10000, 0x1FFFF, 4], [0x1F300, 0x1FAFF, 4], [0x20000, 0x10FFFF, 2]];
const BAND_TOTAL = BANDS.reduce((s, b) => s + b[2], 0);

function generate(seed = 20240601) {
    const r = rng(seed);
    const pick = (a) => a[Math.floor(r() * a.length)];
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    const randCp = () => {
        let x = r() * BAND_TOTAL;
        for (const [lo, hi, w] of BANDS) {
            if ((x -= w) < 0) {
                let c = int(lo, hi);
                if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;
                return cp(c);
            }
        }
        return 'x';
    };
    const out = [];
    // 1. The spec's and FACTS §2's examples.
    out.push('Once upon a time', 'a\u0004b', cp(0x40000) + 'z', '<|endoftext|>Hi', 'Hi<|im_start|>user',
        '٣٤٥', '²³', '  \n\n x', '', ' ', '\n', 'a', ' a', 'a ', '  a', 'a  ', '!\u0004!', 'ab\u0006cd');
    // 2. Every ASCII control (and DEL, and every Latin-1 char) alone and in context.
    for (let c = 0; c < 256; c++) {
        const ch = cp(c);
        out.push(ch, 'a' + ch + 'b', ch + ch, ' ' + ch, ch + ' x', '!' + ch + '!', '1' + ch + '2', ch + "'s");
    }
    // 3. Whitespace runs of every kind before letters, digits, punctuation, end.
    const tails = ['x', 'Word', '7', '42', '!', '.', "'s", '\u00e9', '中', '😀', '', '<|im_end|>'];
    for (const w of WS.concat(NOT_WS)) {
        for (const t of tails) {
            out.push(w + t, w + w + t, ' ' + w + t, w + ' ' + t, 'a' + w + t, 'a' + w + w + w + t);
        }
    }
    for (let i = 0; i < 400; i++) {
        let s = '';
        const n = int(1, 6);
        for (let k = 0; k < n; k++) s += r() < 0.5 ? ' ' : pick(WS.concat(NOT_WS));
        out.push(pick(['', 'a', 'x.', '1']) + s + pick(tails));
    }
    // 4. Contractions in all cases and contexts.
    for (const c of ['s', 't', 're', 've', 'm', 'll', 'd', 'x', 'r', 'v', 'l', 'LL']) {
        const variants = new Set();
        for (let mask = 0; mask < (1 << c.length); mask++) {
            let v = '';
            for (let i = 0; i < c.length; i++) v += (mask >> i) & 1 ? c[i].toUpperCase() : c[i];
            variants.add(v);
        }
        for (const v of variants)
            for (const pre of ['', 'it', ' ', '!', '1', "'", 'é', '中'])
                for (const post of ['', 'up', ' x', '!', '1', "'s"]) out.push(pre + "'" + v + post);
    }
    // 5. Words, digits and punctuation of many scripts, joined in many ways.
    for (const w of WORDS) out.push(w, ' ' + w, w + ' ', w + w, w + '.', '(' + w + ')', w + '123', '1' + w);
    for (const d of DIGITS) out.push(d, d + d + d, ' ' + d, 'a' + d + 'b', d + '.' + d, '  ' + d, d + ' ' + d);
    for (const p of PUNCT) out.push(p, p + p + p, ' ' + p, p + ' ', 'a' + p + 'b', ' ' + p + 'x', p + "'s");
    for (let i = 0; i < 1500; i++) {
        let s = '';
        const n = int(1, 12);
        for (let k = 0; k < n; k++) {
            const x = r();
            if (x < 0.45) s += pick(WORDS);
            else if (x < 0.6) s += pick(DIGITS);
            else if (x < 0.75) s += pick(PUNCT);
            else if (x < 0.9) s += pick([' ', ' ', ' ', '  ', '\n', '\t', '\r\n', '\n\n']);
            else if (x < 0.95) s += pick(WS);
            else s += pick(SPECIALS);
        }
        out.push(s);
    }
    // 6. The special-token strings alone, glued, nested and truncated.
    for (const sp of SPECIALS) {
        out.push(sp, 'x' + sp, sp + 'x', ' ' + sp + ' ', sp + sp, '<' + sp + '>', sp.slice(0, -1),
            sp.slice(1), sp.toUpperCase(), '1' + sp + '2', '\n' + sp + '\n', 'user' + sp + "'s");
    }
    out.push('<|im_start|><|im_end|>', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>',
        '<repo_name><reponame>', '<reponame>x<repo_name>', '<|endoftext|><|endoftext|>', '<|<|endoftext|>|>',
        '<filename>a.py<file_sep>', '<jupyter_code><jupyter_output><empty_output>', '<|im_start', 'im_end|>');
    // 7. Random valid UTF-8.
    for (let i = 0; i < 2000; i++) {
        let s = '';
        const n = int(1, 40);
        for (let k = 0; k < n; k++) s += randCp();
        out.push(s);
    }
    // 8. Long inputs.
    out.push('a'.repeat(5000), ' '.repeat(3000), '1'.repeat(2000), '😀'.repeat(500), '\n'.repeat(1000) + 'x',
        'ab'.repeat(3000), 'Ġ'.repeat(1000), '!'.repeat(4000), ' '.repeat(999) + 'end', '\u3000'.repeat(300) + '1');
    for (let i = 0; i < 30; i++) {
        let s = '';
        const n = int(200, 2000);
        for (let k = 0; k < n; k++) {
            const x = r();
            s += x < 0.5 ? pick(WORDS) + ' ' : x < 0.7 ? pick(PUNCT) : x < 0.8 ? pick(DIGITS) : x < 0.95 ? randCp() : pick(SPECIALS);
        }
        out.push(s);
    }
    return out;
}

module.exports = { generate };
