"""PyTorch baseline: the tutorials' data-parallel MNIST training, measured on this machine.

Usage: python3 torch_mnist.py --model simplecnn|convnet|net --world 1|2|4 --epochs 1 [--ddp] [--bf16]
--bf16: forward and loss under torch.autocast('cpu', bfloat16) (PyTorch's CPU mixed precision).
Data: IDX files (gz or raw) in --data (default: Debian's Fashion-MNIST package).
Prints one JSON line: images/s over the timed epochs and final test accuracy.
"""
import argparse, gzip, json, os, struct, time
from random import Random
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist, torch.multiprocessing as mp

def read_idx(path):
    op = gzip.open if path.endswith('.gz') else open
    with op(path, 'rb') as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack('>HBB', data[:4])
    dims = struct.unpack('>' + 'I' * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)

def load(data_dir, split):
    pre = 'train' if split == 'train' else 't10k'
    def f(kind):
        for ext in ('.gz', ''):
            p = os.path.join(data_dir, f'{pre}-{kind}{ext}')
            if os.path.exists(p): return p
    x = read_idx(f('images-idx3-ubyte')).astype(np.float32) / 255.0
    y = read_idx(f('labels-idx1-ubyte')).astype(np.int64)
    x = (x - 0.1307) / 0.3081
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)

class SimpleCNN(nn.Module):  # seed 000
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1); self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.dropout1 = nn.Dropout(0.25); self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64 * 7 * 7, 128); self.fc2 = nn.Linear(128, 10)
    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2)); x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = self.dropout1(x.view(-1, 64 * 7 * 7)); x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)

class ConvNet(nn.Module):  # seed 002
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.layer2 = nn.Sequential(nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.fc = nn.Linear(7 * 7 * 32, 10)
    def forward(self, x):
        out = self.layer2(self.layer1(x))
        return F.log_softmax(self.fc(out.reshape(out.size(0), -1)), dim=1)

class Net(nn.Module):  # seed 004
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5); self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(); self.fc1 = nn.Linear(320, 50); self.fc2 = nn.Linear(50, 10)
    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.dropout(F.relu(self.fc1(x.view(-1, 320))), training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)

MODELS = {'simplecnn': SimpleCNN, 'convnet': ConvNet, 'net': Net}

def partition(n, world, seed=1234):
    idx = list(range(n)); rng = Random(); rng.seed(seed); rng.shuffle(idx)
    part = int(n / world)
    return [idx[r * part:(r + 1) * part] for r in range(world)]

def run(rank, a):
    os.environ['MASTER_ADDR'] = '127.0.0.1'; os.environ['MASTER_PORT'] = str(a.port)
    torch.set_num_threads(a.threads)
    dist.init_process_group('gloo', rank=rank, world_size=a.world)
    torch.manual_seed(1234)
    x, y = load(a.data, 'train'); xt, yt = load(a.data, 'test')
    mine = torch.tensor(partition(len(x), a.world)[rank])
    bsz = 128 // a.world
    model = MODELS[a.model]()
    if a.ddp: model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.5)
    g = torch.Generator().manual_seed(rank)
    dist.barrier(); t0 = time.time(); seen = 0
    for ep in range(a.epochs):
        model.train()
        order = mine[torch.randperm(len(mine), generator=g)]
        for i in range(0, len(order), bsz):
            b = order[i:i + bsz]
            opt.zero_grad()
            with torch.autocast('cpu', dtype=torch.bfloat16, enabled=a.bf16):
                loss = F.nll_loss(model(x[b]).float(), y[b])
            loss.backward()
            if not a.ddp and a.world > 1:
                for p in model.parameters():
                    dist.all_reduce(p.grad.data, op=dist.ReduceOp.SUM); p.grad.data /= a.world
            opt.step(); seen += len(b)
    dist.barrier(); dt = time.time() - t0
    model.eval()
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    if rank == 0:
        print(json.dumps({'model': a.model, 'world': a.world, 'ddp': a.ddp, 'threads': a.threads, 'epochs': a.epochs, 'bf16': a.bf16,
                          'train_s': round(dt, 2), 'images_per_s': round(seen * a.world / dt, 1), 'test_acc': round(acc, 4)}), flush=True)
    dist.destroy_process_group()

if __name__ == '__main__':
    p = argparse.ArgumentParser()
    p.add_argument('--model', default='simplecnn'); p.add_argument('--world', type=int, default=1)
    p.add_argument('--epochs', type=int, default=1); p.add_argument('--lr', type=float, default=0.01)
    p.add_argument('--threads', type=int, default=1); p.add_argument('--ddp', action='store_true')
    p.add_argument('--bf16', action='store_true')
    p.add_argument('--port', type=int, default=29533)
    p.add_argument('--data', default='/usr/share/datasets/fashion-mnist')
    a = p.parse_args()
    mp.spawn(run, args=(a,), nprocs=a.world)
