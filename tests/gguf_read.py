#!/usr/bin/env python3
"""An independent GGUF v3 reader (standard library only) for tests.

Written from the spec (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
sharing no code with common/gguf.cc, so a file our writer makes is checked by a
second reader. It parses the header, every metadata value, the tensor infos,
the alignment and the data offsets; checks that each tensor lies aligned inside
the file and that the tensors tile the data section in offset order as ggml
writers lay them out; and prints a JSON summary on stdout. With --row NAME it
also decodes row 0 of tensor NAME (F32, F16 or Q8_0).

usage: gguf_read.py FILE [--row TENSOR]   (exit 1 with a message on a bad file)
"""
import json
import struct
import sys

# ggml type number: (name, elements per block, bytes per block)
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 6: ("Q5_0", 32, 22), 8: ("Q8_0", 32, 34),
         12: ("Q4_K", 256, 144), 14: ("Q6_K", 256, 210), 30: ("BF16", 1, 2)}
# GGUF value type number: struct format of a scalar
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        if self.p + n > len(self.d):
            raise ValueError(f"string of {n} bytes at {self.p} runs past the end")
        s = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        if t not in SCALARS:
            raise ValueError(f"unknown value type {t} at {self.p}")
        return self.take(SCALARS[t])


def half(b, off):
    return struct.unpack_from("<e", b, off)[0]


def decode_row(d, t, off, n):
    if t == 0:
        return list(struct.unpack_from(f"<{n}f", d, off))
    if t == 1:
        return list(struct.unpack_from(f"<{n}e", d, off))
    if t == 8:
        out = []
        for b in range(n // 32):
            blk = off + 34 * b
            scale = half(d, blk)
            out += [scale * q for q in struct.unpack_from("<32b", d, blk + 2)]
        return out
    raise ValueError(f"cannot decode type {t}")


def main():
    path = sys.argv[1]
    row_of = sys.argv[sys.argv.index("--row") + 1] if "--row" in sys.argv else None
    with open(path, "rb") as f:
        d = f.read()
    r = Reader(d)
    if r.take("<I") != 0x46554747:
        raise ValueError("bad magic")
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        ne = [r.take("<q") for _ in range(nd)]
        t, off = r.take("<I"), r.take("<Q")
        if t not in TYPES:
            raise ValueError(f"{name}: unknown type {t}")
        tname, bs, bb = TYPES[t]
        if ne[0] % bs:
            raise ValueError(f"{name}: row of {ne[0]} is not whole {tname} blocks")
        rows = 1
        for x in ne[1:]:
            rows *= x
        tensors.append({"name": name, "ne": ne, "type": tname, "type_id": t, "offset": off,
                        "nbytes": rows * ne[0] // bs * bb})
    align = kv.get("general.alignment", 32)
    data_start = (r.p + align - 1) // align * align
    expect = 0
    for t in sorted(tensors, key=lambda t: t["offset"]):
        if t["offset"] % align:
            raise ValueError(f"{t['name']}: offset {t['offset']} is not aligned to {align}")
        if t["offset"] != expect:
            raise ValueError(f"{t['name']}: offset {t['offset']}, expected {expect} (gap or overlap)")
        expect = (t["offset"] + t["nbytes"] + align - 1) // align * align
    if data_start + expect < len(d) - align + 1 or data_start + tensors[-1]["offset"] + tensors[-1]["nbytes"] > len(d):
        raise ValueError(f"file is {len(d)} bytes, tensors end at {data_start + expect}")
    arch = kv.get("general.architecture", "")
    out = {"version": version, "n_kv": n_kv, "n_tensors": n_tensors, "alignment": align, "data_start": data_start,
           "arch": arch, "tensors": {t["name"]: {k: t[k] for k in ("ne", "type", "offset", "nbytes")} for t in tensors},
           "meta": {k: v for k, v in kv.items() if not isinstance(v, list)}, "n_tokens": len(kv.get("tokenizer.ggml.tokens", []))}
    if row_of is not None:
        t = next(t for t in tensors if t["name"] == row_of)
        out["row"] = decode_row(d, t["type_id"], data_start + t["offset"], t["ne"][0])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, struct.error, UnicodeDecodeError, StopIteration) as e:
        print(f"gguf_read.py: {e}", file=sys.stderr)
        sys.exit(1)
