#!/usr/bin/env python3
"""tests/apps/torch_eval_weights.py: PyTorch side of `train --eval-only`'s test.

  torch_eval_weights.py DATA_DIR OUT.safetensors

Trains the tutorial's ConvNet (Conv2d 1->16 k5 p2, BatchNorm2d, ReLU, MaxPool2d 2; the same
16->32; Linear 1568->10) for a few SGD steps on DATA_DIR's training split, so that its BatchNorm
running statistics are real, writes its state_dict to OUT as safetensors (through
tests/io/make_torch_safetensors.py's save_file), and prints what PyTorch computes in eval mode on the
test split:

  correct C/N loss L

with L the mean cross-entropy. Pixels are normalised as torchvision's ToTensor and
Normalize((0.1307,), (0.3081,)) do.
"""
import gzip
import os
import struct
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
from make_torch_safetensors import save_file  # noqa: E402  (the layout safetensors writes)

NP_DTYPES = {torch.float32: ("F32", np.float32), torch.int64: ("I64", np.int64)}


def read_idx(folder, name):
    path = os.path.join(folder, name)
    opener = open
    if not os.path.exists(path):
        path, opener = path + ".gz", gzip.open
    with opener(path, "rb") as f:
        blob = f.read()
    ndim = blob[3]
    dims = struct.unpack(">" + "I" * ndim, blob[4:4 + 4 * ndim])
    return np.frombuffer(blob[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


def split(folder, prefix):
    images = read_idx(folder, prefix + "-images-idx3-ubyte").astype(np.float32) / np.float32(255)
    images = (images - np.float32(0.1307)) / np.float32(0.3081)
    labels = read_idx(folder, prefix + "-labels-idx1-ubyte").astype(np.int64)
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels)


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 5, padding=2), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.MaxPool2d(2))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = block(1, 16)
        self.layer2 = block(16, 32)
        self.fc = nn.Linear(7 * 7 * 32, 10)

    def forward(self, x):
        return self.fc(self.layer2(self.layer1(x)).reshape(x.shape[0], -1))


def save(path, state):
    tensors = {}
    for name, t in state.items():
        dname, npt = NP_DTYPES[t.dtype]
        tensors[name] = (dname, list(t.shape), t.detach().numpy().astype(npt).tobytes())
    save_file(path, tensors)


def main(folder, out):
    torch.manual_seed(7)
    torch.set_num_threads(1)
    model = ConvNet()
    x, y = split(folder, "train")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    model.train()
    for step in range(12):
        idx = torch.arange(step * 32, step * 32 + 32) % x.shape[0]
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    model.eval()
    tx, ty = split(folder, "t10k")
    with torch.no_grad():
        scores = model(tx)
        loss = F.cross_entropy(scores, ty).item()
        correct = int((scores.argmax(1) == ty).sum())
    save(out, model.state_dict())
    print(f"correct {correct}/{ty.shape[0]} loss {loss:.4f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
