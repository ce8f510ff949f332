"""The DeepSpeed benchmark of issue 43: a ZeRO stage-3 checkpoint of a 537 MB float32 model on 2
ranks, with Adam moments (2x the weights), consolidated by tjoin and by DeepSpeed's own
zero_to_fp32.py.

    cargo build --release                       # tjoin in $CARGO_TARGET_DIR (or target/)/release
    python3 benches/deepspeed_zero.py make      # the checkpoint, under benches/data/deepspeed_zero/
    python3 benches/deepspeed_zero.py pages     # which pages of the optimizer files tjoin reads
    python3 benches/deepspeed_zero.py check     # tjoin's output == the script's, byte for byte
    python3 benches/deepspeed_zero.py commands  # the commands timed against each other

`make` trains one step (gloo CPU processes, DS_ACCELERATOR=cpu, torch.optim.Adam with
zero_allow_untested_optimizer) of 8 Linear(4096, 4096) layers (134 M parameters, untied so that
the script's --safe_serialization does not crash) and saves the checkpoint (about 1.6 GB: the
weights and the two moments), then writes the ranks' fp32 partitions as plain files
(`fp32_rank_R.bin`, the bytes tjoin gathers) for the `cat` yardstick.

`pages` drops the checkpoint's files from the page cache (posix_fadvise DONTNEED after a sync),
runs tjoin once, and counts with mincore which pages of each large storage member of each
optimizer file are resident, and which: the fp32 partition's must be; of the moments', only
the pages the archive's listing touches (a member's local header shares a page with the
neighbouring members' data) and the kernel's readahead after the pickle at the file's head.

Timings are taken by hand, paired, with the commands `commands` prints (benches/README.md).
"""

import ctypes
import mmap
import os
import socket
import struct
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "benches", "data", "deepspeed_zero")
CKPT = os.path.join(DATA, "ckpt")
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TJOIN = os.path.join(TARGET, "release", "tjoin")
TAG = "global_step1"
LAYERS, WIDTH = 8, 4096


def rank_main(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world), DS_ACCELERATOR="cpu")
    import deepspeed
    import torch

    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
    config = {
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1000,
    }
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    loss = engine(torch.randn(1, WIDTH)).pow(2).mean()
    engine.backward(loss)
    engine.step()
    engine.save_checkpoint(CKPT, tag=TAG)
    torch.distributed.barrier()


def members(path):
    """Each member of a torch.save archive: (name, data start, size)."""
    out = []
    with open(path, "rb") as f, zipfile.ZipFile(path) as z:
        for info in z.infolist():
            f.seek(info.header_offset)
            header = f.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            out.append((info.filename, info.header_offset + 30 + name_len + extra_len, info.file_size,
                        info.header_offset))
    return out


def optim_files():
    folder = os.path.join(CKPT, TAG)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith("_optim_states.pt"))


def make():
    import torch.multiprocessing as mp

    os.makedirs(DATA, exist_ok=True)
    if not os.path.exists(os.path.join(CKPT, "latest")):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(rank_main, args=(2, port), nprocs=2)
    import torch

    for rank, path in enumerate(optim_files()):
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=False)["optimizer_state_dict"]
        with open(os.path.join(DATA, f"fp32_rank_{rank}.bin"), "wb") as out:
            for group in state["fp32_flat_groups"]:
                out.write(group.detach().contiguous().numpy().tobytes())


def residency(path):
    """Whether each page of `path` is in the page cache (mincore over a map of the file)."""
    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        libc.munmap(ctypes.c_void_p(addr), size)
        return [b & 1 for b in vec.raw]
    finally:
        os.close(fd)


def pages():
    files = optim_files()
    # Everything read to find the members and their roles is read before the files are dropped
    # from the page cache: the count after tjoin's run is tjoin's alone.
    layout = {}
    for rank, path in enumerate(files):
        with open(os.path.join(DATA, f"fp32_rank_{rank}.bin"), "rb") as f:
            fp32_head = f.read(4096)
        big = []
        for name, start, size, header in members(path):
            if size > 1 << 20:
                with open(path, "rb") as f:
                    f.seek(start)
                    role = "fp32 partition" if f.read(4096) == fp32_head else "moment"
                big.append((name, start, size, header, role))
        layout[path] = big
    os.sync()
    folder = os.path.join(CKPT, TAG)
    for name in os.listdir(folder):
        fd = os.open(os.path.join(folder, name), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    before = {path: sum(residency(path)) for path in files}
    out = os.path.join(DATA, "pages.safetensors")
    subprocess.run([TJOIN, "-q", CKPT, "-o", out], check=True)
    os.remove(out)
    page = mmap.PAGESIZE
    for path in files:
        resident = residency(path)
        print(f"{os.path.basename(path)}: {before[path]} pages resident before the run, "
              f"{sum(resident)} of {len(resident)} after")
        for name, start, size, header, role in layout[path]:
            first, last = start // page, (start + size - 1) // page
            held = [i for i in range(first, last + 1) if resident[i]]
            where = ", ".join(f"page {i - first}" + (" (holds its local header)"
                                                    if i == header // page else "")
                              for i in held[:6]) + (" ..." if len(held) > 6 else "")
            print(f"  {name} ({role}, {size} bytes): {len(held)} of {last - first + 1} pages "
                  f"resident{': ' + where if held and len(held) < last - first + 1 else ''}")


def check():
    import filecmp

    ours = os.path.join(DATA, "tjoin.safetensors")
    theirs = os.path.join(DATA, "script")
    subprocess.run([TJOIN, "-q", CKPT, "-o", ours], check=True)
    subprocess.run([sys.executable, os.path.join(CKPT, "zero_to_fp32.py"), CKPT, theirs,
                    "--safe_serialization"], check=True, capture_output=True)
    same = filecmp.cmp(ours, os.path.join(theirs, "model.safetensors"), shallow=False)
    print("tjoin's output and zero_to_fp32.py's:", "identical" if same else "DIFFERENT")


def commands():
    parts = " ".join(os.path.join(DATA, f"fp32_rank_{r}.bin") for r in range(2))
    print(f"{TJOIN} -q {CKPT} -o {DATA}/out.safetensors")
    print(f"sh -c 'cat {parts} > {DATA}/cat.bin'")
    print(f"{sys.executable} {CKPT}/zero_to_fp32.py {CKPT} {DATA}/script --safe_serialization")


if __name__ == "__main__":
    {"make": make, "pages": pages, "check": check, "commands": commands}[sys.argv[1]]()
