// tests/tokenizer/make-added-tok.js - a tokenizer.json with many OVERLAPPING
// added tokens (docs/inputs.md "Work is linear": cis2 matches them with an Aho-Corasick automaton
// over the reversed contents; this is the differential case against the
// oracle) and a corpus that hits the overlaps.
//   node make-added-tok.js BASE_TOKENIZER_JSON OUT_TOKENIZER_JSON OUT_CORPUS_JSON
// The base (SmolLM2's) keeps its vocab, merges and added tokens; appended
// are tokens that are prefixes, suffixes and infixes of each other, ASCII
// and multi-byte, special (normalized=false) and not (normalized=true),
// with the ids the reference assigns (a content already in the vocab keeps
// its id, a new one takes the next free id, in order).
// The corpus (deterministic, xorshift) concatenates the same pieces.
'use strict';
const fs = require('fs');
const [base, outTok, outCorpus] = process.argv.slice(2);
if (!outCorpus) { console.error('usage: node make-added-tok.js BASE OUT_TOK OUT_CORPUS'); process.exit(2); }
const j = JSON.parse(fs.readFileSync(base, 'utf8'));
const have = new Set((j.added_tokens || []).map((a) => a.content));
let next = Math.max(Object.keys(j.model.vocab).length, ...(j.added_tokens || []).map((a) => a.id + 1));
const contents = [];
for (let k = 1; k <= 12; k++) contents.push('<'.repeat(k));            // prefixes of each other
for (let k = 1; k <= 6; k++) contents.push('<'.repeat(k) + 'x>');     // share the < run, end elsewhere
contents.push('x>', 'x><', '><', '>', 'ab', 'abc', 'bcd', 'cd', 'c', 'abcd', 'bc');
contents.push('é', 'éé', 'éa', 'aé', '日本', '本語', '日本語', '語', 'ß', 'ßß');
contents.push('<|x|>', '<|x', 'x|>', '|');
for (let i = 0; i < 200; i++) contents.push('<tok_' + i + '>');        // a shared prefix, many tokens
let n = 0;
for (const c of contents) {
    if (have.has(c)) continue;
    have.add(c);
    const special = n % 3 === 0;                                        // normalized = !special
    const inVocab = Object.prototype.hasOwnProperty.call(j.model.vocab, c);
    (j.added_tokens = j.added_tokens || []).push({
        id: inVocab ? j.model.vocab[c] : next++, content: c, single_word: false, lstrip: false, rstrip: false, normalized: !special, special,
    });
    n++;
}
fs.writeFileSync(outTok, JSON.stringify(j));
const pieces = ['<', '<', '<', '>', 'x', 'a', 'b', 'c', 'd', ' ', 'é', '日', '本', '語', 'ß', '|', '\n', '<<<',
    'ab', 'x>', '<tok_1', '0>', '<tok_', '7', 'hello', ' world'];
let st = 0x9E3779B9;
const rnd = () => { st ^= st << 13; st >>>= 0; st ^= st >>> 17; st ^= st << 5; st >>>= 0; return st; };
const corpus = [];
for (let i = 0; i < 3000; i++) {
    let s = '';
    const len = 1 + (rnd() % 40);
    for (let k = 0; k < len; k++) s += pieces[rnd() % pieces.length];
    corpus.push(s);
}
corpus.push('<'.repeat(5000), '<'.repeat(4999) + 'x>', ('<x>' + 'é').repeat(500), 'abcd'.repeat(1000));
fs.writeFileSync(outCorpus, JSON.stringify(corpus));
console.log('make-added-tok: ' + n + ' added tokens, ' + corpus.length + ' strings');
