"""``ProgressBar`` of ``roofcast sweep SPEC.toml``: off a terminal a line at the start, at most
one per interval and one at 100 %, each with cells, %, cells/s and an ETA; on a terminal
redrawn in place. A fake clock drives it."""

from __future__ import annotations

import io

from roofcast.app.commands.sweep import ProgressBar


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_at_most_every_interval_with_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar(out, "sweep s", clock=clock)
    bar(0, 10_000)
    for done in range(100, 10_001, 100):  # 100 ticks, one per second
        clock.now += 1.0
        bar(done, 10_000)
    lines = out.getvalue().splitlines()
    # start, then t = 10, 20, ..., 90 s (9 lines), then 100 % at t = 100 s
    assert len(lines) == 11
    assert lines[0] == "sweep s [" + "." * 30 + "] 0/10,000 cells   0% - cells/s ETA ?"
    assert lines[1].endswith("1,000/10,000 cells  10% 100 cells/s ETA 0:01:30")
    assert lines[5].endswith("5,000/10,000 cells  50% 100 cells/s ETA 0:00:50")
    assert lines[-1] == "sweep s [" + "#" * 30 + "] 10,000/10,000 cells 100% 100 cells/s in 0:01:40"


def test_a_fast_sweep_logs_only_its_start_and_its_end():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar(out, "x", clock=clock)
    for done in range(17):
        clock.now += 0.01
        bar(done, 16)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "16/16 cells 100%" in lines[1]
    assert "in 0:00:01" in lines[1]  # 0.16 s rounds up


def test_uneven_ticks_keep_the_interval_and_the_rate_follows_the_clock():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar(out, "x", clock=clock, interval_s=10.0)
    bar(0, 1000)
    for dt, done in ((4, 100), (7, 200), (2, 300), (12, 400)):  # t = 4, 11, 13, 25 s
        clock.now += dt
        bar(done, 1000)
    lines = out.getvalue().splitlines()
    assert [ln.split("] ")[1].split(" cells")[0] for ln in lines] == ["0/1,000", "200/1,000",
                                                                   "400/1,000"]
    assert "16 cells/s ETA 0:00:38" in lines[-1]  # 400 cells in 25 s; 600 left


def test_terminal_redraws_in_place_and_ends_with_a_newline():
    out, clock = Tty(), Clock()
    bar = ProgressBar(out, "x", clock=clock)
    bar(0, 4)
    for done in range(1, 5):
        clock.now += 1.0
        bar(done, 4)
    text = out.getvalue()
    assert text.count("\r") == 5
    assert text.count("\n") == 1
    assert text.endswith("\n")
    *_, before, last = text.split("\r")
    assert before.endswith("3/4 cells  75% 1 cells/s ETA 0:00:01")  # 3 of 4 done after 3 s
    assert last.rstrip() == "x [" + "#" * 30 + "] 4/4 cells 100% 1 cells/s in 0:00:04"
    assert len(last) - 1 == len(before)  # padded over the longer line before it


def test_terminal_redraws_are_throttled_but_the_end_is_always_drawn():
    out, clock = Tty(), Clock()
    bar = ProgressBar(out, "x", clock=clock, redraw_s=0.5)
    bar(0, 1000)
    for done in range(1, 1001):
        clock.now += 0.001
        bar(done, 1000)
    text = out.getvalue()
    assert text.count("\r") == 3  # start, t = 0.5 s, the end
    assert text.endswith("1,000/1,000 cells 100% 1,000 cells/s in 0:00:01\n")
    bar(1000, 1000)  # a repeated final tick prints nothing more
    assert out.getvalue() == text
