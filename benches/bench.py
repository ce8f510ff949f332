#!/usr/bin/env python3
"""tjoin's benchmark: each scenario joins deterministic inputs with tjoin and its competitors,
each a separate process, interleaved over several rounds, and prints median wall time, peak
RSS and each competitor's ratio to `cat` of the same bytes, paired round by round.

Run it through benches/run.sh, which installs what it needs. See benches/README.md.
"""

import argparse
import contextlib
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

ROOT = Path(__file__).resolve().parent.parent
TJOIN = ROOT / "target" / "release" / "tjoin"
GIB = 1 << 30

NUMPY_IN_MEMORY = """
import sys, numpy as np
axis, out, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
np.save(out, np.concatenate([np.load(f) for f in files], axis=axis))
"""

NUMPY_JSON = """
import sys, json, numpy as np
out, files = sys.argv[1], sys.argv[2:]
np.save(out, np.concatenate([np.array(json.load(open(f))) for f in files]))
"""

SAFETENSORS_PY = """
import sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
out, files = sys.argv[1], sys.argv[2:]
shards = [load_file(f) for f in files]
merged = {name: np.concatenate([s[name] for s in shards], axis=1 if name.endswith('.row.weight') else 0)
          for name in shards[0]}
with safe_open(files[0], framework="np") as first:
    metadata = first.metadata()
save_file(merged, out, metadata=metadata)
"""

# What users do today to merge a sharded checkpoint: every shard loaded, one dict, one save.
CHECKPOINT_MERGE_PY = """
import sys, json, os
from safetensors.numpy import load_file, save_file
index, out = sys.argv[1], sys.argv[2]
files = sorted(set(json.load(open(index))["weight_map"].values()))
merged = {}
for f in files:
    merged.update(load_file(os.path.join(os.path.dirname(index), f)))
save_file(merged, out, metadata={"format": "pt"})
"""

# The same for re-sharding one file: load it, split it as huggingface_hub does, save each shard
# and transformers' index.
CHECKPOINT_RESHARD_PY = """
import sys, json, os
from safetensors.numpy import load_file, save_file
src, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
tensors = load_file(src)
shards, current, size = [], {}, 0
for name, t in tensors.items():
    if t.nbytes > limit:
        shards.append({name: t})
        continue
    if size + t.nbytes > limit:
        shards.append(current)
        current, size = {}, 0
    current[name] = t
    size += t.nbytes
if current:
    shards.append(current)
os.makedirs(out, exist_ok=True)
weight_map = {}
for i, shard in enumerate(shards):
    name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    save_file(shard, os.path.join(out, name), metadata={"format": "pt"})
    weight_map.update({t: name for t in shard})
index = {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())}, "weight_map": weight_map}
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    f.write(json.dumps(index, indent=2, sort_keys=True) + "\\n")
"""

# PyTorch's own consolidation of a distributed checkpoint's rank files into one file.
TORCH_CONSOLIDATE_PY = """
import sys, json, os
from safetensors import safe_open
from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files
ranks, out, first = sys.argv[1], sys.argv[2], sys.argv[3]
with safe_open(first, framework="np") as f:
    names = json.loads(f.metadata()["DCP_SHARDING_INFO"])
os.makedirs(out, exist_ok=True)
consolidate_safetensors_files(ranks, out, dict.fromkeys(names, 1))
"""

# What users do today to convert a PyTorch checkpoint: torch.load (weights only) and
# safetensors' save_file, or huggingface_hub's save_torch_state_dict for a set.
TORCH_CONVERT_PY = """
import sys, json, os, torch
src, out = sys.argv[1], sys.argv[2]
if src.endswith(".index.json"):
    from huggingface_hub import save_torch_state_dict
    files = sorted(set(json.load(open(src))["weight_map"].values()))
    state = {}
    for f in files:
        state.update(torch.load(os.path.join(os.path.dirname(src), f), weights_only=True))
    os.makedirs(out, exist_ok=True)
    save_torch_state_dict(state, out, max_shard_size=int(sys.argv[3]))
else:
    from safetensors.torch import save_file
    save_file(torch.load(src, weights_only=True), out, metadata={"format": "pt"})
"""

# PyTorch's own way from DCP's default format to a safetensors file: dcp_to_torch_save, then
# save_file of the model's tensors (named without `model.`, as tjoin names them by default).
TORCH_DCP_TO_SAFETENSORS_PY = """
import os, sys, tempfile, torch
from safetensors.torch import save_file
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
folder, out = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
    full = os.path.join(tmp, "full.pt")
    dcp_to_torch_save(folder, full)
    model = torch.load(full, weights_only=True)["model"]
save_file({k: v.contiguous() for k, v in model.items()}, out, metadata={"format": "pt"})
"""

# Writes DCP's default format as torch.distributed.checkpoint.save does it, on 4 gloo ranks
# of a 2x2 mesh; each rank builds only its own blocks (DTensor.from_local), so memory stays at
# one rank's share.
DCP_DEFAULT_WRITE_PY = """
import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

def block(seed, shape, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)

def main(rank, folder, cols):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29791")
    dist.init_process_group("gloo", rank=rank, world_size=4)
    mesh = init_device_mesh("cpu", (2, 2))
    r, c = rank // 2, rank % 2
    state = {}
    def put(name, local, shape, places):
        stride = torch.empty(shape, device="meta").stride()
        state[name] = DTensor.from_local(local, mesh, places, run_check=False, shape=torch.Size(shape), stride=stride)
    for layer in range(16):
        p = f"layers.{layer}"
        put(f"{p}.mlp.weight", block(layer * 16 + rank, (2048, cols // 2), torch.float16), (4096, cols), [Shard(0), Shard(1)])
        put(f"{p}.attn.weight", block(layer * 16 + 4 + rank, (512, cols), torch.float32), (2048, cols), [Shard(0), Shard(0)])
        put(f"{p}.norm.weight", block(layer * 16 + 8 + rank, (cols // 4,), torch.float32), (cols,), [Shard(0), Shard(0)])
    dcp.save({"model": state}, checkpoint_id=folder)
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1], int(sys.argv[2])), nprocs=4, join=True)
"""

