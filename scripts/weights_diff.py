#!/usr/bin/env python3
"""scripts/weights_diff.py A B: how two safetensors files' float32 tensors differ.

Prints one line: the floats whose bits differ out of all, the largest absolute difference and the
largest relative one (|a - b| / max(|a|, |b|), 0 where both are 0). Exits 2 when the files do not
hold the same tensors, 1 when a file cannot be read. Standard library only.
"""
import array
import json
import struct
import sys


def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == '__metadata__' or v['dtype'] != 'F32':
            continue
        s, e = v['data_offsets']
        out[name] = array.array('f', data[8 + n + s:8 + n + e])
    return out


def main(argv):
    if len(argv) != 3:
        print('usage: weights_diff.py A B', file=sys.stderr)
        return 2
    try:
        a, b = load(argv[1]), load(argv[2])
    except (OSError, ValueError, KeyError) as e:
        print(f'weights_diff.py: {e}', file=sys.stderr)
        return 1
    if a.keys() != b.keys() or any(len(a[k]) != len(b[k]) for k in a):
        print(f'weights_diff.py: {argv[1]} and {argv[2]} hold different tensors', file=sys.stderr)
        return 2
    total = differ = 0
    worst_abs = worst_rel = 0.0
    for k in a:
        for x, y in zip(a[k], b[k]):
            total += 1
            if struct.pack('<f', x) == struct.pack('<f', y):
                continue
            differ += 1
            d = abs(x - y)
            worst_abs = max(worst_abs, d)
            worst_rel = max(worst_rel, d / max(abs(x), abs(y)))
    print(f'{differ} of {total} floats differ, max abs {worst_abs:.3g}, max rel {worst_rel:.3g}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
