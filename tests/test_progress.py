"""Progress lines: plain lines in a log, nothing when quiet."""

import io
import re

from keras_transformer.progress import Progress, _duration


def test_a_log_gets_plain_lines_with_counts_and_an_eta():
    log = io.StringIO()  # not a terminal
    progress = Progress(1000, "pairs", every_seconds=0, stream=log)
    progress.advance(250)
    progress.advance(250)
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and "\x1b" not in log.getvalue() and "\r" not in log.getvalue()
    assert lines[0].startswith("250/1,000 pairs, ") and ", ETA " in lines[0]
    assert lines[1].startswith("500/1,000 pairs, ")
    assert lines[2].startswith("500/1,000 pairs, ")
    done = io.StringIO()
    finished = Progress(4, "steps", stream=done)
    finished.advance(4)
    finished.close()  # all done: the time taken instead of an ETA
    assert done.getvalue().startswith("4/4 steps, ") and "ETA" not in done.getvalue()


def test_quiet_writes_nothing_and_lines_wait_for_the_interval():
    log = io.StringIO()
    quiet = Progress(10, "steps", quiet=True, every_seconds=0, stream=log)
    quiet.advance(5)
    quiet.close()
    patient = Progress(10, "steps", every_seconds=3600, stream=log)
    patient.advance(5)
    assert log.getvalue() == ""
    patient.close()
    assert log.getvalue().startswith("5/10 steps, ")


def test_details_are_read_only_for_a_line_and_the_eta_keeps_to_the_time_limit():
    log = io.StringIO()
    calls = []

    def detail():
        calls.append(1)
        return ["loss 2.500"]

    progress = Progress(1000, "steps", every_seconds=3600, stream=log, time_limit=120)
    progress.advance(10, detail)
    assert calls == [] and log.getvalue() == ""
    progress.interval = 0
    progress.start -= 60  # 60 s spent: 10 steps a minute leave 99 minutes of work
    progress.advance(0, detail)
    line = log.getvalue()
    assert calls == [1] and ", loss 2.500, " in line
    eta = re.search(r"ETA (?:(\d+)m)?(\d+)s", line)
    assert eta and 55 <= int(eta.group(1) or 0) * 60 + int(eta.group(2)) <= 60  # the budget's


def test_durations():
    assert [_duration(s) for s in (12.7, 185, 3725)] == ["12s", "3m05s", "1h02m"]