# The shard limit of both checkpoint scenarios: 1 GiB makes 4 shards.
SHARD_LIMIT = 300_000_000

NUMPY_OUT_OF_CORE = """
import sys, numpy as np
from numpy.lib.format import open_memmap
axis, out, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
arrays = [np.load(f, mmap_mode='r') for f in files]
shape = list(arrays[0].shape)
shape[axis] = sum(a.shape[axis] for a in arrays)
fortran = all(a.flags.f_contiguous and not a.flags.c_contiguous for a in arrays)
dtype = np.result_type(*arrays)
dst = open_memmap(out, mode='w+', dtype=dtype, shape=tuple(shape), fortran_order=fortran)
start = 0
for a in arrays:
    index = [slice(None)] * dst.ndim
    index[axis] = slice(start, start + a.shape[axis])
    dst[tuple(index)] = a
    start += a.shape[axis]
dst.flush()
"""


# What users do today to cut an array into parts: load it (into memory, as np.load does by
# default), numpy.array_split, np.save each part.
NUMPY_SPLIT = """
import os, sys, numpy as np
axis, parts, src, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.makedirs(out, exist_ok=True)
for i, part in enumerate(np.array_split(np.load(src), parts, axis=axis)):
    np.save(os.path.join(out, f"part-{i}.npy"), part)
"""

# DeepSeek-V3's inference/convert.py loop, without its renaming: safe_open the checkpoint,
# for each tensor narrow it per rank along the axis its rule gives (whole for a norm), keep
# every rank's tensors in memory, then save_file one file per rank.
DEEPSEEK_SPLIT_PY = """
import os, sys, torch
from safetensors.torch import safe_open, save_file
src, out, mp = sys.argv[1], sys.argv[2], int(sys.argv[3])
def dim_of(name):
    if name.endswith(".mlp.weight"):
        return 0
    if name.endswith(".attn.weight"):
        return 1
    return None
state_dicts = [{} for _ in range(mp)]
with safe_open(src, framework="pt", device="cpu") as f:
    for name in f.keys():
        param = f.get_tensor(name)
        dim = dim_of(name)
        for i in range(mp):
            if dim is None:
                state_dicts[i][name] = param
                continue
            assert param.size(dim) % mp == 0
            shard = param.size(dim) // mp
            state_dicts[i][name] = param.narrow(dim, i * shard, shard).contiguous()
os.makedirs(out, exist_ok=True)
for i in range(mp):
    save_file(state_dicts[i], os.path.join(out, f"model{i}-mp{mp}.safetensors"))
"""

# The rules of `split_ranks`: the checkpoint scenarios' tensors, column-parallel (the MLP
# matrix, on its output features), row-parallel (the attention matrix, on its input
# features) and replicated norms.
SPLIT_RANKS_RULES = """*.mlp.weight = 0
*.attn.weight = 1
*norm.weight = keep
"""

# The rank count of `split_ranks` and the part count of the other split scenarios.
SPLIT_RANKS = 4
SPLIT_PARTS = 8


