"""Progress of long work (a corpus's preparation, an epoch of many
batches, a long translation) on standard error."""

import sys
import time


class Progress:
    """Counts work done out of `total` and reports it: on a terminal, one
    line rewritten at most every half second; elsewhere (a log file), a new
    line every `every_seconds`. Keras's `Progbar` writes colour codes even
    into files, which garble a log.

    Args:
        total: int, the units of work, or None if unknown.
        unit: str, what a unit is ("pairs", "steps").
        quiet: bool, report nothing.
        every_seconds: float, the interval of lines in a log file.
        stream: where to write (default: standard error).
        time_limit: float, seconds after which the work stops whatever is
            left (a time budget): the ETA never goes past it. 0: none.
    """

    def __init__(self, total, unit, quiet=False, every_seconds=30.0, stream=None,
                 time_limit=0.0):
        self.total, self.unit, self.quiet = total, unit, quiet
        self.time_limit = time_limit
        self.stream = stream or sys.stderr
        self.dynamic = self.stream.isatty()
        self.interval = 0.5 if self.dynamic else every_seconds
        self.done = 0
        self.start = self.last = time.monotonic()

    def advance(self, count=1, detail=None):
        """Adds `count` units done. `detail`, a function returning a list of
        strings, adds to the line; it is called only when a line is written
        (reading a training step's logs waits for the step)."""
        self.done += count
        now = time.monotonic()
        if not self.quiet and now - self.last >= self.interval:
            self.last = now
            self._write(self._line(now, detail), final=False)

    def note(self, line):
        """Writes `line` on a line of its own; a terminal's progress line
        goes on below it."""
        if not self.quiet:
            self.stream.write(("\r\x1b[K" if self.dynamic else "") + line + "\n")
            self.stream.flush()

    def close(self, detail=None):
        """Reports the final count, on its own line."""
        if not self.quiet:
            self._write(self._line(time.monotonic(), detail), final=True)

    def _line(self, now, detail):
        """`done/total unit, rate/s, details, ETA` (or the time taken, once
        done)."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        parts = [f"{self.done:,}" + (f"/{self.total:,}" if self.total else "")
                 + f" {self.unit}", f"{rate:,.{1 if rate < 10 else 0}f} {self.unit}/s"]
        parts += detail() if detail else []
        left = [(self.total - self.done) / rate] if (
            self.total and rate > 0 and self.done < self.total) else []
        if left and self.time_limit:
            left.append(max(self.time_limit - elapsed, 0.0))
        parts.append(f"ETA {_duration(min(left))}" if left else _duration(elapsed))
        return ", ".join(parts)

    def _write(self, line, final):
        if self.dynamic:
            self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _duration(seconds):
    """`1h02m`, `3m05s` or `12s`."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
