"""Drive `trl-advisor` in tmux as a user does: keys in with `tmux send-keys`, the screen read back with
`tmux capture-pane`, screenshots with Textual's own SVG export (command palette, "Screenshot").

    python tests/tui/tmux_drive.py OUT_DIR [this-machine] [h100-file]

this-machine   bare `trl-advisor` on this machine (no GPU here): type a model, look at the probe on the Target tab,
               switch to target mode (a catalogue GPU, 8 per node), the plan, LoRA in the Training tab, the rules,
               the Rent tab (1B tokens), use its second option, write the bundle.
h100-file      `trl-advisor wizard --model 8B --hardware h100x8.json` (the 8 x H100 SXM fixture): the Target tab
               with the NVLink matrix, the plan, GRPO, the rules, write the bundle.

Each session runs in a fresh temporary folder; OUT_DIR/SESSION/ gets the screens as text (NN-step.txt) and the
screenshots (tmux-*.svg). At the end the bundle the wizard wrote is compared, file by file and byte for byte, with
what `trl-advisor generate` writes from the command line in the bundle's README (exit 1 when they differ).
docs/wizard/tmux/ holds the run of 2026-12-01.
"""

from __future__ import annotations

import filecmp
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "hardware" / "h100_sxm_x8_nvlink.json"
SOCKET = f"trl-advisor-drive-{os.getpid()}"
TMUX = ["tmux", "-L", SOCKET, "-f", os.devnull]


def trl_advisor() -> str:
    script = Path(sys.executable).with_name("trl-advisor")
    return str(script) if script.exists() else f"{shlex.quote(sys.executable)} -m advisor"


class Session:
    def __init__(self, command: str, cwd: Path, out: Path, downloads: Path, size=(100, 32)) -> None:
        self.cwd, self.out, self.downloads, self.step = cwd, out, downloads, 0
        out.mkdir(parents=True, exist_ok=True)
        # screenshots go to the downloads folder (platformdirs: ~/Downloads): a private HOME would change the
        # model caches, so the folder is watched instead and emptied of what this run adds
        env = {k: v for k, v in os.environ.items() if k != "TMUX"} | {"TERM": "xterm-256color"}
        line = f"cd {shlex.quote(str(cwd))} && {command}; echo EXITED rc=$?; sleep 60"
        subprocess.run(TMUX + ["new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-s", "w", line],
                       env=env, check=True)

    def screen(self) -> str:
        return subprocess.run(TMUX + ["capture-pane", "-p", "-t", "w"], capture_output=True, text=True).stdout

    def wait(self, text: str, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.05)
        raise SystemExit(f"{text!r} never appeared; the screen:\n{self.screen()}")

    def keys(self, *keys: str, pause: float = 0.15) -> None:
        for key in keys:
            subprocess.run(TMUX + ["send-keys", "-t", "w", key], check=True)
            time.sleep(pause)

    def tab(self, digit: str) -> None:
        """Leave the field (Esc), then the tab's digit after tmux's escape time (Esc 1 at once is alt+1)."""
        self.keys("Escape")
        time.sleep(0.6)
        self.keys(digit)

    def type(self, text: str) -> None:
        subprocess.run(TMUX + ["send-keys", "-t", "w", "-l", text], check=True)
        time.sleep(0.2)

    def save(self, name: str, settle: float = 0.8) -> None:
        time.sleep(settle)
        self.step += 1
        text = "\n".join(line.rstrip() for line in self.screen().splitlines()).rstrip() + "\n"
        (self.out / f"{self.step:02d}-{name}.txt").write_text(text, encoding="utf-8")

    def screenshot(self, name: str) -> None:
        before = set(glob.glob(str(self.downloads / "*.svg")))
        self.keys("C-p")
        self.wait("Search for commands")
        self.type("Screenshot")
        time.sleep(0.5)
        self.keys("Enter")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            new = set(glob.glob(str(self.downloads / "*.svg"))) - before
            if new:
                time.sleep(0.3)
                shutil.move(new.pop(), self.out / f"tmux-{name}.svg")
                time.sleep(5.5)  # the "saved" notice leaves before the next screen is read
                return
            time.sleep(0.1)
        raise SystemExit("the screenshot was not saved")

    def quit(self) -> None:
        self.keys("C-q")
        self.wait("EXITED rc=0", timeout=20)
        self.save("exit", settle=0)
        subprocess.run(TMUX + ["kill-server"], capture_output=True)  # our private server only
        time.sleep(0.5)


