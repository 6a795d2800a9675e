"""The one progress reporter of long runs (``attnkit.report``): in a log (no terminal), a line a step
with its count, rate and time left; throttled where steps are many; a bar on a terminal."""

from __future__ import annotations

from attnkit import report


def test_a_log_line_a_step_with_its_rate_and_the_time_left(capsys, monkeypatch):
    clock = iter(float(i) for i in range(100))
    monkeypatch.setattr(report.time, "monotonic", lambda: next(clock))
    progress = report.Progress(4, "heads", "head")
    for i in range(4):
        progress.step(f"{i + 1}/4 layer 1 head {i + 1}")
    progress.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("heads: ")]
    assert len(lines) == 4
    assert (
        lines[0].startswith("heads: 1/4 layer 1 head 1 (")
        and "head/s, about" in lines[0]
        and "left)" in lines[0]
    )
    assert lines[-1].endswith("head/s)")  # done: no time left to say


def test_many_quick_steps_are_said_at_most_every_so_often(capsys, monkeypatch):
    clock = iter(float(i) for i in range(100))  # a second a step
    monkeypatch.setattr(report.time, "monotonic", lambda: next(clock))
    progress = report.Progress(None, "encoding", "pair", every_s=10)
    for i in range(25):
        progress.step(f"{(i + 1) * 1000:,} pairs read", n=1000)
    progress.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("encoding: ")]
    assert len(lines) == 3  # at 1 s, 11 s and 21 s; no total, so no time left
    assert all("pair/s)" in line and "left" not in line for line in lines)


def test_durations_read_as_a_clock():
    assert [report.duration(s) for s in (45, 450, 4500)] == ["45s", "7m30s", "1h15m"]
    assert report.pace(10, 20, 5.0, "step") == "2.00 step/s, about 5s left"
