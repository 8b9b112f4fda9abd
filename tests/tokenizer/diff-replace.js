// tests/tokenizer/diff-replace.js - the Replace normalizer against the
// oracle (npm tokenizers 0.23.2): patterns that overlap themselves ("aba",
// "aa", "abab"), contents longer, shorter and empty, chained with a second
// Replace that doubles; which occurrences are replaced (leftmost first,
// non-overlapping, as the reference's find_iter) must be the oracle's on
// every string of a deterministic corpus of a/b texts.
//   node tests/tokenizer/diff-replace.js CIS2 TMPDIR
// Prints "replace-diff: N passed, N failed"; exit 1 on a mismatch.
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const [cis2, dir] = process.argv.slice(2);
if (!dir) { console.error('usage: node diff-replace.js CIS2 TMPDIR'); process.exit(2); }
const bl = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
(async () => {
    let pass = 0, fail = 0;
    const cases = [['aba', 'b'], ['aa', 'b'], ['aab', 'ba'], ['abab', 'a'], ['a', 'ab'], ['ba', 'aab'], ['aaa', ''],
        ['abaab', 'bb'], ['b', 'aaaa']];
    for (const [pat, content] of cases) {
        const j = { version: '1.0', truncation: null, padding: null, added_tokens: [],
            normalizer: { type: 'Sequence', normalizers: [{ type: 'Replace', pattern: { String: pat }, content },
                { type: 'Replace', pattern: { String: 'b' }, content: 'ab' }] },
            pre_tokenizer: bl, post_processor: null, decoder: bl,
            model: { type: 'BPE', vocab: { a: 0, b: 1, ab: 2 }, merges: [['a', 'b']] } };
        const f = path.join(dir, 'replace.json');
        fs.writeFileSync(f, JSON.stringify(j));
        const t = Tokenizer.fromFile(f);
        const texts = [];
        let st = 7;
        for (let i = 0; i < 400; i++) {
            let s = '';
            const len = 1 + (i % 23);
            for (let k = 0; k < len; k++) { st = (st * 1103515245 + 12345) & 0x7fffffff; s += 'ab'[(st >> 16) & 1]; }
            texts.push(s);
        }
        const want = [];
        for (const s of texts) want.push((await t.encode(s, null, { addSpecialTokens: false })).getIds().join(','));
        const got = execFileSync(cis2, ['tokenize', '--tokenizer', f, '--batch'],
            { input: texts.map((s) => JSON.stringify(s)).join('\n') + '\n' }).toString().split('\n');
        texts.forEach((s, i) => {
            if (want[i] === got[i]) { pass++; return; }
            if (fail++ < 10) console.log('MISMATCH Replace(' + pat + ' -> ' + content + ') on ' + s + '\n  oracle: ' + want[i] + '\n  cis2:   ' + got[i]);
        });
    }
    console.log('replace-diff: ' + pass + ' passed, ' + fail + ' failed');
    process.exit(fail ? 1 : 0);
})().catch((e) => { console.error('replace-diff: ' + (e.stack || e)); process.exit(10); });
