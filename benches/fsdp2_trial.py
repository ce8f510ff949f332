"""The FSDP2 trial of issue 31 (item 3), tried as a user would: a Llama (transformers) wrapped
with FSDP2 `fully_shard` on gloo CPU processes, each rank saving `torch.save(model.state_dict(),
f"model_world_size_{N}_rank_{r}.pt")` (verl's naming); tjoin consolidates the folder; the
result is loaded into transformers and its logits compared with the model that was saved.

    cargo build --release && python3 benches/fsdp2_trial.py [--big]

Without --big: a tiny Llama on 2 and 4 ranks (logits must be equal, bit for bit). With --big:
also a Llama of about 400 MB float32 on 4 ranks, timed against `cat` of the rank files and a
Python merge (load every rank, cat each DTensor's local blocks, save_file), with peak RSS from
/usr/bin/time. Writes under benches/data/fsdp2_trial/. Needs torch, transformers, safetensors.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "benches", "data", "fsdp2_trial")
TJOIN = os.path.join(ROOT, "target", "release", "tjoin")

TINY = dict(vocab_size=101, hidden_size=48, intermediate_size=88, num_hidden_layers=3,
            num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64)
BIG = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
           num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=256)


def build(cfg):
    torch.manual_seed(1234)
    return LlamaForCausalLM(LlamaConfig(**cfg)).float().eval()


def rank_main(rank, world, cfg, folder, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = build(cfg)
        mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        path = os.path.join(folder, f"model_world_size_{world}_rank_{rank}.pt")
        torch.save(model.state_dict(), path)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def save_ranks(cfg, world, name, port):
    folder = os.path.join(DATA, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    mp.spawn(rank_main, args=(world, cfg, folder, port), nprocs=world, join=True)
    return folder


def timed(command):
    """Wall time and peak RSS (MiB) of a command, by /usr/bin/time -v."""
    start = time.perf_counter()
    run = subprocess.run(["/usr/bin/time", "-v"] + command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{command} failed: {run.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", run.stderr).group(1))
    return seconds, rss / 1024


def trial(cfg, world, name, port):
    folder = save_ranks(cfg, world, name, port)
    out = os.path.join(DATA, f"{name}.safetensors")
    seconds, rss = timed([TJOIN, folder, "-o", out])
    ids = torch.arange(40).reshape(2, 20) % cfg["vocab_size"]
    reference = build(cfg)
    with torch.no_grad():
        want = reference(ids).logits
    model = LlamaForCausalLM(LlamaConfig(**cfg)).float().eval()
    state = load_file(out)
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        got = model(ids).logits
    same = all(torch.equal(state[k], v) for k, v in reference.state_dict().items())
    print(f"{name}: {world} ranks, {len(state)} tensors, state dict equal: {same}, logits "
          f"equal: {torch.equal(got, want)}, tjoin {seconds:.2f} s, {rss:.1f} MiB")
    return folder, out


PY_MERGE = """
import sys, glob, torch
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor
files = sorted(glob.glob(sys.argv[1] + "/*_rank_*.pt"), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))
states = [torch.load(f, weights_only=False) for f in files]
out = {}
for k, v in states[0].items():
    if isinstance(v, DTensor):
        out[k] = torch.cat([s[k].to_local() for s in states], dim=v.placements[0].dim).contiguous()
    else:
        out[k] = v
save_file(out, sys.argv[2], metadata={"format": "pt"})
"""


def main():
    os.makedirs(DATA, exist_ok=True)
    trial(TINY, 2, "tiny_ws2", 29710)
    trial(TINY, 4, "tiny_ws4", 29711)
    if "--big" not in sys.argv:
        return
    folder, out = trial(BIG, 4, "big_ws4", 29712)
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    size = sum(os.path.getsize(f) for f in files)
    subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)  # warm the cache
    cat = timed(["sh", "-c", f"cat {' '.join(files)} > {out}.cat"])
    os.remove(f"{out}.cat")
    tjoin = timed([TJOIN, folder, "-o", out])
    python_out = os.path.join(DATA, "big_python.safetensors")
    python = timed([sys.executable, "-c", PY_MERGE, folder, python_out])
    identical = open(out, "rb").read() == open(python_out, "rb").read()
    print(f"big_ws4: {size / 2**20:.0f} MiB of rank files; cat {cat[0]:.2f} s {cat[1]:.1f} MiB; "
          f"tjoin {tjoin[0]:.2f} s {tjoin[1]:.1f} MiB; Python merge {python[0]:.2f} s "
          f"{python[1]:.1f} MiB; outputs identical: {identical}")


if __name__ == "__main__":
    main()
