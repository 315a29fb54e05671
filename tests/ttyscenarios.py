"""Real TUIs driven in a real PTY (tests/ptytools.py), recorded for the terminal tests
of issue 30: vim, less, htop, tmux and a shell printing colours and wide characters.

``python tests/ttyscenarios.py`` records them all again into tests/fixtures/tty/; the
tests judge screens on those fixtures and record one scenario live.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ptytools import PtyProgram, Recording

ESC = "\x1b"
RULER = r"Top|Bot|All|[0-9]+%"
"""vim's ruler (defaults.vim turns it on): drawn last, after a redraw."""


def record_vim(tmp: Path) -> Recording:
    """vim: open a file, edit, split, resize, close the split, quit."""
    text = tmp / "notes.txt"
    text.write_text("".join(f"line {n}: the quick brown fox\n" for n in range(1, 61)))
    argv = ["vim", "-u", "DEFAULTS", "-i", "NONE", "-N", "-n", str(text)]
    with PtyProgram("vim", argv, 80, 24, cwd=tmp) as vim:
        vim.expect(r"line 2[0-9]: the quick")
        vim.mark()
        vim.send("ggOHello, 世界 🎉 from vim" + ESC)
        vim.expect("vim")
        vim.mark()
        vim.send(":split\r")
        vim.expect("notes.txt")
        vim.mark()
        vim.resize(100, 30)
        vim.expect(RULER)
        vim.mark()
        vim.send("30Gdd:q\r")
        vim.expect(RULER)
        vim.mark()
        vim.send(":q!\r")
        vim.drain_to_exit()
        return vim.recording


def record_less(tmp: Path) -> Recording:
    """less: a large file, search, scroll, page, quit."""
    text = tmp / "big.txt"
    text.write_text(
        "".join(f"{n:06d} \x1b[1mbold\x1b[0m entry number {n}\n" for n in range(1, 20001))
    )
    argv = ["less", "-R", str(text)]
    with PtyProgram("less", argv, 80, 24, env={"LESSHISTFILE": "-"}, cwd=tmp) as less:
        less.expect("000023")
        less.mark()
        less.send("/012345\r")
        less.expect("012345")
        less.mark()
        less.send("G")
        less.expect("020000")
        less.mark()
        less.send("g")
        less.expect("000001")
        less.send(" ")
        less.expect("000046")
        less.mark()
        less.wait_reading()  # (a SIGWINCH before less reads again waits for a key)
        less.resize(60, 12)
        less.expect("0000")
        less.mark()
        less.send("q")
        less.drain_to_exit()
        return less.recording


def record_htop(tmp: Path) -> Recording:
    """htop: its meters and process list, a sort change, a resize, quit."""
    config = tmp / "htoprc"
    config.write_text("")
    # Only htop's own row in the list: the fixture shows no other process of the machine.
    argv = ["htop", "-d", "10", "--filter=htop"]
    env = {"HTOPRC": str(config), "HOME": str(tmp)}
    with PtyProgram("htop", argv, 100, 30, env=env, cwd=tmp) as htop:
        htop.expect("PID")
        htop.expect("F10")
        htop.mark()
        htop.send("P")
        htop.expect(ESC)  # its next redraw
        htop.mark()
        htop.resize(80, 20)
        htop.expect("F10|Quit")
        htop.mark()
        htop.send("q")
        htop.drain_to_exit()
        return htop.recording


SHELL_SCRIPT = r"""
d=0123456789
printf '\033[31mred\033[0m \033[1;32mbold green\033[0m '
printf '\033[38;5;208m256\033[0m \033[38;2;10;200;250mtrue\033[0m\n'
printf 'CJK: 中文字符 日本語 한국어\n'
printf 'emoji: 🎉🚀👍 done\n'
printf 'combining: e\xcc\x81 a\xcc\x8a\n'
printf '\033]0;shell title\007'
printf '\033[?2004h\033[?1000h\033[?1006h\033[?1h\033[?25l'
printf '\033[?2026hsync\033[?2026l\n'
for i in $(seq 1 40); do printf 'row %02d wraps: %s\n' $i "$d$d$d$d$d$d$d$d$d$d"; done
printf 'tab\there\tend\n'
printf 'back\bspace \033[7minverse\033[27m\n'
printf '\033[?1049h\033[2J\033[Halternate screen\n'
printf '\033[?1049l'
printf 'wide at edge: %s%s中x\n' "$d$d$d$d$d$d$d" 012345678
printf 'DONE-%s\n' 'SHELL'
"""


def record_shell(tmp: Path) -> Recording:
    """A shell printing colours, CJK, emoji, combining marks, a title, modes, wrapping,
    the alternate screen in and out, and a wide character at the right edge."""
    script = tmp / "show.sh"
    script.write_text(SHELL_SCRIPT)
    argv = ["bash", "--norc", "--noprofile", "-i"]
    env = {"PS1": r"\[\e[1;34m\]demo\[\e[0m\]$ "}
    with PtyProgram("shell", argv, 80, 24, env=env, cwd=tmp) as shell:
        shell.expect(r"demo")
        shell.send(f"bash {script}\r")
        shell.expect("DONE-SHELL")
        shell.mark()
        shell.resize(50, 20)
        shell.send("echo resized\r")
        shell.expect("resized\r\n")
        shell.mark()
        shell.send("exit\r")
        shell.drain_to_exit()
        return shell.recording


PROMPT = r"[$#] "


def record_tmux(tmp: Path) -> Recording:
    """tmux on a socket of its own: a split, output in both panes, quit."""
    control = ["tmux", "-S", str(tmp / "tmux.sock")]
    argv = [*control, "-f", "/dev/null", "new-session"]
    env = {"SHELL": "/bin/sh", "PS1": "$ "}
    with PtyProgram("tmux", argv, 80, 24, env=env, cwd=tmp) as tmux:
        tmux.expect(PROMPT)
        tmux.send("echo left pane 中文\r")
        tmux.expect("left pane")
        # The split from outside: no race between tmux's start and its prefix key.
        subprocess.run([*control, "split-window", "-h"], check=True)
        tmux.expect(PROMPT)
        tmux.send("seq 1 50\r")
        tmux.expect("50")
        tmux.mark()
        tmux.resize(90, 26)
        tmux.expect(PROMPT)
        tmux.mark()
        subprocess.run([*control, "kill-server"], check=True)
        tmux.drain_to_exit()
        return tmux.recording


SCENARIOS: dict[str, tuple[str, Callable[[Path], Recording]]] = {
    "vim": ("vim", record_vim),
    "less": ("less", record_less),
    "htop": ("htop", record_htop),
    "shell": ("bash", record_shell),
    "tmux": ("tmux", record_tmux),
}


def available(name: str) -> bool:
    """Whether the program of scenario ``name`` is installed."""
    return shutil.which(SCENARIOS[name][0]) is not None


if __name__ == "__main__":
    import tempfile

    names = sys.argv[1:] or list(SCENARIOS)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            recording = SCENARIOS[name][1](Path(tmp))
        path = recording.save()
        print(f"{name}: {len(recording.data())} bytes, {len(recording.chunks)} chunks -> {path}")
