#!/usr/bin/env bash
# Writes the seed inputs of the fuzz targets into fuzz/seeds/<target>/ (small:
# the whole folder stays well under 200 KB). Rerun after a format change, e.g.
# to the protos in proto/specserve/v1/ or the model files' metadata keys.
#   fuzz_gguf:          the first 4 KB of two bundled models (a real header and
#                       metadata, cut off), tiny complete llama/SPM and qwen2/BPE
#                       models, and a GGUF v2 file with every value type;
#   fuzz_*_tokenizer:   text snippets;
#   fuzz_proto_convert: a selector byte, then serialized messages (see the
#                       comment at the top of fuzz_proto_convert.cc);
#   fuzz_chat_template: the real chat templates of tests/data/chat_templates.
set -euo pipefail
cd "$(dirname "$0")/.."
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
protoc -I proto --python_out="$gen" proto/specserve/v1/generation.proto proto/specserve/v1/internal.proto
# Debian's python3 (python3-protobuf, tools/setup.sh), not a pyenv or venv one.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
PYTHONPATH="$gen" "$py" - <<'EOF'
import os, random, shutil, struct

random.seed(1)
ROOT = "fuzz/seeds"

def out(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

for t in ("fuzz_gguf", "fuzz_spm_tokenizer", "fuzz_bpe_tokenizer", "fuzz_proto_convert"):
    shutil.rmtree(os.path.join(ROOT, t), ignore_errors=True)

# --- GGUF ------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
T_F32, T_F16, T_Q8_0, T_BF16 = 0, 1, 8, 30

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b

def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(SCALAR[t], v)

def f16(x):
    return struct.pack("<e", x)

def tensor_bytes(ttype, ne):
    n = 1
    for d in ne:
        n *= d
    if ttype == T_F32:
        return b"".join(struct.pack("<f", random.uniform(0.5, 1.5)) for _ in range(n))
    if ttype == T_F16:
        return b"".join(f16(random.uniform(-0.1, 0.1)) for _ in range(n))
    if ttype == T_BF16:
        return b"".join(struct.pack("<f", random.uniform(-0.1, 0.1))[2:] for _ in range(n))
    if ttype == T_Q8_0:  # blocks of 32: f16 scale, 32 int8
        return b"".join(f16(0.01) + bytes(random.randrange(256) for _ in range(32)) for _ in range(n // 32))
    raise ValueError(ttype)

def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml type)]. Data laid
    out as ggml writes it: in order, each tensor aligned, padded to the end."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    head += b"".join(gstr(k) + struct.pack("<I", t) + gval(t, v) for k, t, v in kvs)
    data, infos = b"", b""
    for name, ne, ttype in tensors:
        data += b"\0" * (-len(data) % alignment)
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        infos += struct.pack("<IQ", ttype, len(data))
        data += tensor_bytes(ttype, ne)
    data += b"\0" * (-len(data) % alignment)
    head += infos
    head += b"\0" * (-len(head) % alignment)
    return head + data

def llama_tensors(arch, n_embd, n_ff, q_dim, kv_dim, vocab, mat, tied=True):
    t = [("token_embd.weight", [n_embd, vocab], T_F16)]
    if not tied:
        t.append(("output.weight", [n_embd, vocab], mat))
    t.append(("output_norm.weight", [n_embd], T_F32))
    p = "blk.0."
    t += [(p + "attn_norm.weight", [n_embd], T_F32), (p + "attn_q.weight", [n_embd, q_dim], mat)]
    if arch == "qwen2":
        t.append((p + "attn_q.bias", [q_dim], T_F32))
    t.append((p + "attn_k.weight", [n_embd, kv_dim], mat))
    if arch == "qwen2":
        t.append((p + "attn_k.bias", [kv_dim], T_F32))
    t.append((p + "attn_v.weight", [n_embd, kv_dim], mat))
    if arch == "qwen2":
        t.append((p + "attn_v.bias", [kv_dim], T_F32))
    t += [(p + "attn_output.weight", [q_dim, n_embd], mat), (p + "ffn_norm.weight", [n_embd], T_F32),
          (p + "ffn_gate.weight", [n_embd, n_ff], mat), (p + "ffn_up.weight", [n_embd, n_ff], mat),
          (p + "ffn_down.weight", [n_ff, n_embd], T_BF16 if arch == "qwen2" else mat)]
    return t

def hparams(arch, n_embd, n_ff, n_head, n_head_kv, n_ctx):
    return [("general.architecture", STR, arch), ("general.name", STR, "fuzz-seed-" + arch),
            ("general.alignment", U32, 32),
            (arch + ".context_length", U32, n_ctx), (arch + ".embedding_length", U32, n_embd),
            (arch + ".block_count", U32, 1), (arch + ".feed_forward_length", U32, n_ff),
            (arch + ".attention.head_count", U32, n_head),
            (arch + ".attention.head_count_kv", U32, n_head_kv),
            (arch + ".rope.dimension_count", U32, n_embd // n_head),
            (arch + ".rope.freq_base", F32, 10000.0),
            (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5)]

# The two bundled models, cut off after 4 KB: a real header and the start of
# the tokenizer arrays (the parser stops at the first array that runs past the end).
for model in ("code-target-7m.gguf", "code-bpe-4m.gguf"):
    with open(os.path.join("models", model), "rb") as f:
        out("fuzz_gguf", model.replace(".gguf", "-head4k.gguf"), f.read(4096))

# A complete tiny llama model with a SentencePiece vocabulary.
spm_pieces = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xC3>", "\u2581", "d", "e", "f",
              "\u2581d", "de", "\u2581def", "(", ")", "x"]
spm_types = [2, 3, 3, 6, 6, 6] + [1] * 10
spm_scores = [0.0] * 6 + [-1.0, -2.0, -2.0, -2.0, -3.0, -3.0, -1.5, -4.0, -4.0, -4.0]
kvs = hparams("llama", 16, 32, 2, 1, 64) + [
    ("tokenizer.ggml.model", STR, "llama"),
    ("tokenizer.ggml.tokens", ARR, (STR, spm_pieces)),
    ("tokenizer.ggml.scores", ARR, (F32, spm_scores)),
    ("tokenizer.ggml.token_type", ARR, (I32, spm_types)),
    ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
    ("tokenizer.ggml.unknown_token_id", U32, 0),
    ("tokenizer.ggml.add_bos_token", BOOL, True), ("tokenizer.ggml.add_space_prefix", BOOL, True)]
out("fuzz_gguf", "tiny-llama-spm.gguf", gguf(kvs, llama_tensors("llama", 16, 32, 16, 8, 16, T_F16)))

# A complete tiny qwen2 model (q/k/v biases, untied output, Q8_0 and BF16)
# with a byte-level BPE vocabulary.
G = "\u0120"  # GPT-2's byte-level space
bpe_pieces = ["<|endoftext|>", G, "d", "e", "f", G + "d", "de", G + "de", G + "def", "(", ")", ":",
              "x", "\u010a", "0", "1", "a", "b", G + G, "<|im_start|>"]
bpe_types = [3] + [1] * 18 + [3]
bpe_merges = [G + " d", "d e", G + "d e", G + "de f", G + " " + G]
kvs = hparams("qwen2", 32, 32, 4, 2, 64) + [
    ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "qwen2"),
    ("tokenizer.ggml.tokens", ARR, (STR, bpe_pieces)),
    ("tokenizer.ggml.token_type", ARR, (I32, bpe_types)),
    ("tokenizer.ggml.merges", ARR, (STR, bpe_merges)),
    ("tokenizer.ggml.bos_token_id", U32, 0), ("tokenizer.ggml.eos_token_id", U32, 0),
    ("tokenizer.ggml.add_bos_token", BOOL, False)]
