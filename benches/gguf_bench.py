#!/usr/bin/env python3
"""GGUF benchmark helpers: the data, and gguf-py's writer as the competitor of tjoin's GGUF merge
and split (README.md, "GGUF").

  python3 benches/gguf_bench.py make DIR [GIB]      # DIR/model.gguf (GIB GiB of F16 and Q8_0 tensors)
                                              # and DIR/set/model-0000N-of-00004.gguf, its split
  python3 benches/gguf_bench.py merge FIRST OUT     # gguf-py: read the set, write one file
  python3 benches/gguf_bench.py split IN OUT SIZE   # gguf-py: split IN into files of SIZE bytes

The merge and the split stream each tensor from gguf-py's memory map into its writer
(add_tensor_info, then write_tensor_data), as gguf-py's own scripts rewrite files: no
tensor is held in memory whole beyond what the map pages in.
"""
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T


def make(folder: Path, gib: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = 4096
    tensor_bytes = rows * 4096 * 2  # an F16 [4096, 4096]: 32 MiB
    count = max(2, int(gib * (1 << 30) // tensor_bytes))
    base = (np.arange(rows * 4096, dtype=np.float32) % 1021 / 1021).astype(np.float16)
    base = base.reshape(rows, 4096)
    # One Q8_0 tensor in eight: opaque blocks, 34 bytes per 32 elements.
    q8 = (np.arange(rows * 4096 // 32 * 34, dtype=np.uint32) % 251).astype(np.uint8)
    q8 = q8.reshape(rows, 4096 // 32 * 34)

    def write(path: Path, **split) -> None:
        w = gguf.GGUFWriter(path, "llama", **split)
        w.add_string("general.name", "benchmark")
        w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(32000)])
        for i in range(count):
            if i % 8 == 7:
                w.add_tensor(f"blk.{i}.q8", q8, raw_dtype=T.Q8_0)
            else:
                w.add_tensor(f"blk.{i}.weight", base)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    write(folder / "model.gguf")
    (folder / "set").mkdir(exist_ok=True)
    write(folder / "set" / "model.gguf", split_max_tensors=(count + 3) // 4)


def copy_keys(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for field in reader.fields.values():
        if field.name.startswith(("GGUF.", "split.")) or field.name == "general.architecture":
            continue
        sub = field.types[1] if len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub)


def rewrite(readers: list, out: Path, **split) -> None:
    writer = gguf.GGUFWriter(out, "llama", **split)
    copy_keys(readers[0], writer)
    tensors = [t for r in readers for t in r.tensors]
    for t in tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in tensors:
        writer.write_tensor_data(t.data)
    writer.close()


def main() -> None:
    what = sys.argv[1]
    if what == "make":
        make(Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 2.0)
    elif what == "merge":
        first = Path(sys.argv[2])
        count = int(first.stem.rsplit("-of-", 1)[1])
        stem = first.name.rsplit("-", 3)[0]
        paths = [first.with_name(f"{stem}-{n:05d}-of-{count:05d}.gguf") for n in range(1, count + 1)]
        rewrite([gguf.GGUFReader(p) for p in paths], Path(sys.argv[3]))
    elif what == "split":
        rewrite([gguf.GGUFReader(sys.argv[2])], Path(sys.argv[3]), split_max_size=int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
