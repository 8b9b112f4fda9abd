// tests/tokenizer/corpus-families.js - the deterministic differential-test
// corpus for the tokenizers of the model families (Llama-3, Qwen3, Llama-2 /
// Mistral / TinyLlama, Gemma-3; docs/tokenizer.md): several hundred strings
// per tokenizer covering scripts, emoji, whitespace runs, digit runs (the
// \p{N}{1,3} of Llama-3's regex), contractions, the file's own added and
// special tokens (alone, glued, truncated), strings that look like byte
// tokens ("<0x41>", "▁", U+FFFD), code points that have no vocab entry
// (byte_fallback), long words, a sample of tests/tokenizer/corpus.js, and
// strings for gpt-oss's o200k pattern (docs/tokenizer.md "The o200k
// pattern": letter case around contractions, Lt/Lm/Lo and marks, digits
// in groups of 1-3, punctuation runs ending in CR/LF and '/', harmony-format
// chat text).  Only Unicode scalar values are produced, so every string is
// valid UTF-8.
// generate(addedContents, seed) -> array of strings.
// sweep() -> strings that together put every code point of planes 0, 1 and
// 14 (and a sample of planes 2, 3) through the o200k pattern's classes.
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

// The o200k pattern: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* then [\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// with a case-insensitive contraction after, or the reverse; each with an
// optional non-letter/number/CR/LF prefix; \p{N}{1,3}; symbols then
// [\r\n/]*.
const O200K = ["DON'T", "Don'T", "don'T", "dOn't", "I'M", "i'm", "it'S", "IT's", "THEY'RE", "they'Re", "We'VE",
    "I'D", "she'LL", "SHE'll", "Y'ALL", "'s", "''s", "'S'S", "a's's", "x'ſ", "X'ſ", "ǅ'S", "ʰ's", "中's", "e\u0301's",
    "E\u0301'S", "'tis", "rock'n'roll", "O'Neil", "o'neil", "O'NEIL'S", "l'été", "L'ÉTÉ", "dell'arte", "don’t",
    "can't've", "ab'", "AB'", "A'", "a'b", "A'B'c", "'\n's", "it's\n", "x'll'd",
    'camelCase', 'PascalCaseWord', 'XMLHttpRequest', 'HTTPServer', 'iPhone', 'eBay', "McDonald's", 'ABCdef',
    'abcDEF', 'aBcDeF', 'ǅungla', 'ǄUNGLA', 'ǆungla', 'ǅǅa', 'aǅ', 'ΑθήναΑΘΗΝΑ', 'МосКВА', 'ÀÉÎõü', 'ŞTRASSE',
    'ʰʲʷ', 'Aʰb', 'aʰB', 'ʰA', 'ABʰ', 'ABʰCD', '々', 'カタカナー', 'ABCー', 'ーabc', 'Aー', 'ªº', 'Aª.',
    'A\u0301B', 'a\u0301B', '\u0301a', '\u0301A', ' \u0301x', '+\u0301x', ' +\u0301x', '\u0301\u0301', 'Ab\u0301C',
    'AB\u0301', 'AB\u0301CD', '\u20DD', 'A\u20DD', 'देवनागरी', 'ที่นี่', 'ﬁNANCE', 'ᾈᾈa', 'ᾀᾈ',
    '1', '12', '123', '1234', '12345', '1234567', '123456789', '1,234,567.89', '١٢٣٤٥', 'ⅠⅡⅢⅣ', '½¼¾', '²³⁴',
    '12abc', 'abc123def', 'v1.2.3', '0x7FFF', '3.14e-10', '2025-01-01T12:00:00Z', 'A1B2C3', '1a2b3c', 'x²', '①②',
    '!!!', '?!?!', '---', '===', '->', '=>', '/**/', '//', '/\n', 'a/b/c', '+/\n/', '*/\n\n', '</div>\n', '<|',
    '|>', '};\n', ')\r\n/', '##\n/', ' //comment\n', 'http://x.y/z/', 'C:/path/to/', '/*\n * x\n */', '**bold**',
    '__init__', "''", '"""', '.\n\n\n', ' .\n/ \n', '/\r/\n//x', '!\u0301\n', '\u00A0!', '\t!', ' !\n',
    ' \n', '\n \n', '  \n\n  x', '\t\n', '\r\n\r\n', ' \r', 'x  \n  y', '\u00A0\n', '\u3000x', 'x   ',
    '\u2028\n', '\n\u000B', ' \t \n \t x',
    '中文字符', '日本語のテキスト', '한국어 텍스트', '中文English混合', '漢字カタカナひらがな', '中文，标点。',
    '😀😀', 'a😀b', '👍🏽ok', '😀\n/', ' 😀 '];
