"""Check a cache directory that several PyFR ranks shared: PyFR's kernel
cache (XDG_CACHE_HOME/pyfr/<backend>/, pyfr.cache.ObjectCache: each entry
written to a uuid4-named file, then renamed to its key) and gimmik's
(XDG_CACHE_HOME/gimmik/ or GIMMIK_CACHE_DIR: KEY.json entries,
KEY.DIGEST.so builds, '.NAME....part' while written).  Standalone (no
gimmik import), so it runs in the venv of either package.

    python bench/pyfr/cache_check.py DIR [--label L] [--csv F]

Counts per directory, and the problems: `leftover` (a write's temporary
file: uuid-named in PyFR's, .part in gimmik's), `empty`, `torn` (a cubin
or ELF file shorter than its own header says, JSON that does not parse, a
build whose bytes do not match the digest in its name), `duplicate` (one
gimmik key stored under two digests), and `same_bytes` (PyFR entries of
different keys with identical bytes: reported, not an error).  Files
elsewhere (another library's cache under XDG_CACHE_HOME) are only
counted.  Exits 1
when any problem (not same_bytes) is found.
"""

import argparse
import csv
import hashlib
import json
import os
import re
import struct
import sys

_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}\Z')
_GIMMIK_BUILD = re.compile(r'([0-9a-f]{16,64})\.([0-9a-f]{16})\.so\Z')
_GIMMIK_JSON = re.compile(r'[0-9a-f]{16,64}\.json\Z')


def elf_whole(data):
    """Whether ELF bytes hold every section and program header their own
    header places (a file cut short fails); True for non-ELF data."""
    if data[:4] != b'\x7fELF':
        return True
    if len(data) < 64 or data[4] != 2:     # ELF64 only (cubins, .so)
        return len(data) >= 52
    end = '<' if data[5] == 1 else '>'
    phoff, shoff = struct.unpack_from(end + 'QQ', data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(end + 'HHHH',
                                                            data, 0x36)
    need = max(phoff + phentsize*phnum, shoff + shentsize*shnum)
    if need > len(data):
        return False
    # every section's bytes (not SHT_NOBITS) inside the file
    for i in range(shnum):
        base = shoff + i*shentsize
        stype, = struct.unpack_from(end + 'I', data, base + 4)
        off, size = struct.unpack_from(end + 'QQ', data, base + 0x18)
        if stype != 8 and off + size > len(data):
            return False
    return True


def check(root):
    """{'files', 'bytes', 'pyfr', 'gimmik', 'leftover', 'empty', 'torn',
    'duplicate', 'same_bytes', 'problems': [text]}."""
    out = dict.fromkeys(('files', 'bytes', 'pyfr', 'gimmik', 'leftover',
                         'empty', 'torn', 'duplicate', 'same_bytes'), 0)
    problems, digests, builds = [], {}, {}

    def bad(kind, path, why):
        out[kind] += 1
        problems.append(f'{kind}: {os.path.relpath(path, root)} ({why})')

    own = any(os.path.isdir(os.path.join(root, k))
              for k in ('tune', 'c', 'emulate', 'isa'))    # GIMMIK_CACHE_DIR
    for d, _, files in os.walk(root):
        rel = os.path.relpath(d, root).split(os.sep)
        mine = own or rel[0] == 'gimmik'
        other = not mine and rel[0] != 'pyfr'   # e.g. PoCL's kernel cache
        for name in files:
            path = os.path.join(d, name)
            with open(path, 'rb') as f:
                data = f.read()
            out['files'] += 1
            out['bytes'] += len(data)
            if other or rel[-1] == 'locks':
                continue        # not checked; gimmik's locks: empty
            if not data:
                bad('empty', path, '0 bytes')
                continue
            if mine:
                out['gimmik'] += 1
                if name.startswith('.') or name.endswith('.part'):
                    bad('leftover', path, 'a write never renamed')
                elif (mo := _GIMMIK_BUILD.match(name)):
                    h = hashlib.sha256(data).hexdigest()[:16]
                    if h != mo.group(2):
                        bad('torn', path, f'bytes hash to {h}')
                    builds.setdefault(mo.group(1), []).append(path)
                elif _GIMMIK_JSON.match(name):
                    try:
                        json.loads(data)
                    except ValueError as e:
                        bad('torn', path, f'JSON: {e}')
            else:
                out['pyfr'] += 1
                if _UUID.match(name):
                    bad('leftover', path, 'a write never renamed')
                elif not elf_whole(data):
                    bad('torn', path, 'ELF shorter than its headers')
                else:
                    digests.setdefault(hashlib.sha256(data).digest(),
                                       []).append(path)
    for key, paths in builds.items():
        if len(paths) > 1:
            bad('duplicate', paths[0], f'key {key} under {len(paths)} '
                'digests')
    out['same_bytes'] = sum(len(p) - 1 for p in digests.values())
    out['problems'] = problems
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('dir')
    ap.add_argument('--label', default='')
    ap.add_argument('--csv', default=None, help='append one row here')
    args = ap.parse_args(argv)
    res = check(args.dir)
    row = {'label': args.label, **{k: v for k, v in res.items()
                                   if k != 'problems'}}
    if args.csv:
        new = not os.path.exists(args.csv)
        with open(args.csv, 'a', newline='') as f:
            w = csv.DictWriter(f, list(row))
            if new:
                w.writeheader()
            w.writerow(row)
    print(' '.join(f'{k}={v}' for k, v in row.items()))
    for p in res['problems'][:20]:
        print('  ' + p)
    return 1 if res['problems'] else 0


if __name__ == '__main__':
    sys.exit(main())
