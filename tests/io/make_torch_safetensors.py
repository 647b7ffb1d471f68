#!/usr/bin/env python3
"""tests/io/make_torch_safetensors.py: PyTorch side of the safetensors interop test.

No `safetensors` package is needed: the format is written and read by hand (struct, json, numpy),
laid out as safetensors.torch.save_file lays it out (header keys sorted, data ordered by dtype
size then name, header padded with spaces to 8 bytes, metadata {"format": "pt"}).

  make_torch_safetensors.py write OUT SALT   # the Net's state_dict, values from expected_value()
  make_torch_safetensors.py check IN SALT    # load IN into a Net (strict) and check every value

Values are exact in float32 so that C++ recomputes them bit for bit (tests/io/test_safetensors.cpp
has the same formula).
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn

DTYPES = {torch.float32: ("F32", np.float32), torch.uint8: ("U8", np.uint8),
          torch.int64: ("I64", np.int64)}
NP_OF_NAME = {name: npt for name, npt in DTYPES.values()}


class Net(nn.Module):
    """Parameters and buffers of every kind the engine's models have, under PyTorch's names."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.layer1 = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4))
        self.fc = nn.Linear(16, 10)
        self.register_buffer("mask", torch.zeros(3, 5, dtype=torch.uint8))
        self.register_buffer("empty", torch.zeros(0, 3))


def name_key(name, salt):
    return sum(name.encode()) % 101 + 101 * salt


def expected_value(name, dtype, numel, salt):
    k = name_key(name, salt)
    i = np.arange(numel, dtype=np.int64)
    if dtype == "F32":
        return (((i * 7 + k) % 97 - 48) / 16.0).astype(np.float32)
    if dtype == "U8":
        return ((i * 31 + k) % 256).astype(np.uint8)
    sign = np.where(i % 2 == 0, 1, -1)
    return sign * ((i + 1) * (1 << 40) + k * 3 - 7)


def write(path, salt):
    sd = Net().state_dict()
    tensors = {}
    for name, t in sd.items():
        dname, npt = DTYPES[t.dtype]
        vals = expected_value(name, dname, t.numel(), salt).astype(npt).reshape(tuple(t.shape))
        tensors[name] = (dname, list(t.shape), vals.tobytes())
    save_file(path, tensors)


def save_file(path, tensors):
    """Writes {name: (dtype name, shape, bytes)} as safetensors.torch.save_file lays it out."""
    order = sorted(tensors, key=lambda n: (-np.dtype(NP_OF_NAME[tensors[n][0]]).itemsize, n))
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in order:
        dname, shape, data = tensors[name]
        header[name] = {"dtype": dname, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in order))


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, f"header length {n} not a multiple of 8"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    buf = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    spans = sorted((info["data_offsets"], name) for name, info in header.items())
    covered = 0
    for (b, e), name in spans:
        assert b == covered, f"{name}: data at {b}, expected {covered}"
        covered = e
    assert covered == len(buf), f"buffer {len(buf)} bytes, tensors cover {covered}"
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(buf[b:e], dtype=NP_OF_NAME[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta


def check(path, salt):
    sd, meta = read(path)
    net = Net()
    ref = net.state_dict()
    for name, t in sd.items():  # load_state_dict would convert dtypes silently; check first
        assert name in ref, f"unexpected tensor {name}"
        assert t.dtype == ref[name].dtype, f"{name}: dtype {t.dtype}, PyTorch has {ref[name].dtype}"
        assert t.shape == ref[name].shape, f"{name}: shape {tuple(t.shape)} vs {tuple(ref[name].shape)}"
    net.load_state_dict(sd, strict=True)
    for name, t in net.state_dict().items():
        dname = DTYPES[t.dtype][0]
        want = expected_value(name, dname, t.numel(), salt).astype(DTYPES[t.dtype][1])
        got = t.numpy().reshape(-1)
        assert np.array_equal(got, want), f"{name}: values differ"
    assert meta.get("written_by") == "engine", f"metadata {meta}"
    print(f"OK {len(sd)} tensors")


if __name__ == "__main__":
    mode, file, salt = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"write": write, "check": check}[mode](file, salt)
