#!/usr/bin/env python3
"""How tjoin's tensor rules scale: a whole-file join of two safetensors files of TENSORS
tiny tensors under a rules file of RULES lines (issue 27, item 8).

    cargo build --release
    python3 benches/rules_scale.py                     # 100,000 rules x 10,000 tensors
    python3 benches/rules_scale.py --rules 1000 --tensors 1000 --tjoin /tmp/old-tjoin

Writes its inputs under benches/data/rules_scale/ (ignored by git) and prints the wall time of
the join with -q (matching only) and without it (matching and the unmatched-rule warnings).
Most rules match no tensor and the one that decides every tensor is the last line, so a
matcher that tries the rules in turn does RULES x TENSORS glob matches.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

PARTS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
         "input_layernorm", "post_attention_layernorm", "rotary"]


def names(count):
    return [f"model.layers.{i // len(PARTS)}.{PARTS[i % len(PARTS)]}.weight"
            for i in range(count)]


def write_safetensors(path, tensor_names, value):
    header = {}
    data = bytearray()
    for name in tensor_names:
        header[name] = {"dtype": "F32", "shape": [1],
                        "data_offsets": [len(data), len(data) + 4]}
        data += struct.pack("<f", value)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


def write_rules(path, count, layers):
    """COUNT lines: literal names, prefix, suffix and infix globs that match nothing, in
    turn, then `*.weight = 0`, which decides every tensor."""
    lines = []
    for k in range(count - 1):
        layer = k % max(layers, 1)
        kind = k % 4
        if kind == 0:
            lines.append(f"model.layers.{layer}.missing{k}.weight = 0")
        elif kind == 1:
            lines.append(f"model.layers.{layer}.absent{k}* = 1")
        elif kind == 2:
            lines.append(f"*.nothing{k}.weight = keep")
        else:
            lines.append(f"*.{layer}.none{k}.* = 0")
    lines.append("*.weight = 0")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=100_000)
    parser.add_argument("--tensors", type=int, default=10_000)
    parser.add_argument("--tjoin", default=os.path.join("target", "release", "tjoin"))
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "rules_scale")
    os.makedirs(data, exist_ok=True)
    tensor_names = names(args.tensors)
    a, b = os.path.join(data, "a.safetensors"), os.path.join(data, "b.safetensors")
    rules = os.path.join(data, "many.rules")
    write_safetensors(a, tensor_names, 1.0)
    write_safetensors(b, tensor_names, 2.0)
    write_rules(rules, args.rules, args.tensors // len(PARTS))
    out = os.path.join(data, "out.safetensors")
    for label, extra in (("-q (matching only)", ["-q"]), ("with warnings", [])):
        if os.path.exists(out):
            os.remove(out)
        command = [args.tjoin, a, b, "--rules", rules, "-o", out] + extra
        start = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{args.rules} rules x {args.tensors} tensors, {label}: "
                  f"over {args.timeout:.0f} s (stopped)")
            continue
        seconds = time.monotonic() - start
        print(f"{args.rules} rules x {args.tensors} tensors, {label}: {seconds:.2f} s, "
              f"exit {done.returncode}, {len(done.stderr)} bytes on stderr")
        if done.returncode != 0:
            sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])


if __name__ == "__main__":
    main()
