#!/usr/bin/env python3
"""Function lengths in src/, longest first: `python3 tests/tools/fn_lengths.py [N]`.

A function runs from its `fn` line to the first closing brace at its own indent
(rustfmt style).
"""

import os
import re
import sys

FN = re.compile(r"^(\s*)(pub(\([a-z]+\))? )?(async )?fn (\w+)")


def lengths(root="src"):
    out = []
    for folder, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(folder, f)
            with open(path) as fh:
                lines = fh.read().split("\n")
            for i, line in enumerate(lines):
                m = FN.match(line)
                if not m or line.rstrip().endswith(";"):
                    continue
                indent = m.group(1)
                j = i + 1
                while j < len(lines) and lines[j].rstrip() != indent + "}":
                    j += 1
                out.append((j - i + 1, path, m.group(5), i + 1))
    return sorted(out, reverse=True)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    for row in lengths()[:n]:
        print(*row)
