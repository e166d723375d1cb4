"""`trl-advisor` and `trl-advisor wizard` as commands: on a terminal (a pseudo-terminal here) they open the wizard
and quit cleanly; without one they print a one-line usage error and a hint, exit 2."""

import os
import re
import select
import subprocess
import sys
import time

import pytest

pytest.importorskip("textual")
pty = pytest.importorskip("pty")

from wizard_harness import REPO  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b[PX^_].*?\x1b\\|\x1b\][^\x07]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b.")
ENV = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},  # the terminal's size, not these
       "TERM": "xterm-256color", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


class Terminal:
    """A command on a pseudo-terminal of a given size: what it wrote (escapes removed), keys to send, its exit."""

    def __init__(self, args, size=(100, 32)):
        import fcntl
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self.proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=ENV, cwd=REPO, start_new_session=True, close_fds=True)
        os.close(slave)
        self.fd, self.raw = master, b""

    def _read(self, seconds: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if ready:
            try:
                self.raw += os.read(self.fd, 65536)
            except OSError:  # the child closed the terminal
                time.sleep(seconds)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def wait_for(self, needle: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while needle not in self.text:
            if time.monotonic() > end or self.proc.poll() is not None and needle not in self.text:
                raise AssertionError(f"{needle!r} never appeared; rc={self.proc.poll()}; got {self.text[-2000:]!r}")
            self._read(0.1)
        return self.text

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def exit_code(self, timeout: float = 30.0) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self._read(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            raise AssertionError("the wizard did not quit")
        os.close(self.fd)
        return self.proc.returncode


def test_bare_command_on_a_terminal_opens_the_wizard_and_quits_with_ctrl_q():
    term = Terminal([])
    term.wait_for("2 Training")
    term.wait_for("choose a model")  # no model given: the form asks for one
    term.send(b"\x11")  # ctrl+q
    assert term.exit_code() == 0
    assert "Traceback" not in term.text


@pytest.mark.parametrize(("args", "shown"), [([], "choose a model"),
                                             (["wizard", "--model", "8B", "--gpu", "H200"], "tokens/s")],
                         ids=["bare", "flags"])
def test_quitting_while_the_other_tabs_are_built_is_clean(args, shown):
    for _ in range(3):  # the other tabs are built once the first plan is shown: quit into the middle of it
        term = Terminal(args)
        term.wait_for(shown)
        term.send(b"\x11")
        assert term.exit_code() == 0, term.text[-800:]
        assert "internal error" not in term.text


def test_wizard_flags_fill_the_form_and_the_plan_appears():
    from advisor.core.request import Request
    from advisor.search import decide

    _, result = decide(Request(model="8B", gpu="H100-80GB", gpus=8))
    figure = f"{result['speed']['tokens_per_second']:,.0f} tokens/s"
    term = Terminal(["wizard", "--model", "8B", "--gpu", "H100-80GB", "--gpus", "8"])
    term.wait_for(figure)
    term.send(b"q")
    assert term.exit_code() == 0
    assert "Traceback" not in term.text


def test_a_bad_flag_is_the_command_lines_usage_error_before_any_screen():
    term = Terminal(["wizard", "--model", "8B", "--seq-len", "0"])
    assert term.exit_code() == 2
    assert "error: --seq-len must be at least 1, got 0" in term.text and "hint: " in term.text


@pytest.mark.parametrize("args", [[], ["wizard", "--model", "8B"]], ids=["bare", "wizard"])
def test_without_a_terminal_a_one_line_usage_error(args):
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=ENV, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 2
    assert lines[-2] == "error: the wizard needs a terminal: stdin and stdout are not both one"
    assert lines[-1].startswith("hint: ")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("not_a_terminal", ["stdin", "stdout"])
def test_with_only_one_of_stdin_and_stdout_a_terminal_a_one_line_usage_error(not_a_terminal):
    master, slave = pty.openpty()
    try:
        streams = {"stdin": slave, "stdout": slave, not_a_terminal: subprocess.PIPE}
        proc = subprocess.Popen([sys.executable, "-m", "advisor", "wizard", "--model", "8B"], stdin=streams["stdin"],
                                stdout=streams["stdout"], stderr=subprocess.PIPE, env=ENV, cwd=REPO, text=True)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 2
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0] == "error: the wizard needs a terminal: stdin and stdout are not both one"
    assert lines[1].startswith("hint: run it in a terminal, or give a command (") and "--help" in lines[1]


def test_quitting_while_recommend_plans_is_clean():
    # that quitting does not wait for the recommend: test_wizard_rent (a recommend that never ends)
    term = Terminal(["wizard", "--model", "8B", "--gpu", "H100-80GB", "--gpus", "8", "--trainer", "grpo", "--steps",
                     "500"])
    term.wait_for("tokens/s")
    term.send(b"6")
    term.wait_for("recommend is planning")  # GRPO on every GPU type and count: seconds
    term.send(b"\x11")  # ctrl+q
    assert term.exit_code() == 0, term.text[-800:]
    assert "Traceback" not in term.text and "internal error" not in term.text
