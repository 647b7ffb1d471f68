#!/usr/bin/env python3
"""scripts/gpu_bench_report.py: the report of scripts/gpu_bench.sh, from its raw outputs.

  gpu_bench_report.py RAW_DIR OUT_PREFIX      writes OUT_PREFIX.md and OUT_PREFIX.json
  gpu_bench_report.py --max-abs-diff A B      largest |a - b| over two safetensors files' F32 tensors

RAW_DIR holds what gpu_bench.sh wrote: info.json (the machine, commit, budget), steps.jsonl (one
object per step: n, kind, name, cmd, rc, seconds, limit_s, log, or skip: the reason; plus the
step's parameters: model, precision, variant, backend, protocol, mps, metrics, json, ...), each
step's log (stepN.log), train's --metrics files, allreduce_bench's --json rows and bench_kernels'
Google Benchmark JSON. OUT_PREFIX.json is one JSON object per row (what: train, collective,
kernel, check, step); OUT_PREFIX.md has the targets, the tables, every command, exit code and time.

Figures. images_per_s: the metrics line of the second epoch (train's images/s over that epoch's
training steps). steady_images_per_s: the same epoch without its first 100 steps, from train's
plain progress lines (every 100 batches and the epoch's last, each with the epoch's images/s so
far): the images between the line at batch 100 and the last line over the time between them,
each time being images / rate (images = batch x batch size); null when the epoch has under 101
batches. The anchor's (torch_mnist_gpu.py --epochs 1: one warm-up epoch, then the timed one, so
2 epochs as ours) images_per_s is its second epoch too. Standard library only.
"""
import json, os, re, sys

import weights_diff  # the safetensors reader (this folder)

MODELS = ('simplecnn', 'convnet', 'net')
PROGRESS = re.compile(r'Rank 0, epoch (\d+), batch (\d+)/(\d+): loss \S+, (\d+) images/s')
SMALL_MAX = 64 << 10  # issue 23's "small": 8 B - 64 KiB
LARGE = 256 << 20

# Issue 22: one rank, batch 128, the second epoch: (fp32, bf16) images/s.
TRAIN_TARGETS = {'simplecnn': (400000, 500000), 'convnet': (300000, 400000),
                 'net': (600000, 600000)}
# Issue 23: two ranks on one GPU: (backend, mode) -> (small time_us at most, 256 MiB busbw at least).
COLL_TARGETS = [(('ipc', 'concurrent'), 20, 500), (('ipc', 'time-sliced'), 300, 100),
                (('staged', None), 40, 10)]


