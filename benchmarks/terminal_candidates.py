"""The candidates of benchmarks/terminal_emulators.py, each behind the interface the
benchmark needs (a library is imported only when its candidate is made, inside a
worker process: par-term-emu-core-rust runs under another interpreter)."""

from __future__ import annotations

import codecs

SCROLLBACK = 1000


class Candidate:
    """One emulator behind the interface the benchmark needs."""

    name = ""

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> None:
        raise NotImplementedError

    def resize(self, cols: int, rows: int) -> None:
        raise NotImplementedError

    def lines(self) -> list[str]:
        raise NotImplementedError

    def cursor(self) -> tuple[int, int, bool]:
        raise NotImplementedError

    def history(self) -> list[str]:
        """The scrollback rows (the normal screen's rows above the visible ones)."""
        return []


class Pyte(Candidate):
    name = "pyte"

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        super().__init__(cols, rows)
        import pyte

        self.screen = pyte.HistoryScreen(cols, rows, history=scrollback, ratio=0.5)
        self.stream = pyte.Stream(self.screen)

    def feed(self, data: bytes) -> None:
        self.stream.feed(self.decoder.decode(data))

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(rows, cols)

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def cursor(self) -> tuple[int, int, bool]:
        c = self.screen.cursor
        return (c.x, c.y, not c.hidden)

    def history(self) -> list[str]:
        cols = self.screen.columns
        return [
            "".join(line[x].data for x in range(cols) if x in line).rstrip()
            for line in self.screen.history.top
        ]


class Avt(Candidate):
    name = "pyavt"

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        super().__init__(cols, rows)
        import avt

        self.vt = avt.Vt(cols, rows, scrollback)

    def feed(self, data: bytes) -> None:
        self.vt.feed_str(self.decoder.decode(data))

    def resize(self, cols: int, rows: int) -> None:
        self.vt.resize(cols, rows)

    def lines(self) -> list[str]:
        return [line.text.rstrip() for line in self.vt.view()]

    def cursor(self) -> tuple[int, int, bool]:
        c = self.vt.cursor
        return (c.col, c.row, c.visible)

    def history(self) -> list[str]:
        every = self.vt.lines()
        return [line.text.rstrip() for line in every[: len(every) - self.vt.size[1]]]


class Ghostty(Candidate):
    name = "pyghostty"

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        super().__init__(cols, rows)
        import pyghostty

        self.term = pyghostty.Terminal(cols, rows, scrollback)

    def feed(self, data: bytes) -> None:
        self.term.feed(data)  # it takes bytes and decodes UTF-8 itself

    def resize(self, cols: int, rows: int) -> None:
        self.term.resize(cols, rows)

    def lines(self) -> list[str]:
        rows = self.term.size[1]
        text = self.term.text().split("\n")
        return (text + [""] * rows)[:rows]

    def cursor(self) -> tuple[int, int, bool]:
        x, y = self.term.cursor
        return (x, y, bool(self.term.get("cursor_visible", "bool")))


class ParTerm(Candidate):
    name = "par-term-emu-core-rust"

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        super().__init__(cols, rows)
        import par_term_emu_core_rust as pt

        self.pt = pt
        self.term = pt.Terminal(cols, rows, scrollback=scrollback)

    def feed(self, data: bytes) -> None:
        self.term.process(data)

    def resize(self, cols: int, rows: int) -> None:
        self.term.resize(cols, rows)

    def lines(self) -> list[str]:
        # content() is the active screen (get_line reads the primary one); a wide
        # character is followed by a space for its second cell, which we drop.
        rows = self.term.size()[1]
        out = []
        for line in self.term.content().split("\n")[:rows]:
            chars, skip = [], False
            for ch in line:
                if skip:
                    skip = False
                    if ch == " ":
                        continue
                chars.append(ch)
                skip = self.pt.char_width(ch) == 2
            out.append("".join(chars).rstrip())
        return (out + [""] * rows)[:rows]

    def cursor(self) -> tuple[int, int, bool]:
        x, y = self.term.cursor_position()
        return (x, y, bool(self.term.cursor_visible()))


CANDIDATES: dict[str, type[Candidate]] = {c.name: c for c in (Pyte, Avt, Ghostty, ParTerm)}
AGENTHOST = "agenthost.terminal.screen"
"""The chosen one as agenthost wraps it (a row of its own: the wrapper's cost)."""


class Ours(Candidate):
    name = AGENTHOST

    def __init__(self, cols: int, rows: int, scrollback: int = SCROLLBACK) -> None:
        super().__init__(cols, rows)
        from agenthost.terminal.screen import Screen

        self.screen = Screen(cols, rows, scrollback)

    def feed(self, data: bytes) -> None:
        self.screen.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(cols, rows)

    def lines(self) -> list[str]:
        return self.screen.lines()

    def cursor(self) -> tuple[int, int, bool]:
        return self.screen.cursor()


CANDIDATES[AGENTHOST] = Ours