out("fuzz_gguf", "tiny-qwen2-bpe.gguf",
    gguf(kvs, llama_tensors("qwen2", 32, 32, 32, 16, 20, T_Q8_0, tied=False)))

# GGUF v2, every value type and array element type, three small tensors.
kvs = [("u8", U8, 200), ("i8", I8, -100), ("u16", U16, 60000), ("i16", I16, -30000),
       ("u32", U32, 4000000000), ("i32", I32, -2000000000), ("f32", F32, 0.25), ("bool", BOOL, True),
       ("str", STR, "caf\u00e9"), ("u64", U64, 2**63 + 5), ("i64", I64, -(2**62)), ("f64", F64, -1.5e300),
       ("general.alignment", U32, 64)]
for t, v in ((U8, [1, 255]), (I8, [-1]), (U16, [7]), (I16, [-7]), (U32, [1, 2]), (I32, [-5, 5]),
             (F32, [0.5, -0.5]), (BOOL, [True, False]), (STR, ["a", "", "\u2581b"]), (U64, [2**64 - 1]),
             (I64, [-1]), (F64, [3.25])):
    kvs.append(("arr." + str(t), ARR, (t, v)))
out("fuzz_gguf", "v2-all-types.gguf",
    gguf(kvs, [("a", [4], T_F32), ("b", [32, 2], T_Q8_0), ("c", [2, 3, 1, 2], T_F16)], version=2, alignment=64))

