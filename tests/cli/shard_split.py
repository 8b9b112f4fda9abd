#!/usr/bin/python3
"""tests/cli/shard_split.py SRC_DIR DST_DIR N - split SRC_DIR/model.safetensors
into a Hugging Face style sharded checkpoint in DST_DIR: N shards
model-0000i-of-0000N.safetensors (the tensors in name order, cut into N runs
of about equal bytes, each shard its own header with offsets from 0, the
tensor bytes copied unchanged) and model.safetensors.index.json
({"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}, as
transformers' save_pretrained writes it).  config.json and tokenizer.json
are copied.  Written from the safetensors format alone (8-byte LE header
length, JSON header, data area), independently of cis2's reader and
writer, so that t_shards.sh compares cis2 against a second route.

tests/cli/shard_split.py --weights-sha DIR prints the weights_sha256 a
sharded checkpoint must have by docs/inputs.md's rule: the sha256 of the
lines "<sha256 hex>  <name>\\n", the index first, then every shard the
index names, in the byte order of their names (sha256sum's output).
"""
import hashlib
import json
import os
import shutil
import struct
import sys


def read_header(path):
    """The header of a safetensors file and where its data area starts."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return hdr, 8 + n


class Span:
    """Bytes [begin, end) of an open file, copied in 64 MiB pieces, so that
    split() handles a checkpoint of any size without holding it in memory."""

    def __init__(self, f, begin, end):
        self.f, self.begin, self.end = f, begin, end

    def __len__(self):
        return self.end - self.begin

    def copy_to(self, out):
        self.f.seek(self.begin)
        left = len(self)
        while left:
            chunk = self.f.read(min(left, 64 << 20))
            if not chunk:
                sys.exit("shard_split: %s ends inside a tensor" % self.f.name)
            out.write(chunk)
            left -= len(chunk)


def read_st(path):
    """The header and the whole data area (small files: the tests' edits)."""
    hdr, base = read_header(path)
    with open(path, "rb") as f:
        f.seek(base)
        return hdr, f.read()


def write_st(path, tensors):
    """tensors: list of (name, dtype, shape, bytes or Span)."""
    hdr, off = {}, 0
    for name, dtype, shape, b in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js)
        for t in tensors:
            if isinstance(t[3], Span):
                t[3].copy_to(f)
            else:
                f.write(t[3])


def split(src, dst, n):
    path = os.path.join(src, "model.safetensors")
    hdr, base = read_header(path)
    f = open(path, "rb")
    items = []
    for k in sorted(hdr):
        b, e = hdr[k]["data_offsets"]
        items.append((k, hdr[k]["dtype"], hdr[k]["shape"], Span(f, base + b, base + e)))
    total = sum(len(t[3]) for t in items)
    os.makedirs(dst, exist_ok=True)
    groups, cur, acc = [], [], 0
    for t in items:  # cut when the running total passes the next i/n of the bytes
        cur.append(t)
        acc += len(t[3])
        if len(groups) < n - 1 and acc >= total * (len(groups) + 1) / n:
            groups.append(cur)
            cur = []
    groups.append(cur)
    groups = [g for g in groups if g]
    weight_map = {}
    for i, g in enumerate(groups):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(groups))
        write_st(os.path.join(dst, fn), g)
        for t in g:
            weight_map[t[0]] = fn
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    for fn in ("config.json", "tokenizer.json"):
        shutil.copyfile(os.path.join(src, fn), os.path.join(dst, fn))
    f.close()


def weights_sha(d):
    def h(fn):
        with open(os.path.join(d, fn), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    idx = "model.safetensors.index.json"
    with open(os.path.join(d, idx), "rb") as f:
        shards = sorted(set(json.loads(f.read())["weight_map"].values()), key=lambda s: s.encode())
    text = "".join("%s  %s\n" % (h(fn), fn) for fn in [idx] + shards)
    return hashlib.sha256(text.encode()).hexdigest()


if __name__ == "__main__":
    if sys.argv[1] == "--weights-sha":
        print(weights_sha(sys.argv[2]))
    else:
        split(sys.argv[1], sys.argv[2], int(sys.argv[3]))
