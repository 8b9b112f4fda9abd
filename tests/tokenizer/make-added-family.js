// tests/tokenizer/make-added-family.js - a model family's real tokenizer.json
// with the added tokens a fine-tune adds (docs/tokenizer.md "Added tokens"),
// and a corpus that hits them.
//   node make-added-family.js BASE_TOKENIZER_JSON OUT_TOKENIZER_JSON OUT_CORPUS_JSON
// Appended to the file's own added tokens, with the ids the reference
// assigns (a content already in the vocab keeps its id, a new one takes the
// next free id, in order):
//   - as transformers' add_tokens writes a non-special token: special false,
//     normalized true, lstrip/rstrip/single_word false.  With a normalizer
//     the reference matches the token's NORMALIZED content in the
//     normalized text (Llama-2's "<tool>" as "▁<tool>");
//   - as it writes a special one: special true, normalized false (matched
//     in the raw text), and a few non-special ones with normalized false;
//   - contents that overlap (prefixes, suffixes, one inside another, across
//     the two groups), with spaces at the start, inside and at the end,
//     starting with "▁", multi-byte and not NFC (e + U+0301: under NFC it
//     is matched, and decoded, as its NFC), one already in the vocab.
// (Two normalized tokens the normalizer makes equal, "x y" and "x▁y" under
// Replace(" ", "▁"), are left out: the reference matches either of them,
// differently from one process to the next; cis2 refuses such a file.)
// The corpus (deterministic, xorshift) puts them at the start, middle and
// end of texts, glued to words and between spaces, whole and cut.
'use strict';
const fs = require('fs');
const [base, outTok, outCorpus] = process.argv.slice(2);
if (!outCorpus) { console.error('usage: node make-added-family.js BASE OUT_TOK OUT_CORPUS'); process.exit(2); }
const j = JSON.parse(fs.readFileSync(base, 'utf8'));
const vocab = j.model.vocab;
const have = new Set((j.added_tokens || []).map((a) => a.content));
let next = Math.max(Object.keys(vocab).length, ...(j.added_tokens || []).map((a) => a.id + 1));
const inVocab = (c) => Object.prototype.hasOwnProperty.call(vocab, c);
// N: as add_tokens (normalized, not special); S: special, not normalized;
// R: neither special nor normalized
const toks = [
    ['<tool>', 'N'], ['</tool>', 'N'], ['<tool', 'R'], ['tool>', 'N'], ['<t>', 'S'], ['<tool_call>', 'N'],
    ['<|im_x|>', 'S'], ['<|im', 'N'], ['im_x|>', 'R'],
    [' <sp>', 'N'], ['<sp2> ', 'N'], ['a b', 'N'], ['  ', 'N'], ['x y', 'N'],
    ['\u2581<m>', 'N'], ['<m>', 'R'],
    ['e\u0301<e>', 'N'], ['日本<j>', 'N'], ['<j>語', 'S'],
    ['<n>\n', 'N'], ['\n<n>', 'R'],
    ['ab', 'N'], ['abc', 'R'], ['bcd', 'N'], ['abcd', 'S'],
];
for (const w of ['world', 'hello', 'the']) if (inVocab(w)) { toks.push([w, 'N']); break; }
const added = [];
for (const [c, kind] of toks) {
    if (have.has(c)) continue;
    have.add(c);
    const special = kind === 'S';
    (j.added_tokens = j.added_tokens || []).push({
        id: inVocab(c) ? vocab[c] : next++, content: c, single_word: false, lstrip: false, rstrip: false,
        normalized: kind === 'N', special,
    });
    added.push(c);
}
fs.writeFileSync(outTok, JSON.stringify(j));

const pieces = added.concat(['<', '>', 'tool', '/', '|', 'im', '_x', ' ', ' ', '  ', '\u2581', 'a', 'b', 'c', 'd',
    'x', 'y', 'é', 'e', '\u0301', '日本', '語', '\n', '\t', 'Hello', ' world', 'world', '12', '.']);
let st = 0x2545F491;
const rnd = () => { st ^= st << 13; st >>>= 0; st ^= st >>> 17; st ^= st << 5; st >>>= 0; return st; };
const corpus = ['a b <tool> c', '<tool>', 'a<tool>', '<tool> x', ' <tool>', '<tool> ', '  <tool>  ', '<tool></tool>',
    '<tool> </tool>', 'x <tool_call> y', 'x y', 'x▁y', ' x y ', 'a b', 'ab', ' ab', 'abcd', ' abcd ', '<m>', ' <m>',
    '▁<m>', 'e\u0301<e>', ' é<e>', '<n>\n', '\n<n>', ' \n<n>\n ', '<|im_x|>', ' <|im_x|> ', '<|im', ' <|im'];
for (const c of added) corpus.push(c, ' ' + c, c + ' ', 'x' + c, c + 'x', 'Hello ' + c + ' world', c + c, c + ' ' + c,
    c.slice(1), c.slice(0, -1));
for (let i = 0; i < 1500; i++) {
    let s = '';
    const len = 1 + (rnd() % 12);
    for (let k = 0; k < len; k++) s += pieces[rnd() % pieces.length];
    corpus.push(s);
}
corpus.push(' <tool>'.repeat(300), 'x y '.repeat(300), '<tool'.repeat(200) + '>');
fs.writeFileSync(outCorpus, JSON.stringify(corpus));
console.log('make-added-family: ' + added.length + ' added tokens, ' + corpus.length + ' strings');