const HARMONY = ['<|start|>assistant<|channel|>final<|message|>',
    '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n' +
        'Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n' +
        '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>',
    '<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant',
    '<|start|>assistant<|channel|>analysis<|message|>We need to answer: 2+2=4.<|end|>' +
        '<|start|>assistant<|channel|>final<|message|>4<|return|>',
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>' +
        '{"location":"San Francisco"}<|call|>',
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true, "temperature": 20}<|end|>',
    '<|start|>developer<|message|># Instructions\n\nAlways respond in riddles\n\n# Tools\n\n## functions\n\n' +
        'namespace functions {\n\n// Gets the location of the user.\ntype get_location = () => any;\n\n} ' +
        '// namespace functions<|end|>',
    '<|startoftext|><|start|>user<|message|>hi<|end|><|endofprompt|>', '<|START|>assistant', '<|start|', '<|start',
    'start|>', '<||>', '<|start|>\n', ' <|start|> ', '<|start|><|start|>', '<|reserved_200000|>x<|reserved_200017|>',
    '<|channel|>final <|message|> x', 'assistant<|channel|>', '<|message|><|message|>'];

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
    // 7. The o200k pattern's cases, alone and in contexts; harmony chat text.
    for (const w of O200K) out.push(w, ' ' + w, w + w, 'a' + w + 'B', 'A' + w + 'b', '1' + w + "'s\n/");
    for (const h of HARMONY) out.push(h, h + '\n', 'x ' + h, h + h);
    for (let i = 0; i < 100; i++) {
        let s = '';
        const n = int(1, 10);
        for (let k = 0; k < n; k++) {
            const x = r();
            s += x < 0.5 ? pick(O200K) : x < 0.6 ? pick(WS) : x < 0.7 ? pick(PUNCT) : x < 0.8 ? pick(DIGITS)
                : x < 0.9 ? pick(HARMONY) : specials.length ? pick(specials) : pick(WORDS);
        }
        out.push(s);
    }
    return out;
}

// The code points through the o200k pattern's classes: each X in
// 'a' X 'B' (is X in B = [\p{Ll}\p{Lm}\p{Lo}\p{M}]), ' ' X 'Ab' (is X in A
// = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]), ' ' X 'A.' (in A and B, an Lm/Lo/mark
// ends the match before 'A'; in A only, an Lu/Lt does not), ' +' X 'x' (a
// mark or symbol continues the symbol run, a letter does not), "a'" X 'e'
// and "a'l" X (X matching a contraction's letter case-insensitively), '1'
// X '23' (\p{N}{1,3}) and '\t' X '\n' (\s, CR/LF).
// Planes 0 and 1, the CJK compatibility ideographs, plane 14's tags and
// variation selectors; every 7th code point of the unified ideographs, the
// Hangul syllables and the rest of planes 2 and 3 (all Lo); every 101st of
// the rest up to U+10FFFF (unassigned or private use).
function sweep() {
    const ctx = (c) => 'a' + c + 'B ' + c + 'Ab ' + c + 'A. +' + c + "x a'" + c + "e a'l" + c + ' 1' + c + '23\t' +
        c + '\n';
    const sparse = [[0x3400, 0x4DBF], [0x4E00, 0x9FFF], [0xAC00, 0xD7A3], [0x20000, 0x2F7FF], [0x2FA20, 0x323FF]];
    const out = [];
    let items = [];
    for (let c = 0; c <= 0x10FFFF; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        if (c % 7 && sparse.some(([a, b]) => c >= a && c <= b)) continue;
        if (c > 0x323FF && !(c >= 0xE0000 && c <= 0xE01EF) && c % 101) continue;
        items.push(ctx(cp(c)));
        if (items.length === 256) { out.push(items.join('')); items = []; }
    }
    if (items.length) out.push(items.join(''));
    return out;
}

module.exports = { generate, sweep };
