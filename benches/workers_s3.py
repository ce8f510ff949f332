#!/usr/bin/env python3
"""A job of N workers into S3 on the loopback (issue 45): one 2 GiB axis-0 join of four float32
`.npy` files (512 MiB each, local, in the page cache) into one object on moto's S3 server, by
one process and by jobs of 1, 2 and 4 workers (`--workers N --begin`, the N `--worker I/N`
started at once, each in its own working and temporary folder as separate machines would be,
then `--workers N --commit`). Per run: the wall time of each step, each worker's bytes (its
share, from `--dry-run --workers N`) and peak RSS (GNU time). Every output is checked to hold
the one-process output's bytes (SHA-256 of a streamed GET, once per kind of run). Rounds
alternate the order of the kinds. Run by hand (numpy, boto3, moto, GNU time), never by CI.

    python3 benches/workers_s3.py --tjoin $CARGO_TARGET_DIR/wheel-ci/tjoin [--gib 2] [--rounds 2]
"""

import argparse
import hashlib
import os
import re
import socket
import subprocess
import tempfile
import time

import numpy as np

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command, env, cwd=None):
    """Starts `command` under GNU time; returns (process, report file)."""
    report = tempfile.NamedTemporaryFile("r", suffix=".time")
    process = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", report.name] + command,
                               env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    return process, report


def finish(process, report):
    """Waits for a run started by `start`; returns its peak RSS in MiB."""
    _, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {err}")
    return int(report.read().split()[-1]) / 1024


def timed(command, env, cwd=None):
    begun = time.monotonic()
    rss = finish(*start(command, env, cwd))
    return time.monotonic() - begun, rss


def shares(tjoin, join, n, env):
    """Each worker's bytes, as `--dry-run --workers N` prints them."""
    text = subprocess.run([tjoin] + join + ["--workers", str(n), "--dry-run"], env=env,
                          check=True, capture_output=True, text=True).stdout
    return [int(b) for b in re.findall(r"worker \d+/\d+\s+bytes \S+\s+(\d+) bytes", text)]


def job(tjoin, join, n, env, work):
    """One job of `n` workers: wall of each step, and each worker's peak RSS."""
    wall = {}
    begun = time.monotonic()
    timed([tjoin] + join + ["--workers", str(n), "--begin"], env)
    wall["begin"] = time.monotonic() - begun
    running = []
    begun = time.monotonic()
    for i in range(n):
        # Each worker in its own working and temporary folder, as on its own machine.
        home = tempfile.mkdtemp(dir=work, prefix=f"w{i}-")
        os.makedirs(f"{home}/tmp")
        running.append(start([tjoin] + join + ["--worker", f"{i}/{n}"],
                             dict(env, TMPDIR=f"{home}/tmp"), cwd=home))
    rss = [finish(*run) for run in running]
    wall["workers"] = time.monotonic() - begun
    begun = time.monotonic()
    timed([tjoin] + join + ["--workers", str(n), "--commit"], env)
    wall["commit"] = time.monotonic() - begun
    return wall, rss


def digest(s3, key):
    body = s3.get_object(Bucket="bench", Key=key)["Body"]
    sha = hashlib.sha256()
    while chunk := body.read(8 << 20):
        sha.update(chunk)
    return sha.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tjoin", required=True)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, **ENV)
    work = tempfile.mkdtemp(prefix="workers_s3-")
    try:
        time.sleep(2)
        import boto3
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        rows = int(args.gib * (1 << 30) / 4 / 4096)
        inputs = []
        for i in range(4):
            path = f"{work}/in{i}.npy"
            np.save(path, np.random.default_rng(i).random((rows, 1024), np.float32))
            inputs.append(path)
        join = lambda key: ["-a", "0"] + inputs + ["-o", f"s3://bench/{key}", "--progress",
                                                   "never"]
        kinds = ["one"] + [int(n) for n in args.workers.split(",")]
        results = {kind: [] for kind in kinds}
        loads = [os.getloadavg()[0]]
        digests = {}
        for round in range(args.rounds):
            order = kinds if round % 2 == 0 else kinds[::-1]
            for kind in order:
                key = f"out/{kind}.npy"
                if kind == "one":
                    wall, rss = timed([args.tjoin] + join(key), env)
                    results[kind].append(({"all": wall}, [rss]))
                else:
                    results[kind].append(job(args.tjoin, join(key), kind, env, work))
                if kind not in digests:
                    digests[kind] = digest(s3, key)
                s3.delete_object(Bucket="bench", Key=key)
                loads.append(os.getloadavg()[0])
        same = len(set(digests.values())) == 1
        print(f"{args.gib} GiB, {args.rounds} rounds, load {min(loads):.1f} to "
              f"{max(loads):.1f}, every output the one-process output's bytes: {same}")
        for kind, runs in results.items():
            steps = {}
            for wall, _ in runs:
                for step, seconds in wall.items():
                    steps.setdefault(step, []).append(seconds)
            total = sorted(sum(w.values()) for w, _ in runs)
            said = ", ".join(f"{s} {min(v):.1f}-{max(v):.1f} s" for s, v in steps.items())
            rss = max(max(r) for _, r in runs)
            if kind == "one":
                print(f"one process: wall {said}; peak {rss:.0f} MiB")
            else:
                per = shares(args.tjoin, join("out/x.npy"), kind, env)
                print(f"{kind} workers: total {total[0]:.1f}-{total[-1]:.1f} s ({said}); "
                      f"bytes per worker {min(per) / 2**20:.1f}-{max(per) / 2**20:.1f} MiB; "
                      f"peak per worker {rss:.0f} MiB")
    finally:
        moto.terminate()
        moto.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
