"""A flagless merge of a Llama's tensor-parallel ranks (issue 41), against `cat` of the same
files. Writes benches/data/family_merge/: a Llama-shaped model (hidden 2048, 4 layers,
intermediate 5632, vocabulary 32000, 32 query and 8 key-value heads, bfloat16 stored as
uint16 bytes: 0.67 GB) split into 2 ranks as Megatron-LM splits it (q, k, v, gate, up,
the embedding and lm_head on axis 0; o_proj and down_proj on axis 1; the norms whole), with
its config.json beside them, and prints the paired commands to time.

    python3 benches/family_merge.py [--ranks N] [--layers L]

Deterministic (numpy's generator, seed 41). Needs numpy only: the safetensors files are
written here by hand (header, then the data in the header's order), as safetensors lays
them out.
"""
import argparse
import json
import os
import struct

import numpy as np

HIDDEN, INTER, VOCAB, HEADS, KV = 2048, 5632, 32000, 32, 8
DIM = HIDDEN // HEADS


def tensors(layers):
    """The model's tensors: name, shape, and how a rank's piece is cut (axis, or None: whole)."""
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN), 0)]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (HIDDEN,), None),
            (p + "self_attn.q_proj.weight", (HEADS * DIM, HIDDEN), 0),
            (p + "self_attn.k_proj.weight", (KV * DIM, HIDDEN), 0),
            (p + "self_attn.v_proj.weight", (KV * DIM, HIDDEN), 0),
            (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * DIM), 1),
            (p + "post_attention_layernorm.weight", (HIDDEN,), None),
            (p + "mlp.gate_proj.weight", (INTER, HIDDEN), 0),
            (p + "mlp.up_proj.weight", (INTER, HIDDEN), 0),
            (p + "mlp.down_proj.weight", (HIDDEN, INTER), 1),
        ]
    out += [("model.norm.weight", (HIDDEN,), None), ("lm_head.weight", (VOCAB, HIDDEN), 0)]
    return out


def write_safetensors(path, named):
    """`named`: (name, array of uint16 holding bfloat16 bits), written sorted by name as
    safetensors.torch.save_file sorts tensors of one dtype."""
    named = sorted(named, key=lambda t: t[0])
    header, offset = {}, 0
    for name, array in named:
        size = array.nbytes
        header[name] = {"dtype": "BF16", "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, array in named:
            f.write(np.ascontiguousarray(array).tobytes())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "family_merge")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(41)
    ranks = [[] for _ in range(args.ranks)]
    for name, shape, axis in tensors(args.layers):
        full = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
        pieces = [full] * args.ranks if axis is None else np.split(full, args.ranks, axis)
        for rank, piece in zip(ranks, pieces):
            rank.append((name, piece))
    files = []
    for r, named in enumerate(ranks):
        path = os.path.join(folder, f"tp{r}.safetensors")
        write_safetensors(path, named)
        files.append(path)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "hidden_size": HIDDEN, "intermediate_size": INTER, "num_attention_heads": HEADS,
              "num_key_value_heads": KV, "vocab_size": VOCAB,
              "num_hidden_layers": args.layers, "tie_word_embeddings": False}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    size = sum(os.path.getsize(p) for p in files)
    out = os.path.join(folder, "out.safetensors")
    print(f"{len(files)} ranks, {size / 1e9:.2f} GB, in {folder}")
    print(f"tjoin {' '.join(files)} -o {out}")
    print(f"sh -c 'cat {' '.join(files)} > {out}'")


if __name__ == "__main__":
    main()
