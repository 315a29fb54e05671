"""A terminal agent that floods its terminal on demand (benchmarks/attach_terminal.py,
web_terminal.py).

``screenful.py MIB``: in raw mode, each byte read from the terminal writes MIB MiB of
80-column numbered lines, then ``DONE <round>``; ends when the terminal closes.
"""

import os
import sys
import tty

tty.setraw(0)
mib = int(sys.argv[1])
line = b"".join(b"%06d " % n + b"abcdefghij" * 7 + b"x" * 2 + b"\r\n" for n in range(800))
rounds = 0
while os.read(0, 1):
    rounds += 1
    left = mib * 1024 * 1024
    while left > 0:
        chunk = line[: min(left, len(line))]
        os.write(1, chunk)
        left -= len(chunk)
    os.write(1, b"DONE %d\r\n" % rounds)
