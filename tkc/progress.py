"""What `tkc build` writes while it builds, and the summary after.

Quiet (the default): one progress line on stderr, redrawn in place on a
terminal (`building 57/211 kernels  gemm_hopper_bf16_ab_128x256x64`) and
elsewhere (CI logs, pipes) a line at each tenth of the kernels at most; then
`summary()` on stdout: how many were built and cached, the time, the kernels
that spill or serialise their wgmma, the failures, and the compiler's
warnings grouped by kind, each kind once with the kernels it came from, its
source lines and a few of its details. A failure's error is written at once,
in full.

Verbose (-v): a `[i/n] name ... 1.3 s` line per kernel in the kernels' order,
each kernel's warnings after its line, then the summary without the warnings
again.

A row is a dict made by tkc.building.build_one: kernel, registers, spills, wgmma,
shared bytes, cache path (the table's columns), and over (spills past the
kernel's allowance), cached, seconds, error (None or the message) and
warnings (the lines the build wrote on stderr).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import time

NAMES_SHOWN = 3  # the kernels a grouped warning names before "+N more"


class Progress:
    """The progress of building `n` kernels, on `out` (stderr)."""

    def __init__(self, n: int, verbose: bool = False, out=None, tty: bool | None = None,
                 every_s: float = 1.0):
        self.out = out if out is not None else sys.stderr
        self.n, self.verbose = n, verbose
        self.tty = _isatty(self.out) if tty is None else tty
        self.done = 0
        self.t0 = self._last = time.perf_counter()
        self.every_s = every_s  # no line in a log closer than this to the last (a cached build)
        self.step = max(1, -(-n // 10))  # a log line each tenth at most
        self._started: set[int] = set()
        self._waiting: dict[int, dict] = {}  # verbose: finished rows waiting for their turn
        self._shown = 0
        self._drawn = False

    def start(self, i: int, name: str) -> None:
        """Kernel i (from 0) begins building here, in this process."""
        if self.verbose:
            self._started.add(i)
            self._write(f"[{i + 1}/{self.n}] {name} ... ")
        elif self.tty:
            self._draw(name)

    def show(self, what: str) -> None:
        """The terminal line while workers build (nothing has finished yet)."""
        if self.tty and not self.verbose:
            self._draw(what)

    def finish(self, i: int, row: dict) -> None:
        """Kernel i is built (or failed): in any order when built by workers."""
        self.done += 1
        if self.verbose:
            self._waiting[i] = row
            while self._shown in self._waiting:  # the lines in the kernels' order
                k = self._shown
                r = self._waiting.pop(k)
                head = "" if k in self._started else f"[{k + 1}/{self.n}] {r['kernel']} ... "
                self._write(head + _verbose_tail(r))
                self._shown += 1
            return
        if row["error"] is not None:  # in full, at once
            self._clear()
            self._write(f"{row['kernel']}: FAILED\n{row['error']}\n")
        if self.tty:
            self._draw(row["kernel"])
        elif self.done < self.n and self.done % self.step == 0 \
                and time.perf_counter() - self._last >= self.every_s:
            self._last = time.perf_counter()
            self._write(f"building {self.done}/{self.n} kernels "
                        f"({time.perf_counter() - self.t0:.0f} s)\n")

    def close(self) -> None:
        self._clear()

    # -- the terminal line

    def _draw(self, name: str) -> None:
        width = shutil.get_terminal_size((100, 24)).columns - 1
        line = f"building {self.done}/{self.n} kernels  {name}"
        self._write("\r\x1b[K" + line[:width])
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


def _isatty(out) -> bool:
    try:
        return out.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def _verbose_tail(row: dict) -> str:
    if row["error"] is not None:
        tail = f"FAILED\n{row['error']}\n"
    else:
        tail = "cached\n" if row["cached"] else f"{row['seconds']:.1f} s\n"
    return tail + "".join(w + "\n" for w in row["warnings"])


# ---- the summary ---------------------------------------------------------------

_WARNING = re.compile(r"^(?:(?P<loc>.*?): )?warning: (?P<msg>.*)$")
_OF_KERNEL = re.compile(r"^kernel '[^']*'[:,]? ?")
_KIND = re.compile(r"^(?P<kind>[^():]+): (?P<detail>.+)$")  # `N-way ... conflicts: ldmatrix of st<...>`


class Warned:
    """One kind of warning: the kernels that gave it, where, and its details."""

    def __init__(self, kind: str):
        self.kind = kind
        self.kernels: list[str] = []
        self.lines: dict[str, list[str]] = {}  # file -> its lines, in the order seen
        self.details: list[str] = []

    def add(self, kernel: str, loc: str, detail: str) -> None:
        for seq, item in ((self.kernels, kernel), (self.details, detail)):
            if item and item not in seq:
                seq.append(item)
        if loc:
            file, line = _file_line(loc)
            lines = self.lines.setdefault(file, [])
            if line and line not in lines:
                lines.append(line)

    def text(self) -> list[str]:
        out = [f"  {self.kind}: {_plural(len(self.kernels), 'kernel')} ({_names(self.kernels)})"]
        where = "; ".join(f + (" line" + ("s " if len(ls) > 1 else " ") + ", ".join(ls) if ls else "")
                          for f, ls in self.lines.items())
        if where:
            out.append(f"      at {where}")
        if self.details:
            out.append(f"      ({_names(self.details)})")
        return out


def warning_key(line: str) -> tuple[str, str, str] | None:
    """(kind, where, detail) of a line a build wrote. The kind is the message
    without the kernel's name and what differs between kernels (`2-way
    shared-memory bank conflicts` of `vector of sv<f32, 512>`), so the same
    warning from several kernels is one; where is the source location ("" for
    tkc's own). None for a spill warning: the summary lists spills apart."""
    m = _WARNING.match(line.strip())
    if not m:
        return line.strip(), "", ""
    loc, msg = m.group("loc") or "", _OF_KERNEL.sub("", m.group("msg"))
    if msg.startswith("spills registers"):
        return None
    kind = _KIND.match(msg)
    return (kind["kind"] if kind else msg), _relative("" if loc == "tkc" else loc), \
        (kind["detail"] if kind else "")


def _relative(loc: str) -> str:
    """A location's file relative to the working directory when under it."""
    cwd = os.getcwd() + os.sep
    return loc[len(cwd):] if loc.startswith(cwd) else loc


def _file_line(loc: str) -> tuple[str, str]:
    """`file:line:col` as (file, line); another location as (it, "")."""
    parts = loc.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], parts[1]
    return loc, ""


def group_warnings(rows: list[dict]) -> list[Warned]:
    """Each kind of warning once, in the order first seen."""
    groups: dict[str, Warned] = {}
    for r in rows:
        for line in r["warnings"]:
            key = warning_key(line)
            if key is not None and key[0]:
                groups.setdefault(key[0], Warned(key[0])).add(r["kernel"], key[1], key[2])
    return list(groups.values())


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f", +{len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _spill_text(row: dict) -> str:
    s = re.sub(r"^(\d+)(?!\d| st)", r"\1 st", row["spills"])  # stores alone: a bare number
    return s + ("" if row["over"] else "  (allowed)")


def summary(rows: list[dict], seconds: float, verbose: bool = False) -> str:
    """The lines after a build: counts and time, spills, serialised wgmma,
    failures, then the warnings grouped (verbose: only counted, they were
    shown as they came)."""
    failed = [r for r in rows if r["error"] is not None]
    cached = sum(1 for r in rows if r["cached"] and r["error"] is None)
    reused = sum(1 for r in rows if r.get("reused") and r["error"] is None)
    compiled = len(rows) - cached - len(failed)
    earlier = f" ({reused} with an earlier build's cubin)" if reused else ""
    head = f"built {_plural(len(rows) - len(failed), 'kernel')} in {seconds:.1f} s " \
           f"({compiled} compiled{earlier}, {cached} cached"
    lines = [head + (f", {len(failed)} FAILED)" if failed else ")")]
    spilled = [r for r in rows if r["error"] is None and r["spills"] not in ("0", "-")]
    if spilled:
        over = sum(1 for r in spilled if r["over"])
        lines.append(f"spills: {_plural(len(spilled), 'kernel')}"
                     + (f", {over} over their allowance (an error)" if over else ""))
        width = max(len(r["kernel"]) for r in spilled)
        lines += [f"  {r['kernel']:<{width}}  {_spill_text(r)}" for r in spilled]
    else:
        lines.append("spills: none")
    serial = [r["kernel"] for r in rows if r["wgmma"] == "serialised"]
    if serial:
        lines.append(f"serialised wgmma (an error): {', '.join(serial)}")
    if failed:
        lines.append(f"failed (errors above): {', '.join(r['kernel'] for r in failed)}")
    groups = group_warnings(rows)
    if groups:
        n = len({k for g in groups for k in g.kernels})
        lines.append(f"warnings: {_plural(len(groups), 'kind')}, from {_plural(n, 'kernel')}"
                     + (" compiled now" if cached else "")
                     + (" (above)" if verbose else " (each in full: tkc build -v)"))
        for g in [] if verbose else groups:
            lines += g.text()
    return "\n".join(lines) + "\n"