def read_jsonl(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def read_text(path):
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except OSError:
        return ''


def steady_rate(log_text, epoch, batch_size):
    """Images/s of `epoch` after its first 100 batches, from the progress lines (None if short)."""
    pts = sorted((int(b), float(r)) for e, b, _, r in PROGRESS.findall(log_text)
                 if int(e) == epoch and float(r) > 0)
    start = next((p for p in pts if p[0] >= 100), None)
    if not start or not pts or pts[-1][0] <= start[0]:
        return None
    (b1, r1), (b2, r2) = start, pts[-1]
    i1, i2 = b1 * batch_size, b2 * batch_size
    dt = i2 / r2 - i1 / r1
    return round((i2 - i1) / dt, 1) if dt > 0 else None


def train_row(raw, s):
    row = {'what': 'train', 'model': s['model'], 'precision': s['precision'],
           'variant': s['variant'], 'images_per_s': None, 'steady_images_per_s': None,
           'test_acc': None, 'torch_eager_images_per_s': None, 'torch_compile_images_per_s': None,
           'rc': s.get('rc'), 'skip': s.get('skip')}
    lines = read_jsonl(os.path.join(raw, s.get('metrics', '')))
    if lines:
        first = min(int(l.get('epoch', 0)) for l in lines)
        second = next((l for l in lines if int(l.get('epoch', 0)) == first + 1), None)
        if second:
            row['images_per_s'] = second.get('images_per_s')
            row['epoch'] = int(second['epoch'])
            row['steady_images_per_s'] = steady_rate(
                read_text(os.path.join(raw, s.get('log', ''))), row['epoch'],
                int(s.get('batch_size', 128)))
        row['test_acc'] = lines[-1].get('test_acc')
    return row


def torch_result(raw, s):
    for line in reversed(read_text(os.path.join(raw, s.get('log', ''))).splitlines()):
        line = line.strip()
        if line.startswith('{') and 'images_per_s' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def collective_rows(raw, s):
    out = []
    for r in read_jsonl(os.path.join(raw, s.get('json', ''))):
        if r.get('collective', 'all_reduce') != 'all_reduce':
            continue
        mode = r.get('mode') or ('concurrent' if s.get('mps') else 'time-sliced')
        out.append({'what': 'collective', 'backend': s['backend'],
                    'protocol': r.get('protocol') or s.get('protocol'), 'mode': mode,
                    'bytes': r.get('bytes'), 'time_us': r.get('time_us'),
                    'busbw_gbs': r.get('busbw_gbs'), 'wrong': r.get('wrong'),
                    'mps': bool(s.get('mps'))})
    return out


def kernel_rows(raw, s):
    try:
        with open(os.path.join(raw, s.get('json', ''))) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return []
    out = []
    for b in doc.get('benchmarks', []):
        row = {'what': 'kernel', 'cuda_kernels': s.get('cuda_kernels')}
        row.update(b)
        out.append(row)
    return out


def max_abs_diff(a_path, b_path):
    a, b = weights_diff.load(a_path), weights_diff.load(b_path)
    if a.keys() != b.keys():
        raise ValueError('different tensors')
    return max((abs(x - y) for k in a for x, y in zip(a[k], b[k])), default=0.0)


def check_row(raw, s):
    row = {'what': 'check', 'name': s['name'], 'rc': s.get('rc'), 'skip': s.get('skip')}
    if 'compare' in s and s.get('rc') == 0:
        text = read_text(os.path.join(raw, 'two_ranks_diff.txt')).strip()
        try:
            d = float(text)
            row.update(max_abs_diff=d, passed=d < 1e-4)
        except ValueError:
            row.update(max_abs_diff=None, passed=False, note=text[:200])
    return row


def build_rows(raw, steps):
    rows, torch = [], {}
    for s in steps:
        if s['kind'] == 'torch' and s.get('rc') == 0:
            t = torch_result(raw, s)
            if t:
                key = 'torch_compile_images_per_s' if s.get('compile') else \
                    'torch_eager_images_per_s'
                torch[(s['model'], s['precision'], key)] = t.get('images_per_s')
    for s in steps:
        kind = s['kind']
        if kind == 'train':
            rows.append(train_row(raw, s))
        elif kind == 'collective' and 'backend' in s and s.get('rc') == 0:
            rows += collective_rows(raw, s)
        elif kind == 'kernel' and s.get('rc') == 0:
            rows += kernel_rows(raw, s)
        elif kind == 'check' and 'compare' in s:
            rows.append(check_row(raw, s))
    for r in rows:
        if r['what'] == 'train':
            for key in ('torch_eager_images_per_s', 'torch_compile_images_per_s'):
                r[key] = torch.get((r['model'], r['precision'], key))
    for s in steps:
        rows.append({'what': 'step', **{k: v for k, v in s.items() if k != 'what'}})
    return rows


def fmt(v, nd=0):
    if v is None:
        return '-'
    if isinstance(v, float):
        return f'{v:,.{nd}f}'
    return str(v)


def verdict(ok):
    return '-' if ok is None else ('met' if ok else 'NOT met')


def train_targets(rows):
    out = []
    for model in MODELS:
        for i, prec in enumerate(('fp32', 'bf16')):
            cands = [r for r in rows if r['what'] == 'train' and r['model'] == model and
                     r['precision'] == prec and r['images_per_s']]
            best = max(cands, key=lambda r: r['images_per_s'], default=None)
            want = TRAIN_TARGETS[model][i]
            if not best:
                out.append((f'{model} {prec} >= {want:,} images/s', 'not measured', '-'))
                continue
            v = best['images_per_s']
            out.append((f'{model} {prec} >= {want:,} images/s',
                        f"{v:,.0f} ({best['variant']})", verdict(v >= want)))
            e, c = best['torch_eager_images_per_s'], best['torch_compile_images_per_s']
            out.append((f'{model} {prec} >= 2x torch eager', f'{v:,.0f} vs {fmt(e)}',
                        verdict(None if e is None else v >= 2 * e)))
            out.append((f'{model} {prec} above torch --compile', f'{v:,.0f} vs {fmt(c)}',
                        verdict(None if c is None else v > c)))
            acc = {r['variant']: r['test_acc'] for r in cands if r['test_acc'] is not None}
            if 'engine' in acc and 'defaults' in acc:  # the defaults match the CPU (first run)
                d = abs(acc['engine'] - acc['defaults'])
                out.append((f'{model} {prec} test acc, engine within 0.5 points of defaults',
                            f"{acc['engine']:.4f} vs {acc['defaults']:.4f}", verdict(d <= 0.005)))
    return out


def coll_targets(rows):
    out = []
    for (backend, mode), small_us, large_bw in COLL_TARGETS:
        cands = [r for r in rows if r['what'] == 'collective' and r['backend'] == backend and
                 (mode is None or r['mode'] == mode)]
        protos = sorted({r['protocol'] for r in cands if r['protocol']})
        name = f'{backend}' + (f' {mode}' if mode else '')
        if not cands:
            out.append((f'{name}: small <= {small_us} us', 'not measured', '-'))
            out.append((f'{name}: 256 MiB busbw >= {large_bw} GB/s', 'not measured', '-'))
            continue
        best_small, best_large = None, None
        for p in protos:  # the best protocol: its worst small size, its 256 MiB row
            small = [r['time_us'] for r in cands if r['protocol'] == p and r['bytes'] <= SMALL_MAX]
            large = [r['busbw_gbs'] for r in cands if r['protocol'] == p and r['bytes'] == LARGE]
            if small and (best_small is None or max(small) < best_small[0]):
                best_small = (max(small), p)
            if large and (best_large is None or max(large) > best_large[0]):
                best_large = (max(large), p)
        out.append((f'{name}: small (8 B - 64 KiB) <= {small_us} us',
                    f'{best_small[0]:,.1f} us ({best_small[1]})' if best_small else '-',
                    verdict(best_small[0] <= small_us if best_small else None)))
        out.append((f'{name}: 256 MiB busbw >= {large_bw} GB/s',
                    f'{best_large[0]:,.1f} GB/s ({best_large[1]})' if best_large else '-',
                    verdict(best_large[0] >= large_bw if best_large else None)))
    colls = [r for r in rows if r['what'] == 'collective']
    bad = [r for r in colls if r['wrong'] not in (0, None)]
    out.append(('#wrong 0 in every collective row', f'{len(bad)} of {len(colls)} rows wrong',
                verdict(not bad if colls else None)))
    checks = [r for r in rows if r['what'] == 'check']
    if not checks:
        out.append(('two ranks end where one rank ends', 'not measured (see the steps)', '-'))
    for r in checks:
        if r['what'] == 'check':
            out.append(('two ranks end where one rank ends (max abs diff < 1e-4)',
                        fmt(r.get('max_abs_diff'), 8) if r.get('max_abs_diff') is not None
                        else (r.get('skip') or f"exit {r.get('rc')}"), verdict(r.get('passed'))))
    return out


def table(head, body):
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    lines += ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in body]
    return '\n'.join(lines) + '\n'