def fill(path, dtype, shape, seed, fortran=False):
    """Writes a deterministic array to `path` in 64 MiB slabs, without holding it in memory."""
    out = open_memmap(path, mode="w+", dtype=dtype, shape=shape, fortran_order=fortran)
    flat = out.reshape(-1, order="F" if fortran else "C")
    step = max(1, (64 << 20) // out.dtype.itemsize)
    for start in range(0, flat.size, step):
        stop = min(flat.size, start + step)
        flat[start:stop] = (np.arange(start, stop, dtype=np.int64) * 7 + seed) % 1000
    out.flush()
    del out


def scenario_inputs(name, scale, folder):
    """Creates the scenario's inputs; returns (axis, [paths], extra tjoin args)."""
    def rows(total_bytes, row_bytes):
        return max(1, int(total_bytes * scale) // row_bytes)

    paths = []
    if name == "axis0":
        for i in range(2):
            p = folder / f"in{i}.npy"
            fill(p, np.float32, (rows(GIB, 4096), 1024), i)
            paths.append(p)
        return 0, paths, []
    if name == "axis0_ragged":
        # Issue 34's case at scale 0.5: float32 (65536, 1024) and (62914, 1024), inputs of
        # unequal length whose files end 128 bytes into a page (the .npy header), as every
        # .npy file of whole 4 KiB rows does.
        for i, n in enumerate((131072, 125828)):
            p = folder / f"in{i}.npy"
            fill(p, np.float32, (max(1, int(n * scale)), 1024), i)
            paths.append(p)
        return 0, paths, []
    if name == "lastaxis_small":
        n = rows(1 << 26, 1)
        for i, width in enumerate((3, 5)):
            p = folder / f"in{i}.npy"
            fill(p, np.float32, (n, width), i)
            paths.append(p)
        return 1, paths, []
    if name == "mid":
        # 4 float16 inputs (64, K_i, 256, 256), 1.5 GiB in all.
        ks = [int(k * scale) or 1 for k in (24, 40, 56, 72)]
        for i, k in enumerate(ks):
            p = folder / f"in{i}.npy"
            fill(p, np.float16, (64, k, 256, 256), i)
            paths.append(p)
        return 1, paths, []
    if name == "fortran":
        for i in range(2):
            p = folder / f"in{i}.npy"
            fill(p, np.float64, (rows(512 << 20, 8 * 1024), 1024), i, fortran=True)
            paths.append(p)
        return 0, paths, []
    if name == "gather":
        # A C-order and a Fortran-order float32 (N, 1024), 1 GiB in all: the output is in C
        # order, as numpy makes it, so the second input is gathered element by element.
        for i in range(2):
            p = folder / f"in{i}.npy"
            fill(p, np.float32, (rows(512 << 20, 4 * 1024), 1024), i, fortran=i == 1)
            paths.append(p)
        return 0, paths, []
    if name == "many_small":
        count = max(10, int(10_000 * min(1.0, scale * 10)))
        for i in range(count):
            p = folder / f"in{i:05d}.npy"
            np.save(p, (np.arange(16 * 64, dtype=np.float32).reshape(16, 64) + i))
            paths.append(p)
        listing = folder / "inputs.txt"
        listing.write_text("".join(f"{p}\n" for p in paths))
        return 0, paths, ["--files-from", str(listing)]
    if name == "cast":
        # float16 (N, 1024) + float32 (N, 1024), joined as float32: 1 GiB of input.
        n = rows(GIB, 6 * 1024)
        for i, dtype in enumerate((np.float16, np.float32)):
            p = folder / f"in{i}.npy"
            fill(p, dtype, (n, 1024), i)
            paths.append(p)
        return 0, paths, ["--cast", "float32"]
    if name == "json_parse":
        # About 100 MB of JSON: rows of floats with a fraction and an exponent here and there.
        p = folder / "in0.json"
        rng = np.random.default_rng(0)
        rows_ = max(1, int(400_000 * scale))
        with open(p, "w") as f:
            f.write("[")
            for start in range(0, rows_, 10_000):
                block = rng.standard_normal((min(10_000, rows_ - start), 16)) * 1e3
                text = ",".join("[" + ",".join(repr(float(v)) for v in row) + "]" for row in block)
                f.write(("," if start else "") + text)
            f.write("]")
        paths.append(p)
        return 0, paths, []
    if name == "safetensors_shards":
        from safetensors.numpy import save_file
        # 50 tensors, 25 split along rows and 25 along columns, 4 shards, ~1 GiB in all.
        rows, cols = 1024, max(4, int(5120 * scale) // 4 * 4)
        rng = np.random.default_rng(0)
        pieces = [dict() for _ in range(4)]
        for layer in range(25):
            for kind, axis in (("col", 0), ("row", 1)):
                full = rng.standard_normal((rows, cols), dtype=np.float32)
                for shard, part in enumerate(np.split(full, 4, axis=axis)):
                    pieces[shard][f"layer{layer:02d}.{kind}.weight"] = np.ascontiguousarray(part)
        for shard, tensors in enumerate(pieces):
            p = folder / f"shard{shard}.safetensors"
            save_file(tensors, str(p), metadata={"format": "np"})
            paths.append(p)
        return 0, paths, ["--axis-for", "*.row.weight=1"]
    if name in ("split_axis0", "split_lastaxis"):
        # 1 GiB of float32 (N, 1024), cut into 8 parts along rows or along columns.
        p = folder / "in.npy"
        fill(p, np.float32, (rows(GIB, 4096), 1024), 0)
        axis = 0 if name == "split_axis0" else 1
        return axis, [p], ["split", "-a", str(axis), "--parts", str(SPLIT_PARTS)]
    if name in ("checkpoint_merge", "checkpoint_reshard", "pytorch_set", "pytorch_file", "split_ranks"):
        import json
        from safetensors.numpy import save_file
        # A model of 32 layers, each a float16 (2048, 4096) and a float32 (1024, 4096) matrix
        # (16 MiB each) and two float32 norms: 1 GiB, written as huggingface_hub shards it.
        rng = np.random.default_rng(0)
        cols = max(8, int(4096 * scale) // 8 * 8)
        tensors = {}
        for layer in range(32):
            prefix = f"model.layers.{layer}"
            tensors[f"{prefix}.mlp.weight"] = rng.standard_normal((2048, cols), dtype=np.float32).astype(np.float16)
            tensors[f"{prefix}.attn.weight"] = rng.standard_normal((1024, cols), dtype=np.float32)
            tensors[f"{prefix}.input_norm.weight"] = np.ones(cols, dtype=np.float32)
            tensors[f"{prefix}.post_norm.weight"] = np.ones(cols, dtype=np.float32)
        limit = max(1, int(SHARD_LIMIT * scale))
        if name.startswith("pytorch_"):
            return pytorch_checkpoint(name, tensors, limit, folder)
        if name == "split_ranks":
            # One file into 4 tensor-parallel ranks by a rules file.
            p = folder / "model.safetensors"
            save_file(tensors, str(p), metadata={"format": "pt"})
            rules_file = folder / "split.rules"
            rules_file.write_text(SPLIT_RANKS_RULES)
            return 0, [p], ["split", "--ranks", str(SPLIT_RANKS), "--rules", str(rules_file)]
        if name == "checkpoint_reshard":
            p = folder / "model.safetensors"
            save_file(tensors, str(p), metadata={"format": "pt"})
            return 0, [p], ["--max-shard-size", str(limit)]
        shards, current, size = [], {}, 0
        for key, t in tensors.items():
            if size + t.nbytes > limit and current:
                shards.append(current)
                current, size = {}, 0
            current[key] = t
            size += t.nbytes
        shards.append(current)
        weight_map = {}
        for i, shard in enumerate(shards):
            file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, str(folder / file), metadata={"format": "pt"})
            weight_map.update({key: file for key in shard})
            paths.append(folder / file)
        total = sum(t.nbytes for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        return 0, paths, []
    if name == "dcp_consolidate":
        return 0, dcp_ranks(folder / "ranks", scale), []
    if name == "dcp_default":
        ckpt = folder / "ckpt"
        cols = max(8, int(4096 * scale) // 8 * 8)
        # A file, not `-c`: the spawned ranks import the script's main module.
        script = folder / "write_dcp.py"
        script.write_text(DCP_DEFAULT_WRITE_PY)
        subprocess.run([sys.executable, str(script), str(ckpt), str(cols)], check=True,
                       stderr=subprocess.DEVNULL)
        return 0, [ckpt / ".metadata", *sorted(ckpt.glob("*.distcp"))], []
    raise SystemExit(f"unknown scenario {name}")


def pytorch_checkpoint(name, tensors, limit, folder):
    """Writes the checkpoint scenarios' tensors with torch.save: for `pytorch_file` one
    `model.pt`, for `pytorch_set` the shards transformers' save_pretrained(safe_serialization=
    False) writes (`pytorch_model-0000i-of-0000N.bin`, split as huggingface_hub splits, and
    `pytorch_model.bin.index.json`); the tjoin arguments convert it into one .safetensors file,
    or a set of shards of at most `limit` bytes."""
    import json
    import torch
    state = {key: torch.from_numpy(t) for key, t in tensors.items()}
    if name == "pytorch_file":
        p = folder / "model.pt"
        torch.save(state, str(p))
        return 0, [p], []
    shards, current, size = [], {}, 0
    for key, t in state.items():
        nbytes = t.numel() * t.element_size()
        if size + nbytes > limit and current:
            shards.append(current)
            current, size = {}, 0
        current[key] = t
        size += nbytes
    shards.append(current)
    weight_map, paths = {}, []
    for i, shard in enumerate(shards):
        file = f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin"
        torch.save(shard, str(folder / file))
        weight_map.update({key: file for key in shard})
        paths.append(folder / file)
    total = sum(t.nbytes for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return 0, paths, ["--max-shard-size", str(limit)]


def dcp_ranks(folder, scale):
    """Writes the rank files of a PyTorch distributed checkpoint of 1 GiB, 4 ranks on a 2x2
    mesh, as HuggingFaceStorageWriter(save_distributed=True) writes them (the same names,
    tensors and DCP_SHARDING_INFO, written directly): per layer a float16 (4096, C) matrix cut
    on both axes (Shard(0), Shard(1)), a float32 (2048, C) matrix cut in 4 along rows, and a
    float32 norm (C,) cut in 4. Floating-point tensors only: torch's consolidation crashes on
    integers."""
    import json
    from safetensors.numpy import save_file
    folder.mkdir()
    cols = max(8, int(4096 * scale) // 8 * 8)
    rng = np.random.default_rng(0)
    ranks = [({}, {}) for _ in range(4)]
    for layer in range(16):
        prefix = f"model.layers.{layer}"
        mlp = rng.standard_normal((4096, cols), dtype=np.float32).astype(np.float16)
        for rank in range(4):
            r, c = rank // 2, rank % 2
            rows, width = 2048, cols // 2
            block = mlp[r * rows:(r + 1) * rows, c * width:(c + 1) * width]
            ranks[rank][0][f"{prefix}.mlp.weight"] = np.ascontiguousarray(block)
            ranks[rank][1][f"{prefix}.mlp.weight"] = {"saved_offsets": [r * rows, c * width]}
        attn = rng.standard_normal((2048, cols), dtype=np.float32)
        norm = rng.standard_normal(cols, dtype=np.float32)
        for rank in range(4):
            tensors, info = ranks[rank]
            tensors[f"{prefix}.attn.weight"] = np.ascontiguousarray(attn[rank * 512:(rank + 1) * 512])
            info[f"{prefix}.attn.weight"] = {"saved_offsets": [rank * 512, 0]}
            width = cols // 4
            tensors[f"{prefix}.norm.weight"] = np.ascontiguousarray(norm[rank * width:(rank + 1) * width])
            info[f"{prefix}.norm.weight"] = {"saved_offsets": [rank * width]}
    paths = []
    for rank, (tensors, info) in enumerate(ranks):
        p = folder / f"shard-{rank + 1:05d}-model-00001-of-00001.safetensors"
        metadata = {"format": "pt", "DCP_VERSION": "1.0", "DCP_SHARDING_INFO": json.dumps(info)}
        save_file(tensors, str(p), metadata=metadata)
        paths.append(p)
    return paths


def warm(paths):
    """Reads the inputs so that a run starts with them in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


def remove(out):
    """Removes an output: a file, or the folder of a sharded one."""
    if out.is_dir():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()


def flush(folder):
    """Writes the folder's file system's dirty pages (the previous run's output) back to disk,
    so that no run pays for its predecessor's writeback: `syncfs` where Python has it, else
    `sync`."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        syncfs = getattr(os, "syncfs", None)
        if syncfs is not None:
            syncfs(fd)
        else:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.syncfs(fd) != 0:
                os.sync()
    finally:
        os.close(fd)


def drop_caches():
    """Empties the page cache (root only), after writing back what is dirty."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def prepare(paths, folder, cold):
    """Starts a run clean: nothing dirty left by an earlier run and, warm, exactly this run's
    inputs in the page cache or, cold, nothing in it at all."""
    if cold:
        drop_caches()
    else:
        flush(folder)
        warm(paths)


def timed(command, out):
    """Runs `command` under /usr/bin/time, for its peak RSS (a process forked from this
    Python would start with Python's own in the count), and reaps that with wait4 for the
    kernel's account of the CPU seconds (user + sys) of it and all it waited for, in
    microsecond steps where /usr/bin/time prints 10 ms ones; the wall time is taken here.
    Returns (wall seconds, CPU seconds, peak RSS in KiB)."""
    remove(out)
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(["/usr/bin/time", "-f", "%M"] + command,
                                   stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        text = errors.read().decode(errors="replace")
        if process.returncode != 0:
            raise SystemExit(f"failed: {' '.join(map(str, command[:8]))} ...\n{text}")
    return seconds, usage.ru_utime + usage.ru_stime, int(text.strip().splitlines()[-1])


def data_offset(path):
    """Where the data of a .npy or .safetensors file starts, or None for other files."""
    with open(path, "rb") as f:
        head = f.read(16)
        if path.suffix == ".npy":
            major = head[6]
            size = int.from_bytes(head[8:10] if major == 1 else head[8:12], "little")
            return (10 if major == 1 else 12) + size
        if path.suffix == ".safetensors":
            return 8 + int.from_bytes(head[:8], "little")
    return None


def raw_copies(paths, folder):
    """The data bytes of each input without its header, for `cat` of the raw bytes (the
    physical limit of a join); None when an input is not a .npy or .safetensors file."""
    offsets = [data_offset(p) for p in paths]
    if None in offsets:
        return None
    raws = []
    for p, offset in zip(paths, offsets):
        raw = folder / "raw" / (p.name + ".raw")
        raw.parent.mkdir(exist_ok=True)
        with open(p, "rb") as f, open(raw, "wb") as out:
            f.seek(offset)
            shutil.copyfileobj(f, out, 16 << 20)
        raws.append(raw)
    return raws


@contextlib.contextmanager
def neighbour(busy):
    """With `busy`, a CPU-bound process on the last core for as long as the block runs: the
    same neighbour for every competitor, as a machine running one job per core has."""
    if not busy:
        yield
        return
    cpu = str((os.cpu_count() or 1) - 1)
    spin = subprocess.Popen(["taskset", "-c", cpu, sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield
    finally:
        spin.kill()
        spin.wait()


def competitors(axis, paths, folder, extra):
    """name -> (command, output path)."""
    if extra[:1] == ["split"]:
        return split_competitors(axis, paths, folder, extra)
    suffix = paths[0].suffix if paths[0].suffix != ".json" else ".npy"
    if paths[0].name == ".metadata":
        suffix = ".safetensors"
    out = {name: folder / f"out_{name}{suffix}" for name in ("tjoin", "numpy", "numpy_ooc", "cat", "safetensors_py")}
    files = [str(p) for p in paths]
    py = sys.executable
    if paths[0].name == ".metadata":
        # DCP's default format: its folder into one file; cat copies the .distcp files.
        ckpt = paths[0].parent
        torch_out = folder / "out_torch.safetensors"
        return {
            "cat": (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files[1:]], out["cat"]),
            "tjoin": ([str(TJOIN), str(ckpt), "-o", str(out["tjoin"])], out["tjoin"]),
            "torch": ([py, "-c", TORCH_DCP_TO_SAFETENSORS_PY, str(ckpt), str(torch_out)], torch_out),
        }
    if paths[0].name.startswith("shard-00001-model-"):
        # Consolidate a distributed checkpoint's rank files (their folder) into one file.
        ranks = paths[0].parent
        torch_out = folder / "out_torch"
        return {
            "cat": (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files], out["cat"]),
            "tjoin": ([str(TJOIN), str(ranks), "-o", str(out["tjoin"])], out["tjoin"]),
            "torch": ([py, "-c", TORCH_CONSOLIDATE_PY, str(ranks), str(torch_out), files[0]], torch_out),
        }
    if paths[0].suffix in (".pt", ".bin"):
        # Convert a PyTorch checkpoint: one file into one .safetensors file, or a set through
        # its index into a set of safetensors shards; cat copies the same bytes.
        catter = (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files], out["cat"])
        if "--max-shard-size" not in extra:
            st = {n: folder / f"out_{n}.safetensors" for n in ("tjoin", "torch")}
            return {
                "cat": catter,
                "tjoin": ([str(TJOIN), files[0], "-o", str(st["tjoin"])], st["tjoin"]),
                "torch": ([py, "-c", TORCH_CONVERT_PY, files[0], str(st["torch"])], st["torch"]),
            }
        index = str(folder / "pytorch_model.bin.index.json")
        limit = extra[extra.index("--max-shard-size") + 1]
        shards = {n: folder / f"out_{n}" for n in ("tjoin", "torch")}
        return {
            "cat": catter,
            "tjoin": ([str(TJOIN), index, "-o", f"{shards['tjoin']}/", *extra], shards["tjoin"]),
            "torch": ([py, "-c", TORCH_CONVERT_PY, index, str(shards["torch"]), limit], shards["torch"]),
        }
    if "--max-shard-size" in extra:
        # Re-shard one file into a folder; cat copies the same bytes.
        shards = {n: folder / f"out_{n}" for n in ("tjoin", "safetensors_py")}
        limit = extra[extra.index("--max-shard-size") + 1]
        return {
            "cat": (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files], out["cat"]),
            "tjoin": ([str(TJOIN), *files, "-o", f"{shards['tjoin']}/", *extra], shards["tjoin"]),
            "safetensors_py": ([py, "-c", CHECKPOINT_RESHARD_PY, files[0], str(shards["safetensors_py"]), limit], shards["safetensors_py"]),
        }
    if (folder / "model.safetensors.index.json").exists():
        # Merge a sharded checkpoint, read through its index, into one file.
        index = str(folder / "model.safetensors.index.json")
        return {
            "cat": (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files], out["cat"]),
            "tjoin": ([str(TJOIN), index, "-o", str(out["tjoin"])], out["tjoin"]),
            "safetensors_py": ([py, "-c", CHECKPOINT_MERGE_PY, index, str(out["safetensors_py"])], out["safetensors_py"]),
        }
    if suffix == ".safetensors":
        return {
            "cat": (["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files], out["cat"]),
            "tjoin": ([str(TJOIN), "-a", str(axis), *extra, *files, "-o", str(out["tjoin"])], out["tjoin"]),
            "safetensors_py": ([py, "-c", SAFETENSORS_PY, str(out["safetensors_py"]), *files], out["safetensors_py"]),
        }
    listed = "--files-from" in extra
    tjoin = [str(TJOIN), "-a", str(axis), *extra, *([] if listed else files), "-o", str(out["tjoin"])]
    catter = ["sh", "-c", 'cat "$@" > "$0"', str(out["cat"]), *files]
    if paths[0].suffix == ".json":
        return {
            "cat": (catter, out["cat"]),
            "tjoin": (tjoin, out["tjoin"]),
            "numpy": ([py, "-c", NUMPY_JSON, str(out["numpy"]), *files], out["numpy"]),
        }
    return {
        "cat": (catter, out["cat"]),
        "tjoin": (tjoin, out["tjoin"]),
        "numpy": ([py, "-c", NUMPY_IN_MEMORY, str(axis), str(out["numpy"]), *files], out["numpy"]),
        "numpy_ooc": ([py, "-c", NUMPY_OUT_OF_CORE, str(axis), str(out["numpy_ooc"]), *files], out["numpy_ooc"]),
    }


def split_competitors(axis, paths, folder, extra):
    """`tjoin split` of one input into a folder of parts (or ranks), against cat of the same
    bytes into one file, and numpy's array_split + save or the DeepSeek-style loop."""
    src = str(paths[0])
    out = {name: folder / f"out_{name}" for name in ("tjoin", "numpy", "deepseek")}
    cat_out = folder / f"out_cat{paths[0].suffix}"
    runs = {"cat": (["sh", "-c", 'cat "$@" > "$0"', str(cat_out), src], cat_out)}
    if "--ranks" in extra:
        mp = extra[extra.index("--ranks") + 1]
        template = f"{out['tjoin']}/model{{rank}}-mp{mp}.safetensors"
        runs["tjoin"] = ([str(TJOIN), *extra, src, "-o", template], out["tjoin"])
        runs["deepseek"] = ([sys.executable, "-c", DEEPSEEK_SPLIT_PY, src, str(out["deepseek"]), mp], out["deepseek"])
        return runs
    parts = extra[extra.index("--parts") + 1]
    runs["tjoin"] = ([str(TJOIN), *extra, src, "-o", f"{out['tjoin']}/part-{{part}}.npy"], out["tjoin"])
    runs["numpy"] = ([sys.executable, "-c", NUMPY_SPLIT, str(axis), parts, src, str(out["numpy"])], out["numpy"])
    return runs


def check_split(runs, out):
    """tjoin's parts must be the files np.save writes of numpy.array_split's parts, byte for
    byte; its ranks must hold the DeepSeek-style loop's tensors, tensor for tensor (the
    framing differs: tjoin carries the input's __metadata__ over, save_file writes none)."""
    if "numpy" in runs:
        command, reference = runs["numpy"]
        subprocess.run(command, check=True)
        names = sorted(p.name for p in reference.iterdir())
        if names != sorted(p.name for p in out.iterdir()):
            raise SystemExit(f"tjoin split wrote {sorted(p.name for p in out.iterdir())}, numpy {names}")
        for n in names:
            if subprocess.run(["cmp", "-s", str(reference / n), str(out / n)]).returncode != 0:
                raise SystemExit(f"tjoin split's {n} differs from numpy's")
        remove(reference)
        return
    from safetensors import safe_open
    command, reference = runs["deepseek"]
    subprocess.run(command, check=True)
    names = sorted(p.name for p in reference.iterdir())
    if names != sorted(p.name for p in out.iterdir()):
        raise SystemExit(f"tjoin split wrote {sorted(p.name for p in out.iterdir())}, the loop {names}")
    for n in names:
        with safe_open(str(out / n), framework="np") as ours, safe_open(str(reference / n), framework="np") as theirs:
            if sorted(ours.keys()) != sorted(theirs.keys()):
                raise SystemExit(f"tjoin's {n} holds other tensors than the loop's")
            for key in ours.keys():
                a, b = ours.get_tensor(key), theirs.get_tensor(key)
                if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                    raise SystemExit(f"tjoin's {key} in {n} differs from the loop's")
    remove(reference)


def run_scenario(name, scale, rounds, workdir, skip, cold, extra_tjoins, modes):
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workdir))
    try:
        axis, paths, extra = scenario_inputs(name, scale, folder)
        size = sum(p.stat().st_size for p in paths)
        runs = competitors(axis, paths, folder, extra)
        raws = None if "cat_raw" in skip else raw_copies(paths, folder)
        if raws:
            out = folder / f"out_cat_raw{runs['cat'][1].suffix}"
            runs["cat_raw"] = (["sh", "-c", 'cat "$@" > "$0"', str(out), *map(str, raws)], out)
        # Freshly written inputs are written back to disk over the next half minute or so, by
        # kernel threads that would take a core from whoever runs meanwhile: flush them first.
        os.sync()
        for label, (binary, env) in extra_tjoins.items():
            command = [binary if a == str(TJOIN) else a for a in runs["tjoin"][0]]
            out = folder / f"out_{label}{runs['tjoin'][1].suffix}"
            # The output is named as it is, or as a folder (a sharded output) with a slash.
            named = str(runs["tjoin"][1])
            # (or, for a split, as a template in the folder it names).
            command = [str(out) + a[len(named):] if a == named or a.startswith(named + "/") else a
                       for a in command]
            runs[label] = (["env", *env, *command] if env else command, out)
        names = [n for n in runs if n not in skip]
        # Each mode on the same inputs, one after another.
        for mode in modes:
            times = {n: [] for n in names}
            cpu = {n: [] for n in names}
            rss = {n: [] for n in names}
            with neighbour(mode["busy"]):
                for round_ in range(rounds):
                    # Rotate the order so no competitor always runs right after another.
                    order = names[round_ % len(names):] + names[:round_ % len(names)]
                    for n in order:
                        command, out = runs[n]
                        remove(out)
                        prepare(raws if n == "cat_raw" else paths, folder, cold)
                        seconds, cpu_seconds, kib = timed(mode["pin"] + command, out)
                        times[n].append(seconds)
                        cpu[n].append(cpu_seconds)
                        rss[n].append(kib)
                        if n.startswith("tjoin") and round_ == 0 and mode is modes[0]:
                            if name.startswith("split_"):
                                check_split(runs, out)
                            else:
                                check_output(axis, paths, out, runs)
                        remove(out)
            report(name, size, names, times, cpu, rss, cold, mode)
    finally:
        shutil.rmtree(folder)


def check_output(axis, paths, out, runs):
    """tjoin's output must equal the reference implementation's, byte for byte (PyTorch's
    consolidation, which writes no metadata and no header padding: tensor for tensor)."""
    if "torch" in runs and paths[0].suffix in (".pt", ".bin"):
        # torch.load + save_file, or save_torch_state_dict: the same bytes, but for the index,
        # which huggingface_hub writes unsorted and without the final newline transformers
        # (and tjoin) write: the same object.
        import json
        command, reference = runs["torch"]
        subprocess.run(command, check=True)
        files = sorted(p.name for p in reference.iterdir()) if reference.is_dir() else [""]
        if reference.is_dir() and files != sorted(p.name for p in out.iterdir()):
            raise SystemExit("tjoin wrote other files than save_torch_state_dict")
        for name in files:
            theirs, ours = (reference / name, out / name) if name else (reference, out)
            if name.endswith(".json"):
                same = json.loads(theirs.read_text()) == json.loads(ours.read_text())
            else:
                same = subprocess.run(["cmp", "-s", str(theirs), str(ours)]).returncode == 0
            if not same:
                raise SystemExit(f"tjoin's {name or 'output'} differs from torch.load + safetensors'")
        remove(reference)
        return
    if "torch" in runs:
        from safetensors import safe_open
        command, reference = runs["torch"]
        subprocess.run(command, check=True)
        ref_file = reference
        if reference.suffix != ".safetensors":
            ref_file = reference / "model-00001-of-00001.safetensors"
        with safe_open(str(out), framework="np") as ours, \
                safe_open(str(ref_file), framework="np") as theirs:
            if sorted(ours.keys()) != sorted(theirs.keys()):
                raise SystemExit("tjoin's output holds other tensors than torch's")
            for key in ours.keys():
                a, b = ours.get_tensor(key), theirs.get_tensor(key)
                if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                    raise SystemExit(f"tjoin's {key} differs from torch's consolidation")
        remove(reference)
        return
    if "safetensors_py" in runs:
        command, reference = runs["safetensors_py"]
        subprocess.run(command, check=True)
        compare = ["diff", "-r", "-q"] if reference.is_dir() else ["cmp", "-s"]
        same = subprocess.run(compare + [str(reference), str(out)]).returncode == 0
        remove(reference)
        if not same:
            raise SystemExit("tjoin's output differs from the safetensors library's")
        return
    if paths[0].suffix == ".json":
        command, reference = runs["numpy"]
        subprocess.run(command, check=True)
        same = subprocess.run(["cmp", "-s", str(reference), str(out)]).returncode == 0
        reference.unlink()
        if not same:
            raise SystemExit("tjoin's output differs from numpy's for the JSON input")
        return
    arrays = [np.load(p, mmap_mode="r") for p in paths]
    reference = out.with_name("reference.npy")
    if sum(a.nbytes for a in arrays) <= 4 * GIB:
        np.save(reference, np.concatenate(arrays, axis=axis))
        same = subprocess.run(["cmp", "-s", str(reference), str(out)]).returncode == 0
        reference.unlink()
        if not same:
            raise SystemExit(f"tjoin's output differs from numpy's for {paths[0].parent.name}")


def paired(a, b):
    """The median of the ratios a/b, round by round, and their range."""
    ratios = [x / y for x, y in zip(a, b) if y > 0]
    if not ratios:
        return float("nan"), "-"
    return statistics.median(ratios), f"{min(ratios):.2f}-{max(ratios):.2f}"


def report(name, size, names, times, cpu, rss, cold, mode):
    cat = times["cat"]
    state = "cold: page cache dropped before every run" if cold else "warm: synced, inputs read, before every run"
    print(f"\n{name}: {size / GIB:.2f} GiB of input, {len(cat)} rounds, {state}, {mode['label']}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"  {'competitor':<14} {'median s':>9} {'min s':>7} {'GB/s':>6} {'cpu s':>7} {'peak RSS':>10} "
          f"{'x cat':>7} {'x cat range':>13} {'x raw':>7} {'cpu x cat':>10}")
    for n in names:
        median = statistics.median(times[n])
        ratio, spread = paired(times[n], cat)
        raw = f"{paired(times[n], times['cat_raw'])[0]:>6.2f}x" if "cat_raw" in times else f"{'-':>7}"
        cpu_ratio = paired(cpu[n], cpu["cat"])[0]
        rate = size / median / 1e9 if median > 0 else float("inf")
        print(f"  {n:<14} {median:>9.3f} {min(times[n]):>7.3f} {rate:>6.2f} {statistics.median(cpu[n]):>7.3f} "
              f"{max(rss[n]) / 1024:>6.1f} MiB {ratio:>6.2f}x {spread:>13} {raw} {cpu_ratio:>9.2f}x")
    for n in names:
        if n.startswith("tjoin_") and "tjoin" in times:
            ratios = [v / t for v, t in zip(times[n], times["tjoin"]) if t > 0]
            print(f"  {n} x tjoin: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), paired")
    for other in ("numpy", "safetensors_py", "torch", "deepseek"):
        if other in times and "tjoin" in times:
            faster = statistics.median(o / t for o, t in zip(times[other], times["tjoin"]) if t > 0)
            print(f"  tjoin is {faster:.1f}x faster than {other} (median of paired ratios)")
    sys.stdout.flush()


APPEND_BASELINES = {
    # The baseline: the same bytes appended by cat (copy_file_range), then every
    # dirty page of the machine flushed.
    "cat+sync": 'cat "$1" >> "$0" && sync',
    # The same durability as tjoin's (fdatasync of the grown file), and no more.
    "cat+sync -d": 'cat "$1" >> "$0" && sync -d "$0"',
    # No flush at all: not the same durability, only to show what the flushes cost.
    "cat": 'cat "$1" >> "$0"',
}


def run_append(scale, rounds, workdir, skip, cold, mode):
    """Appends 64 MiB of float32 rows to targets of 0.5, 1 and 4 GiB: `tjoin --append`
    against `cat` of the same data bytes (the new file without its .npy header) onto the
    target, followed by `sync`, or by `sync -d` of the target only. Each run starts from the
    same target (cut back, its header put back, everything flushed) and a warm cache (or,
    `--cold`, an empty one)."""
    row = 4096
    new_rows = max(1, int((64 << 20) * scale) // row)
    for target_gib in (0.5, 1, 4):
        folder = Path(tempfile.mkdtemp(prefix="append-", dir=workdir))
        try:
            target = folder / "train.npy"
            new = folder / "new.npy"
            raw = folder / "new.raw"
            fill(target, np.float32, (max(1, int(target_gib * GIB * scale) // row), 1024), 0)
            fill(new, np.float32, (new_rows, 1024), 1)
            def header_len(path):
                with open(path, "rb") as f:
                    return f.read(4096).index(b"\n") + 1

            with open(new, "rb") as f, open(raw, "wb") as out:
                f.seek(header_len(new))
                shutil.copyfileobj(f, out, 16 << 20)
            old_len = target.stat().st_size
            with open(target, "rb") as f:
                old_header = f.read(header_len(target))
            rows_before = np.load(target, mmap_mode="r").shape[0]

            def reset():
                with open(target, "r+b") as f:
                    f.truncate(old_len)
                    f.seek(0)
                    f.write(old_header)
                os.sync()

            runs = {"tjoin": [str(TJOIN), "--append", "-a", "0", str(target), str(new)]}
            for name, script in APPEND_BASELINES.items():
                runs[name] = ["sh", "-c", script, str(target), str(raw)]
            names = [n for n in runs if n not in skip]
            times = {n: [] for n in names}
            rss = {n: [] for n in names}
            os.sync()
            with neighbour(mode["busy"]):
                for round_ in range(rounds):
                    order = names[round_ % len(names):] + names[:round_ % len(names)]
                    for n in order:
                        prepare([new, raw], folder, cold)
                        seconds, _, kib = timed(mode["pin"] + runs[n], folder / "unused")
                        times[n].append(seconds)
                        rss[n].append(kib)
                        if n == "tjoin" and round_ == 0:
                            check_append(target, raw, rows_before + new_rows, old_len)
                        reset()
            appended = raw.stat().st_size
            print(f"\nappend: {appended / (1 << 20):.0f} MiB onto a {old_len / GIB:.2f} GiB "
                  f"target, {rounds} rounds")
            bases = [b for b in ("cat+sync", "cat+sync -d") if b in times]
            print(f"  {'competitor':<14} {'median s':>9} {'GB/s':>6} {'peak RSS':>10} "
                  + " ".join(f"{'x ' + b:>14}" for b in bases))

            def ratio(n, base):
                return statistics.median(t / c for t, c in zip(times[n], times[base]))

            for n in names:
                median = statistics.median(times[n])
                ratios = " ".join(f"{ratio(n, b):>13.2f}x" for b in bases)
                print(f"  {n:<14} {median:>9.3f} {appended / median / 1e9:>6.2f} "
                      f"{max(rss[n]) / 1024:>8.1f} MiB {ratios}")
            sys.stdout.flush()
        finally:
            shutil.rmtree(folder)


def check_append(target, raw, rows, old_len):
    """The grown target has the new shape, and the new data after the old end."""
    grown = np.load(target, mmap_mode="r")
    if grown.shape[0] != rows:
        raise SystemExit(f"tjoin --append gave {grown.shape[0]} rows, not {rows}")
    with open(target, "rb") as f, open(raw, "rb") as r:
        f.seek(old_len)
        while True:
            a, b = f.read(16 << 20), r.read(16 << 20)
            if a != b:
                raise SystemExit("tjoin --append wrote other bytes than the input's data")
            if not a:
                break


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full input sizes")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per scenario")
    parser.add_argument("--workdir", default=str(ROOT / "benches" / "data"), help="where inputs go")
    parser.add_argument("--skip", default="", help="competitors to leave out, comma-separated")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before every run instead of warming the inputs (needs root)")
    parser.add_argument("--cores", type=int, choices=(1,), help="1: pin every competitor (and all it starts) to core 0 with taskset")
    parser.add_argument("--busy", action="store_true", help="run a CPU-bound neighbour on the last core throughout, the same for every competitor")
    parser.add_argument("--modes", help="several modes in turn on the same inputs, comma-separated: free (all "
                        "cores free), one (--cores 1), busy (--busy), one+busy")
    parser.add_argument("--also", action="append", default=[], metavar="LABEL=BINARY[,VAR=VALUE...]",
                        help="another tjoin to run as a competitor (an older build, or one with environment variables set)")
    parser.add_argument("scenarios", nargs="*", default=["axis0", "axis0_ragged", "lastaxis_small", "mid", "fortran", "gather", "many_small", "safetensors_shards", "cast", "json_parse", "append", "checkpoint_merge", "checkpoint_reshard", "dcp_consolidate", "pytorch_set", "pytorch_file", "dcp_default", "split_axis0", "split_lastaxis", "split_ranks"])
    args = parser.parse_args()
    if args.cold and os.geteuid() != 0:
        raise SystemExit("--cold drops the page cache before every run, which needs root")
    extra_tjoins = {}
    for spec in args.also:
        label, _, rest = spec.partition("=")
        binary, *env = rest.split(",")
        extra_tjoins[f"tjoin_{label}"] = (binary or str(TJOIN), env)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    def mode_of(one, busy):
        label = ", ".join(filter(None, ["one core (taskset -c 0)" if one else "",
                                        "a busy neighbour on the last core" if busy else ""])) or "all cores free"
        return {"pin": ["taskset", "-c", "0"] if one else [], "busy": busy, "label": label}

    if args.modes:
        words = args.modes.split(",")
        if any(set(w.split("+")) - {"free", "one", "busy"} for w in words):
            raise SystemExit(f"--modes takes free, one, busy and one+busy, not {args.modes}")
        modes = [mode_of("one" in w.split("+"), "busy" in w.split("+")) for w in words]
    else:
        modes = [mode_of(bool(args.cores), args.busy)]
    if any(m["pin"] or m["busy"] for m in modes) and shutil.which("taskset") is None:
        raise SystemExit("--cores and --busy pin processes with taskset (util-linux), which is missing")
    print(f"tjoin benchmark, {time.strftime('%Y-%m-%d %H:%M')}, scale {args.scale}, {os.cpu_count()} cores, "
          f"{'cold' if args.cold else 'warm'}, {'; '.join(m['label'] for m in modes)}, load {os.getloadavg()[0]:.1f}")
    skip = set(filter(None, args.skip.split(",")))
    for name in args.scenarios:
        if name == "append":
            for mode in modes:
                run_append(args.scale, args.rounds, Path(args.workdir), skip, args.cold, mode)
        else:
            run_scenario(name, args.scale, args.rounds, Path(args.workdir), skip, args.cold, extra_tjoins, modes)


if __name__ == "__main__":
    main()
