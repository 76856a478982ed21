#!/usr/bin/env python3
"""weft's CUDA emulator (tests/cudaemu): turns a .cu / .cuh file into C++ that g++ compiles against the
emulation headers. Each launch `k<T><<<grid, block[, shmem[, stream]]>>>(args)` becomes
`__cuemu_launch("k<T>", __FILE__, __LINE__, dim3(grid), dim3(block), shmem, stream, k<T>, args)` and each
`extern __shared__ T name[];` a pointer to the emulator's dynamic shared memory. Comments and string
literals are left alone; no line is added or removed, and a #line directive keeps diagnostics on the
original file. Usage: rewrite_cu.py IN OUT
"""
import os
import re
import sys


def code_mask(s):
    """True for each character outside comments, string and character literals."""
    mask = [True] * len(s)
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith('//', i):
            j = s.find('\n', i)
            j = n if j < 0 else j
        elif s.startswith('/*', i):
            j = s.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif c in '"\'':
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == '\\' else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            mask[k] = False
        i = j
    return mask


def kernel_start(s, end):
    """Start of the kernel expression that ends just before `end` (a name, template args, `::`)."""
    i = end
    while i > 0 and s[i - 1].isspace():
        i -= 1
    if i > 0 and s[i - 1] == '>':
        depth = 0
        while i > 0:
            i -= 1
            if s[i] == '>':
                depth += 1
            elif s[i] == '<':
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and s[i - 1].isspace():
            i -= 1
    while i > 0 and (s[i - 1].isalnum() or s[i - 1] in '_:'):
        i -= 1
    return i


def balanced(s, i, close_tok):
    """Index of close_tok at bracket depth 0 from i, and the top-level comma positions before it."""
    depth, commas = 0, []
    while i < len(s):
        if depth == 0 and s.startswith(close_tok, i):
            return i, commas
        c = s[i]
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        elif c == ',' and depth == 0:
            commas.append(i)
        i += 1
    raise SyntaxError('unbalanced launch')


def split(s, a, b, commas):
    parts, prev = [], a
    for c in commas:
        parts.append(s[prev:c])
        prev = c + 1
    parts.append(s[prev:b])
    return parts


def rewrite_launches(s):
    out, pos = [], 0
    mask = code_mask(s)
    i = s.find('<<<')
    while i >= 0:
        if not mask[i]:
            i = s.find('<<<', i + 3)
            continue
        k0 = kernel_start(s, i)
        kexpr = s[k0:i].strip()
        if not kexpr:
            raise SyntaxError('launch without a kernel name at offset %d' % i)
        cend, ccommas = balanced(s, i + 3, '>>>')
        cfg = split(s, i + 3, cend, ccommas)
        if len(cfg) < 2 or len(cfg) > 4:
            raise SyntaxError('launch of %s needs 2 to 4 configuration values' % kexpr)
        j = cend + 3
        while s[j].isspace():
            j += 1
        if s[j] != '(':
            raise SyntaxError('launch of %s without arguments' % kexpr)
        aend, _ = balanced(s, j + 1, ')')
        args = s[j + 1:aend]
        shmem = cfg[2] if len(cfg) > 2 else '0'
        stream = cfg[3] if len(cfg) > 3 else '0'
        name = ' '.join(kexpr.split()).replace('\\', '\\\\').replace('"', '\\"')
        call = '__cuemu_launch("%s", __FILE__, __LINE__, dim3(%s), dim3(%s), (size_t)(%s), (cudaStream_t)(%s), %s' % (
            name, cfg[0], cfg[1], shmem, stream, s[k0:i])
        call += (', ' + args if args.strip() else '') + ')'
        out.append(s[pos:k0])
        out.append(call)
        pos = aend + 1
        i = s.find('<<<', pos)
    out.append(s[pos:])
    return ''.join(out)


EXTERN_SHARED = re.compile(
    r'extern\s+__shared__\s+((?:__align__\s*\(\s*\d+\s*\)\s*|alignas\s*\(\s*\d+\s*\)\s*)*)([^;\[\]]*?[\w>*])\s*(\w+)\s*\[\s*\]\s*;')


def rewrite_shared(s):
    return EXTERN_SHARED.sub(lambda m: '%s *const %s = reinterpret_cast<%s *>(__cuemu_dynsmem);' % (
        m.group(2), m.group(3), m.group(2)), s)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        s = f.read()
    try:
        s = rewrite_shared(rewrite_launches(s))
    except SyntaxError as e:
        sys.exit('%s: %s' % (src, e))
    text = '#line 1 "%s"\n' % os.path.abspath(src) + s
    with open(dst, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