def md_train(rows):
    body = [(r['model'], r['precision'], r['variant'], fmt(r['images_per_s']),
             fmt(r['steady_images_per_s']), fmt(r['test_acc'], 4),
             fmt(r['torch_eager_images_per_s']), fmt(r['torch_compile_images_per_s']),
             r['skip'] or ('exit %s' % r['rc']))
            for r in rows if r['what'] == 'train']
    return table(('model', 'precision', 'variant', 'images/s (epoch 2)', 'steady images/s',
                  'test acc', 'torch eager', 'torch compile', 'exit / skip'), body)


def md_collectives(rows):
    body = [(r['backend'], r['protocol'], r['mode'], r['bytes'], fmt(r['time_us'], 1),
             fmt(r['busbw_gbs'], 2), fmt(r['wrong']))
            for r in rows if r['what'] == 'collective']
    return table(('backend', 'protocol', 'mode', 'bytes', 'time (us)', 'busbw (GB/s)', '#wrong'),
                 body)


def md_kernels(rows):
    body = [(r.get('cuda_kernels'), r.get('name'), fmt(r.get('real_time'), 2),
             r.get('time_unit', ''), r.get('iterations', ''))
            for r in rows if r['what'] == 'kernel']
    return table(('--cuda-kernels', 'case', 'time', 'unit', 'iterations'), body)


