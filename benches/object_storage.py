#!/usr/bin/env python3
"""Object storage on the loopback (issue 44): a 1 GiB axis-0 join from S3 to S3 by tjoin,
against boto3's transfer manager moving the same bytes (a parallel ranged download of both
inputs, then a multipart upload of the joined bytes, numpy's header and both inputs' data) at
the same concurrency (4) and part size (8 MiB), checked to be the same object by its ETag;
and the requests a --dry-run of a 100-shard set sends. Paired: each round runs both, the
order alternating; the ratio is per round. Benchmarks are run by hand (Python, boto3, moto
and GNU time needed), never by CI.

The S3 server is moto's (`pip install 'moto[server]==5.2.1'`), started here on 127.0.0.1; both
competitors talk to the same server, in alternation, `--rounds` times each. Each run is a
separate process whose wall time and peak RSS GNU time measures.

    python3 benches/object_storage.py --tjoin target/wheel-ci/tjoin [--gib 1] [--rounds 3]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}

BOTO = r"""
import sys, boto3
import numpy as np
from boto3.s3.transfer import TransferConfig
endpoint, folder, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=endpoint)
config = TransferConfig(max_concurrency=4, multipart_chunksize=8 << 20, multipart_threshold=8 << 20)
for name in ["a.npy", "b.npy"]:
    s3.download_file("bench", "in/" + name, folder + "/" + name, Config=config)
# The join's bytes, as numpy writes them: one header for the joined shape, then the data of
# each input without its header (the same bytes tjoin uploads, so the ETags compare).
with open(folder + "/out.npy", "wb") as out:
    header = {"descr": "<f4", "fortran_order": False, "shape": (2 * rows, 1024)}
    np.lib.format.write_array_header_1_0(out, header)
    for name in ["a.npy", "b.npy"]:
        with open(folder + "/" + name, "rb") as f:
            np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            while chunk := f.read(8 << 20):
                out.write(chunk)
s3.upload_file(folder + "/out.npy", "bench", "out/boto.npy", Config=config)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(command, env):
    """Wall seconds and peak RSS (MiB) of one run, by GNU time."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.monotonic()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name] + command,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - start
        return wall, int(report.read().split()[-1]) / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tjoin", required=True)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, **ENV)
    try:
        time.sleep(2)
        import boto3
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        work = tempfile.mkdtemp()
        rows = int(args.gib * (1 << 30) / 2 / 4096)
        for name in ["a.npy", "b.npy"]:
            np.save(f"{work}/{name}", np.random.default_rng(1).random((rows, 1024), np.float32))
            s3.upload_file(f"{work}/{name}", "bench", "in/" + name)
        joined = ["-a", "0", "s3://bench/in/a.npy", "s3://bench/in/b.npy",
                  "-o", "s3://bench/out/tjoin.npy"]
        tjoin = [args.tjoin] + joined
        boto = [sys.executable, "-c", BOTO, endpoint, work, str(rows)]
        times = {"tjoin": [], "boto3": []}
        loads = [os.getloadavg()[0]]
        for round in range(args.rounds):
            # The order alternates, so that neither always runs on a warmer server.
            order = [("tjoin", tjoin), ("boto3", boto)]
            for name, command in order if round % 2 == 0 else order[::-1]:
                times[name].append(timed(command, env))
            loads.append(os.getloadavg()[0])
        etag = lambda key: s3.head_object(Bucket="bench", Key=key)["ETag"]
        # Both uploads have 8 MiB parts: the same ETag is the same bytes.
        same = etag("out/tjoin.npy") == etag("out/boto.npy")
        load = f"load {min(loads):.1f} to {max(loads):.1f}"
        for name, runs in times.items():
            walls = sorted(w for w, _ in runs)
            rss = max(r for _, r in runs)
            print(f"{name:6} median {walls[len(walls) // 2]:.2f} s, fastest {walls[0]:.2f} s, "
                  f"peak RSS {rss:.0f} MiB ({args.gib} GiB, {load})")
        ratios = sorted(t[0] / b[0] for t, b in zip(times["tjoin"], times["boto3"]))
        print(f"tjoin / boto3 per round: {', '.join(f'{r:.2f}' for r in ratios)}, median "
              f"{ratios[len(ratios) // 2]:.2f}; the same bytes (ETag): {same}")
        if not same:
            sys.exit("tjoin's object differs from the join's bytes")
        # A 100-shard set's --dry-run: its requests, from moto's access log.
        names = [f"model-{i:05d}-of-00100.safetensors" for i in range(1, 101)]
        import json
        from safetensors.numpy import save_file
        weight_map = {}
        for i, name in enumerate(names):
            save_file({f"layer.{i}.weight": np.zeros((64, 64), np.float32)}, f"{work}/{name}")
            s3.upload_file(f"{work}/{name}", "bench", "set/" + name)
            weight_map[f"layer.{i}.weight"] = name
        index = json.dumps({"metadata": {"total_size": 100 * 64 * 64 * 4}, "weight_map": weight_map})
        s3.put_object(Bucket="bench", Key="set/model.safetensors.index.json", Body=index.encode())
        log.flush()
        before = len(open(log.name).read().splitlines())
        subprocess.run([args.tjoin, "s3://bench/set/model.safetensors.index.json", "--dry-run"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        lines = open(log.name).read().splitlines()[before:]
        requests = [l for l in lines if re.search(r'"(GET|HEAD|PUT|POST) ', l)]
        heads = sum('"HEAD ' in l for l in requests)
        print(f"--dry-run of a 100-shard set: {len(requests)} requests ({heads} HEAD)")
    finally:
        moto.kill()


if __name__ == "__main__":
    main()
