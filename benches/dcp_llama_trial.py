"""Trial of DCP's default format as a user meets it: a tiny transformers Llama sharded with
FSDP2 (`fully_shard`) over N gloo CPU ranks, its state dict saved with
`torch.distributed.checkpoint.save({"model": ...})` (the default FileSystemWriter),
consolidated by tjoin, loaded back by transformers, and its logits compared with those of the
model that was saved. Needs torch, transformers and a built tjoin (`cargo build --release`).

    python3 benches/dcp_llama_trial.py [RANKS ...]     # default: 2 4
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

TJOIN = os.environ.get("TJOIN", os.path.join(os.path.dirname(__file__), "..", "target", "release", "tjoin"))
CONFIG = dict(vocab_size=250, hidden_size=96, intermediate_size=200, num_hidden_layers=3,
              num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64)


def model():
    torch.manual_seed(1234)
    return LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()


def rank_main(rank, world, folder, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    m = model()
    mesh = init_device_mesh("cpu", (world,))
    for layer in m.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    dcp.save({"model": get_model_state_dict(m)}, checkpoint_id=folder)
    dist.destroy_process_group()


def trial(world, port):
    tmp = tempfile.mkdtemp()
    folder, out = os.path.join(tmp, "ckpt"), os.path.join(tmp, "out")
    mp.spawn(rank_main, args=(world, folder, port), nprocs=world, join=True)
    os.makedirs(out)
    start = time.perf_counter()
    run = subprocess.run([TJOIN, folder, "-o", os.path.join(out, "model.safetensors")],
                         capture_output=True, text=True)
    took = time.perf_counter() - start
    assert run.returncode == 0, run.stderr
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(LlamaConfig(**CONFIG).to_dict(), f)
    saved = model()
    loaded = LlamaForCausalLM.from_pretrained(out).eval()
    ids = torch.arange(40).reshape(2, 20) % CONFIG["vocab_size"]
    with torch.no_grad():
        want, got = saved(ids).logits, loaded(ids).logits
    same = torch.equal(want, got)
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    files = sorted(os.listdir(folder))
    print(f"{world} ranks: {len(files)} files in the checkpoint, tjoin {took * 1000:.0f} ms, "
          f"{size} bytes out, logits equal: {same}")
    shutil.rmtree(tmp)
    return same


if __name__ == "__main__":
    worlds = [int(a) for a in sys.argv[1:]] or [2, 4]
    ok = all(trial(w, 29700 + w) for w in worlds)
    sys.exit(0 if ok else 1)