def this_machine(s: Session) -> None:
    s.wait("choose a model")
    s.save("bare-first-screen")
    s.type("qwen2.5-7b")
    s.wait("tokens/s")
    s.save("model-typed-this-machine")
    s.tab("1")
    s.wait("This machine")
    s.save("target-this-machine-no-gpu")
    s.screenshot("target-this-machine")
    s.keys("Enter", "Down", "Enter")  # Plan for: a catalogue GPU (H100-80GB, the default)
    s.wait("GPU  H100-80GB")
    s.keys("Tab", "Tab")
    s.type("8")  # GPUs per node
    s.wait("8 x H100-80GB")
    s.save("target-catalogue-8xH100")
    s.screenshot("target-catalogue")
    s.tab("3")
    s.wait("Why each knob")
    s.save("plan")
    s.tab("2")
    s.keys("Tab", "Tab", "Enter", "Down", "Down", "Enter")  # Method: lora
    s.wait("lora")
    s.save("method-lora")
    s.tab("4")
    s.wait("findings")
    s.save("rules")
    s.keys("6")
    s.type("1000000000")  # Tokens
    s.keys("Enter")  # ask now, and on to the options
    s.wait("hardware choices planned fit", timeout=120)
    s.save("rent", settle=1.5)
    s.screenshot("rent")
    s.keys("Down")
    s.save("rent-second-option", settle=0.3)
    s.keys("o")
    s.wait("Why each knob")
    s.save("plan-for-option", settle=1.5)
    s.keys("5")
    time.sleep(0.8)
    s.keys("w")
    s.wait("wrote ")
    s.save("bundle-written")
    s.screenshot("bundle")
    s.quit()


def h100_file(s: Session) -> None:
    s.wait("tokens/s")
    s.save("first-plan")
    s.keys("1")
    s.wait("GPUs: 8 x NVIDIA H100")
    s.save("target-file-8xH100")
    s.screenshot("target-file-8xH100")
    s.tab("3")
    s.wait("Why each knob")
    s.save("plan")
    s.screenshot("plan-8xH100")
    s.keys("2")
    time.sleep(0.3)
    s.keys("Tab", "Enter")
    time.sleep(0.3)
    s.keys("Down", "Down", "Enter")  # Trainer: GRPO
    s.wait("Generations")
    s.save("training-grpo", settle=1.5)
    s.tab("4")
    s.wait("findings")
    s.save("rules")
    s.keys("5")
    time.sleep(0.8)
    s.keys("w")
    s.wait("wrote ")
    s.save("bundle-written")
    s.quit()


SESSIONS = {"this-machine": ("", this_machine), "h100-file": ("wizard --model 8B --hardware h100x8.json", h100_file)}


def same_as_generate(cwd: Path) -> bool:
    """The bundle the wizard wrote against `trl-advisor generate` with its README's command line, same folder."""
    (bundle,) = (cwd / "generated").iterdir()
    lines = (bundle / "README.md").read_text(encoding="utf-8").splitlines()
    command = lines[lines.index("```bash") + 1]
    wizard = cwd / "from-wizard"
    bundle.rename(wizard)
    subprocess.run(shlex.split(command.replace("trl-advisor", trl_advisor(), 1)) + ["--out", str(bundle.relative_to(cwd))],
                   cwd=cwd, check=True, capture_output=True)
    names = sorted(p.name for p in wizard.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(wizard, bundle, names, shallow=False)
    same = names == sorted(p.name for p in bundle.iterdir()) and not mismatch and not errors
    print(f"{command}\n  {'byte for byte the same files' if same else 'DIFFERENT FILES'} ({len(names)} files)")
    return same


def main(argv: list[str]) -> int:
    if not argv or shutil.which("tmux") is None:
        sys.exit(__doc__)
    out, names = Path(argv[0]), argv[1:] or list(SESSIONS)
    downloads = Path.home() / "Downloads"
    made = not downloads.exists()
    downloads.mkdir(exist_ok=True)
    ok = True
    try:
        for name in names:
            args, drive = SESSIONS[name]
            with tempfile.TemporaryDirectory(prefix=f"wizard-{name}-") as tmp:
                cwd = Path(tmp)
                shutil.copy(FIXTURE, cwd / "h100x8.json")
                drive(Session(f"{trl_advisor()} {args}".rstrip(), cwd, out / name, downloads))
                ok = same_as_generate(cwd) and ok
    finally:
        subprocess.run(TMUX + ["kill-server"], capture_output=True)
        if made and not any(downloads.iterdir()):
            downloads.rmdir()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
