#!/usr/bin/env python3
"""fuzz/make_corpus.py: writes the seed corpus of each fuzz target into fuzz/corpus/<target>/:
a few small valid inputs and edge cases, so the fuzzers start from the formats' real shapes.
Run from the repository root with a built `train` (for the checkpoints): the committed corpus is
its output; re-run it when a format changes.

    python3 fuzz/make_corpus.py build/apps/train
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def idx_corpus():
    images = idx([3, 2, 2], range(12))
    put("fuzz_idx", "images_3x2x2", images)
    put("fuzz_idx", "labels_3", idx([3], [1, 2, 3]))
    put("fuzz_idx", "images_3x2x2.gz", gzip.compress(images, mtime=0))
    put("fuzz_idx", "two_members.gz", gzip.compress(images[:9], mtime=0) + gzip.compress(images[9:], mtime=0))
    put("fuzz_idx", "truncated", images[:-3])
    put("fuzz_idx", "zero_dims", bytes([0, 0, 8, 0]))


def safetensors(entries, metadata=None):
    header, blob = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def safetensors_corpus():
    w = struct.pack("<4f", 1, 2, 3, 4)
    put("fuzz_safetensors", "one_f32", safetensors([("weight", "F32", [2, 2], w)]))
    put("fuzz_safetensors", "meta_u8_i64", safetensors(
        [("a", "U8", [3], b"abc"), ("b", "I64", [1], struct.pack("<q", -5))], {"engine.step": "3"}))
    put("fuzz_safetensors", "empty", safetensors([]))
    put("fuzz_safetensors", "scalar", safetensors([("s", "F32", [], struct.pack("<f", 7))]))


def checkpoint_corpus(train):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        for split, n in (("train", 32), ("t10k", 8)):
            with open(os.path.join(data, split + "-images-idx3-ubyte"), "wb") as f:
                f.write(idx([n, 28, 28], [(i * 7) % 256 for i in range(n * 784)]))
            with open(os.path.join(data, split + "-labels-idx1-ubyte"), "wb") as f:
                f.write(idx([n], [i % 10 for i in range(n)]))
        for opt, byte in (("sgd", b"\x00"), ("adam", b"\x01")):
            ck = os.path.join(tmp, opt + ".safetensors")
            subprocess.run([train, "--model", "linear", "--optimizer", opt, "--data-dir", data,
                            "--batch-size", "8", "--steps", "2", "--epochs", "3", "--threads", "1",
                            "--checkpoint", ck, "--checkpoint-every", "1"],
                           check=True, stdout=subprocess.DEVNULL)
            with open(ck, "rb") as f:
                put("fuzz_checkpoint", opt, byte + f.read())


def store_corpus():
    def s(b):
        return struct.pack("<I", len(b)) + b
    # The first byte 0 makes the target send the store's handshake first.
    put("fuzz_store", "set_get", b"\x00" + b"\x01" + s(b"k") + s(b"v") + b"\x02" + s(b"k") + struct.pack("<q", 10))
    put("fuzz_store", "add_check", b"\x00" + b"\x03" + s(b"n") + struct.pack("<q", 5) + b"\x04" + struct.pack("<I", 1) + s(b"n"))
    put("fuzz_store", "wait", b"\x00" + b"\x05" + struct.pack("<I", 2) + s(b"a") + s(b"b") + struct.pack("<q", 20))
    put("fuzz_store", "no_handshake", b"\x01GET / HTTP/1.0\r\n\r\n")


def frame(kind, op, dtype, redop, root, step, seq, count, payload):
    return struct.pack("<IBBBBiIQQQ", 0x46474E45, kind, op, dtype, redop, root, step, seq, count, len(payload)) + payload


def frame_corpus():
    payload = struct.pack("<16f", *range(16))
    # The target expects #1 all_reduce(count=16, F32, SUM), step 0, 64 bytes; byte 0 picks copy/reduce.
    ok = frame(1, 1, 0, 0, -1, 0, 1, 16, payload)
    put("fuzz_frame", "copy", b"\x00" + ok)
    put("fuzz_frame", "reduce", b"\x01" + ok)
    put("fuzz_frame", "abort", b"\x00" + frame(2, 1, 0, 0, -1, 0, 1, 0, b"rank 1: gone\0\0\0\0"))
    put("fuzz_frame", "wrong_count", b"\x00" + frame(1, 1, 0, 0, -1, 0, 1, 15, payload[:60] + b"\0" * 4))


def hostlist_corpus():
    for i, text in enumerate(["node[01-04,07]", "a[1-2],b3", "n[1-2]-ib[3-4]", "login1 login2", "x[", "c[9-10]y"]):
        put("fuzz_hostlist", "list%d" % i, text.encode())


def flight_dump_corpus():
    def entry(seq, state, started, done=None, **kw):
        e = {"comm": 0, "group": 0, "seq": seq, "op": "all_reduce", "dtype": "F32", "redop": "SUM",
             "root": -1, "count": 421642, "started_s": started, "completed_s": done, "state": state}
        e.update(kw)
        return e

    def dump(rank, world, reason, entries):
        return {"format": "engine-flight-record", "version": 1, "rank": rank, "world": world,
                "pid": 4000 + rank, "host": "node0", "reason": reason, "written_unix_s": 1.7e9 + 40,
                "zero_unix_s": 1.7e9, "recorded": len(entries) + 3, "entries": entries}

    def put_json(name, d):
        put("fuzz_flight_dump", name, json.dumps(d, indent=1).encode())

    failed = dump(0, 3, "rank 1 is frozen", [
        entry(40, "completed", 4.0, 4.005), entry(41, "completed", 4.1, 4.105),
        entry(42, "failed", 4.2, error="rank 1 is frozen", waiting_for=[1])])
    put_json("failed", failed)
    put_json("live", dump(1, 2, "SIGUSR1", [
        entry(3, "completed", 1.0, 1.5, comm=1, group=7, op="broadcast", dtype="BF16", root=0),
        entry(4, "started", 2.0, op="chunk_tree_all_reduce", redop="AVG", root=4)]))
    put_json("no_entries", dump(0, 1, "SIGTERM", []))
    text = json.dumps(failed, indent=1).encode()
    put("fuzz_flight_dump", "truncated", text[:len(text) // 2])
    put_json("wrong_format", dict(failed, format="chrome-trace"))
    put_json("wrong_version", dict(failed, version=2))
    no_seq = json.loads(text)
    del no_seq["entries"][1]["seq"]
    put_json("missing_seq", no_seq)
    put_json("mistyped_rank", dict(failed, rank="0"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 fuzz/make_corpus.py build/apps/train")
    idx_corpus()
    safetensors_corpus()
    checkpoint_corpus(sys.argv[1])
    store_corpus()
    frame_corpus()
    hostlist_corpus()
    flight_dump_corpus()