# --- Text -------------------------------------------------------------------
texts = {
    "python": b"def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "spaces": b"  lead\tand\r\n\n  trailing   \x0b\x0c ",
    "unicode": "caf\u00e9 \u2192 \u65e5\u672c\u8a9e \U0001F600! \u00a0\u2003\u3000 \u0301\u0663\u216b\u00b2".encode(),
    "contractions": b"don't I'LL we've it's 12345678 3.14 x=1;y+=2 //!==",
    "special": b"<s></s><unk><|begin_of_text|><|end_of_text|><0x0A>\xe2\x96\x81x",
    "invalid": b"\xff\x80z\xe6ok\xc3",
    "empty": b"",
}
for name, t in texts.items():
    for target in ("fuzz_spm_tokenizer", "fuzz_bpe_tokenizer"):
        out(target, name + ".txt", t)

# --- Protos -----------------------------------------------------------------
from google.protobuf.internal.encoder import _VarintBytes
from specserve.v1 import generation_pb2 as gen, internal_pb2 as pb

def stream(msgs):
    return b"".join(_VarintBytes(m.ByteSize()) + m.SerializeToString() for m in msgs)

def dist(ids, probs):
    return pb.SparseDist(ids=ids, probs=probs)

def open_msg(prompt, temp=0.0, top_k=0, top_p=1.0, seed=0, draft=None, max_new=32):
    return pb.SessionOpen(prompt=prompt, sampling=pb.SamplingRule(temperature=temp, top_k=top_k, top_p=top_p, seed=seed),
                          draft=draft, max_new_tokens=max_new)

# The synthetic logits in fuzz_proto_convert.cc peak at id (row * 7) % 64,
# row = position % 41; the prompt [1, 100, 200] puts row 0 of the first verify
# pass at position 2 (greedy: 14, then 21, 28).
t0 = [pb.TargetRequest(open=open_msg([1, 100, 200])),
      pb.TargetRequest(verify=pb.VerifyRequest(round=0, tokens=[14, 21])),
      pb.TargetRequest(verify=pb.VerifyRequest(round=1, tokens=[35, 99], dists=[dist([], []), dist([99, 3], [0.5, 0.5])])),
      pb.TargetRequest(close=pb.SessionClose())]
out("fuzz_proto_convert", "0-target-greedy.bin", b"\x00" + stream(t0))
t1 = [pb.TargetRequest(open=open_msg([1, 5, 6, 7, 8], temp=0.8, top_k=40, top_p=0.9, seed=42, max_new=100)),
      pb.TargetRequest(verify=pb.VerifyRequest(round=0, tokens=[28, 35, 7],
                                               dists=[dist([28, 1], [0.9, 0.1]), dist([35], [1.0]), dist([7, 8, 9], [0.25, 0.25, 0.5])])),
      pb.TargetRequest(verify=pb.VerifyRequest(round=1, tokens=[]))]
out("fuzz_proto_convert", "0-target-sampled.bin", b"\x00" + stream(t1))

