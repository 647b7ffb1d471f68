"""PyTorch baseline (gloo): all_to_all_single of float32 buffers between local processes, reported like nccl-tests.

Usage: python3 torch_all_to_all.py --world 2|4 [--min-bytes N] [--max-bytes N] [--port P]
The size is what each rank sends in all (world equal chunks). Prints one JSON line per size: time
per call (us), algbw and busbw (GB/s), busbw = algbw * (n-1)/n as nccl-tests' alltoall.
"""
import argparse, json, os, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

def run(rank, a):
    os.environ['MASTER_ADDR'] = '127.0.0.1'; os.environ['MASTER_PORT'] = str(a.port)
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=a.world)
    n = a.world
    size = a.min_bytes
    while size <= a.max_bytes:
        count = size // 4 // n * n
        src, dst = torch.ones(count), torch.empty(count)
        iters = max(5, min(200, int(2e8 // max(size, 1) // 10)))
        for _ in range(3): dist.all_to_all_single(dst, src)
        dist.barrier(); t0 = time.perf_counter()
        for _ in range(iters): dist.all_to_all_single(dst, src)
        dist.barrier(); dt = (time.perf_counter() - t0) / iters
        if rank == 0:
            algbw = count * 4 / dt / 1e9
            print(json.dumps({'world': n, 'bytes': count * 4, 'us': round(dt * 1e6, 1),
                              'algbw_GBs': round(algbw, 3), 'busbw_GBs': round(algbw * (n - 1) / n, 3)}),
                  flush=True)
        size *= 4
    dist.destroy_process_group()

if __name__ == '__main__':
    p = argparse.ArgumentParser()
    p.add_argument('--world', type=int, default=2); p.add_argument('--port', type=int, default=29545)
    p.add_argument('--min-bytes', type=int, default=8 << 20)
    p.add_argument('--max-bytes', type=int, default=8 << 20)
    a = p.parse_args()
    mp.spawn(run, args=(a,), nprocs=a.world)
