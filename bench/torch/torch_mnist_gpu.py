"""PyTorch baseline on one GPU: the tutorials' models trained the fastest plain way PyTorch allows.

Usage: python3 torch_mnist_gpu.py --model simplecnn|convnet|net [--epochs 1] [--bf16] [--compile]
                                  [--data DIR] [--device cuda]
The whole dataset lives on the device (no DataLoader, no host copies in the loop): each epoch is a
randperm on the device and index gathers of 128 images, SGD lr 0.01 momentum 0.5, as the tutorials.
--bf16: forward and loss under torch.autocast('cuda', dtype=torch.bfloat16).
--compile: torch.compile(model) (Inductor); its compile time is kept out of the timed epochs by one
untimed warm-up epoch, which every mode runs.
Prints one JSON line: images/s of the timed epochs (training only), the steady-state rate of the
last epoch's second half, and test accuracy.
On a GPU machine use a python3 whose PyTorch has CUDA; --device cpu runs anywhere.
"""
import argparse, json, os, sys, time

import torch, torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mnist import MODELS, load  # same models and normalisation as the CPU baseline


def sync(dev):
    if dev.type == 'cuda':
        torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--model', default='simplecnn', choices=sorted(MODELS))
    p.add_argument('--epochs', type=int, default=1)
    p.add_argument('--bf16', action='store_true')
    p.add_argument('--compile', action='store_true')
    p.add_argument('--data', default='/usr/share/datasets/fashion-mnist')
    p.add_argument('--device', default='cuda')
    p.add_argument('--batch-size', type=int, default=128)
    a = p.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(1234)
    x, y = load(a.data, 'train'); xt, yt = load(a.data, 'test')
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    model = MODELS[a.model]().to(dev)
    step_model = torch.compile(model) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    amp_dev = 'cuda' if dev.type == 'cuda' else 'cpu'

    def epoch(mark_half=False):
        model.train()
        order = torch.randperm(len(x), device=dev)
        n = len(order) // a.batch_size  # full batches only: one shape, as a graph needs
        half_t = None
        for i in range(n):
            if mark_half and i == n // 2:
                sync(dev); half_t = time.perf_counter()
            b = order[i * a.batch_size:(i + 1) * a.batch_size]
            opt.zero_grad(set_to_none=True)
            with torch.autocast(amp_dev, dtype=torch.bfloat16, enabled=a.bf16):
                loss = F.nll_loss(step_model(x[b]).float(), y[b])
            loss.backward()
            opt.step()
        return n * a.batch_size, half_t, n - n // 2

    epoch()  # warm-up: cuDNN's choices, lazy loading, compilation
    sync(dev); t0 = time.perf_counter(); seen = 0; half_t = None; tail = 0
    for e in range(a.epochs):
        s, half_t, tail = epoch(mark_half=(e == a.epochs - 1))
        seen += s
    sync(dev); t1 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    name = torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'
    print(json.dumps({'model': a.model, 'device': name, 'torch': torch.__version__, 'bf16': a.bf16,
                      'compile': a.compile, 'epochs': a.epochs, 'batch_size': a.batch_size,
                      'train_s': round(t1 - t0, 4), 'images_per_s': round(seen / (t1 - t0), 1),
                      'steady_images_per_s': round(tail * a.batch_size / (t1 - half_t), 1),
                      'test_acc': round(acc, 4)}), flush=True)


if __name__ == '__main__':
    main()