d0 = [pb.DraftRequest(open=open_msg([1, 100, 200], draft=pb.DraftRule(temperature=0.0), max_new=64)),
      pb.DraftRequest(propose=pb.ProposeRequest(round=0, k=4)),
      pb.DraftRequest(ahead=pb.ProposeAhead(k=4)),
      pb.DraftRequest(commit=pb.Commit(round=0, accepted=2, next_token=5)),
      pb.DraftRequest(propose=pb.ProposeRequest(round=1, k=3)),
      pb.DraftRequest(commit=pb.Commit(round=1, accepted=3, next_token=9)),
      pb.DraftRequest(commit=pb.Commit(round=2, accepted=0, next_token=11)),
      pb.DraftRequest(propose=pb.ProposeRequest(round=3, k=4)),
      pb.DraftRequest(close=pb.SessionClose())]
out("fuzz_proto_convert", "1-draft-greedy.bin", b"\x01\x1b" + stream(d0))
d1 = [pb.DraftRequest(open=open_msg([1, 7, 8, 9, 7, 8], temp=1.0, seed=3,
                                    draft=pb.DraftRule(temperature=1.0, top_n=8, top_p=0.95, lookup_min_ngram=0))),
      pb.DraftRequest(propose=pb.ProposeRequest(round=0, k=2)),
      pb.DraftRequest(commit=pb.Commit(round=0, accepted=0, next_token=12)),
      pb.DraftRequest(propose=pb.ProposeRequest(round=1, k=2))]
out("fuzz_proto_convert", "1-draft-sampled.bin", b"\x01\x00" + stream(d1))
d2 = [pb.DraftRequest(open=open_msg([1, 7, 8, 9, 7, 8], draft=pb.DraftRule(lookup_min_ngram=2))),
      pb.DraftRequest(propose=pb.ProposeRequest(round=0, k=3)),
      pb.DraftRequest(ahead=pb.ProposeAhead(k=2)),
      pb.DraftRequest(commit=pb.Commit(round=0, accepted=1, next_token=7)),
      pb.DraftRequest(propose=pb.ProposeRequest(round=1, k=3))]
out("fuzz_proto_convert", "1-draft-lookup.bin", b"\x01\x02" + stream(d2))

r = pb.DraftResponse(proposal=pb.Proposal(round=3, tokens=[5, 9], dists=[dist([], []), dist([9, 11], [0.75, 0.25])],
                                          compute_seconds=0.01, drafted_ahead=True))
out("fuzz_proto_convert", "2-draft-response.bin", b"\x02" + r.SerializeToString())

g = gen.GenerateRequest(text="def add(a, b):\n", max_tokens=16, stop=["\n\n", "return"], temperature=0.7,
                        top_k=40, top_p=0.9, seed=7, drafter=gen.DRAFTER_NGRAM, k=4)
out("fuzz_proto_convert", "3-generate-text.bin", b"\x03" + g.SerializeToString())
g = gen.GenerateRequest(token_ids=gen.TokenIds(ids=[1, 822, 15, 4095]), adaptive_k=True)
out("fuzz_proto_convert", "3-generate-ids.bin", b"\x03" + g.SerializeToString())

ti = pb.TokenizerInfo(model="llama", pieces=[p.encode() for p in spm_pieces], scores=spm_scores, types=spm_types,
                      bos=1, eos=2, unk=0, add_bos=True, add_space_prefix=True)
out("fuzz_proto_convert", "4-model-info-llama.bin",
    b"\x04" + pb.ModelInfo(name="tiny", arch="llama", vocab_size=16, context_length=64, tokenizer=ti).SerializeToString())
ti = pb.TokenizerInfo(model="gpt2", pieces=[p.encode() for p in bpe_pieces], types=bpe_types,
                      merges=[m.encode() for m in bpe_merges], pre="llama-bpe", bos=0, eos=0, ignore_merges=True)
out("fuzz_proto_convert", "4-model-info-gpt2.bin",
    b"\x04" + pb.ModelInfo(name="tiny", arch="qwen2", vocab_size=20, tokenizer=ti).SerializeToString())
EOF
rm -rf fuzz/seeds/fuzz_chat_template
mkdir -p fuzz/seeds/fuzz_chat_template
cp tests/data/chat_templates/*.jinja fuzz/seeds/fuzz_chat_template/
du -sh fuzz/seeds