def md_steps(raw, steps):
    body = [(s['n'], s['name'], 'skip: ' + s['skip'] if 'skip' in s else
             ('pass' if s['rc'] == 0 else f"FAIL (exit {s['rc']}"
              + (', killed at the limit)' if s['rc'] in (124, 137) else ')')),
             s.get('seconds', 0), s.get('limit_s', '-')) for s in steps]
    out = table(('#', 'step', 'result', 's', 'limit s'), body)
    out += '\n## Every step\'s command and output\n\n'
    for s in steps:
        out += f"### {s['n']}. {s['name']}\n\n"
        if 'skip' in s:
            out += f"skip: {s['skip']}\n\n"
            continue
        text = read_text(os.path.join(raw, s['log'])).splitlines()
        if len(text) > 120:
            text = text[:40] + [f'... ({len(text)} lines; the middle left out) ...'] + text[-80:]
        out += f"```\n$ {s['cmd']}\n```\n\nexit code {s['rc']}, {s['seconds']} s " \
               f"(limit {s['limit_s']} s)\n\n```\n" + '\n'.join(text) + '\n```\n\n'
    return out


def write_md(path, info, rows, raw, steps):
    parts = [f"# GPU bench: {info.get('gpu', '?')}, commit {info.get('commit', '?')}\n",
             f"{info.get('date', '')} on {info.get('host', '?')}; {info.get('ngpu', '?')} GPU(s): "
             f"{info.get('gpus', '')}; {info.get('toolkit', '')}. Steps took "
             f"{info.get('elapsed_s', '?')} s of a {info.get('budget_s', '?')} s budget. "
             f"MPS daemon: {info.get('mps', '?')}.\n",
             'Written by scripts/gpu_bench.sh (scripts/gpu_bench_report.py); the figures are '
             'defined in that script\'s header.\n',
             '## Targets (issues 22 and 23)\n', table(('target', 'measured', 'met'),
                                                      train_targets(rows) + coll_targets(rows)),
             '## Training: one rank, batch 128, the second epoch\n', md_train(rows),
             '## Collectives: all_reduce, two ranks\n', md_collectives(rows),
             '## Kernels: bench_kernels --device cuda\n', md_kernels(rows),
             '## Steps\n', md_steps(raw, steps)]
    with open(path, 'w') as f:
        f.write('\n'.join(parts))


def main(argv):
    if len(argv) == 4 and argv[1] == '--max-abs-diff':
        print(max_abs_diff(argv[2], argv[3]))
        return 0
    if len(argv) != 3:
        print('usage: gpu_bench_report.py RAW_DIR OUT_PREFIX | --max-abs-diff A B', file=sys.stderr)
        return 2
    raw, prefix = argv[1], argv[2]
    steps = read_jsonl(os.path.join(raw, 'steps.jsonl'))
    if not steps:
        print(f'gpu_bench_report: {raw}/steps.jsonl: no steps', file=sys.stderr)
        return 1
    infos = read_jsonl(os.path.join(raw, 'info.json'))
    info = infos[0] if infos else {}
    rows = build_rows(raw, steps)
    with open(prefix + '.json', 'w') as f:
        for r in rows:
            f.write(json.dumps(r) + '\n')
    write_md(prefix + '.md', info, rows, raw, steps)
    print(f'gpu_bench_report: {prefix}.md and {prefix}.json ({len(rows)} rows)')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
