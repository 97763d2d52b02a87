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
    """

    def __init__(self, total, unit, quiet=False, every_seconds=30.0, stream=None):
        self.total, self.unit, self.quiet = total, unit, quiet
        self.stream = stream or sys.stderr
        self.dynamic = self.stream.isatty()
        self.interval = 0.5 if self.dynamic else every_seconds
        self.done = 0
        self.start = self.last = time.monotonic()

    def advance(self, count=1):
        """Adds `count` units done."""
        self.done += count
        now = time.monotonic()
        if not self.quiet and now - self.last >= self.interval:
            self.last = now
            self._write(self._line(now), final=False)

    def close(self):
        """Reports the final count, on its own line."""
        if not self.quiet:
            self._write(self._line(time.monotonic()), final=True)

    def _line(self, now):
        """`done/total unit, rate/s, ETA` (or the time taken, once done)."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        parts = [f"{self.done:,}" + (f"/{self.total:,}" if self.total else "")
                 + f" {self.unit}", f"{rate:,.0f} {self.unit}/s"]
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"ETA {_duration((self.total - self.done) / rate)}")
        else:
            parts.append(_duration(elapsed))
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
