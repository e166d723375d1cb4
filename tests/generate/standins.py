"""Stand-in executables for running generated launch.sh and slurm.sbatch without GPUs, vLLM or SLURM.

Each stand-in is a small Python program written into a bin folder that goes first on PATH. It records what it was
started with (arguments, working folder, CUDA_VISIBLE_DEVICES, pid, process group, session) as one JSON file per
process under a record folder, and behaves as the test asks through environment variables:

- `vllm`: an HTTP server on the --host/--port it is given, answering GET /health with 200 once ready (503 before),
  with a worker child process like vLLM's engine processes. STANDIN_VLLM: `ready:S` (ready after S seconds),
  `never` (never ready), `exit:S:CODE` (exits with CODE after S seconds, never ready), `die:S` (ready at once, exits
  with 1 after S seconds), `stubborn` (ready at once, ignores SIGTERM).
- `accelerate`: the training. It asks the server's /health once when it starts (STANDIN_PORT) and records the
  answer and the VLLM_SERVER_PORT it was given (train.py's port), starts a worker child like torchrun's, then STANDIN_TRAIN: `ok` (ends its worker and exits 0 after 0.3 s),
  `fail:CODE` (the same, exit status CODE), `long` (runs until stopped), `stubborn` (runs, ignoring SIGTERM).
- `scontrol`: `show hostnames` prints STANDIN_NODES (comma-separated); `show job ID` prints a job record in
  scontrol's layout whose Command= line is STANDIN_JOB_COMMAND (absent: scontrol fails, as for an unknown job).
- `srun`: runs its command (what follows its own leading --options) once per node, SLURM_PROCID 0..SLURM_NNODES-1,
  in its own working folder, and fails if any task does.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

_RECORD = '''
import json, os, sys, time
def record(kind, **extra):
    folder = os.environ["STANDIN_RECORDS"]
    data = {"kind": kind, "argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0),
            "sid": os.getsid(0), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "time": time.time(), **extra}
    path = os.path.join(folder, f"{kind}-{os.getpid()}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(data, fh)
    os.replace(path + ".tmp", path)
    return data
def worker():
    import subprocess
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid
'''

VLLM = _RECORD + '''
import http.server, signal, threading
args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
mode = os.environ.get("STANDIN_VLLM", "ready:0").split(":")
state = {"ready": False}
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/health" and state["ready"]
        self.send_response(200 if ok else 503)
        self.end_headers()
    def log_message(self, *a):
        pass
if mode[0] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid_worker = worker()
record("vllm", worker=pid_worker, dev_mode=os.environ.get("VLLM_SERVER_DEV_MODE"))
server = http.server.ThreadingHTTPServer((host, port), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("stand-in vllm listening", flush=True)
if mode[0] == "ready":
    time.sleep(float(mode[1]))
    state["ready"] = True
    record("vllm_ready")
elif mode[0] == "exit":
    time.sleep(float(mode[1]))
    print("stand-in vllm: CUDA out of memory", flush=True)
    sys.exit(int(mode[2]))
elif mode[0] == "die":
    state["ready"] = True
    record("vllm_ready")
    time.sleep(float(mode[1]))
    sys.exit(1)
elif mode[0] == "stubborn":
    state["ready"] = True
    record("vllm_ready")
while True:
    time.sleep(1)
'''

ACCELERATE = _RECORD + '''
import urllib.request
port = os.environ.get("STANDIN_PORT")
health = None
if port:
    try:
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status
    except Exception as exc:
        health = repr(exc)
mode = os.environ.get("STANDIN_TRAIN", "ok").split(":")
if mode[0] == "stubborn":
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid_worker = worker()
record("accelerate", worker=pid_worker, health=health, server_port=os.environ.get("VLLM_SERVER_PORT"))
if mode[0] in ("ok", "fail"):  # as torchrun's agent does, it ends its worker when the run ends
    time.sleep(0.3)
    os.kill(pid_worker, 15)
    os.waitpid(pid_worker, 0)
    sys.exit(0 if mode[0] == "ok" else int(mode[1]))
while True:
    time.sleep(1)
'''

SCONTROL = _RECORD + '''
args = sys.argv[1:]
record("scontrol")
if args[:2] == ["show", "hostnames"]:
    print("\\n".join(os.environ.get("STANDIN_NODES", "node0").split(",")))
    sys.exit(0)
if args[:2] == ["show", "job"]:
    command = os.environ.get("STANDIN_JOB_COMMAND")
    if command is None:
        print(f"slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        sys.exit(1)
    print(f"JobId={args[2]} JobName=trl-advisor\\n   UserId=u(1000) GroupId=u(1000) MCS_label=N/A\\n"
          f"   JobState=RUNNING Reason=None Dependency=(null)\\n   Command={command}\\n   SubmitLine=sbatch x\\n"
          f"   WorkDir={os.environ.get('SLURM_SUBMIT_DIR', '')}\\n   StdOut=/dev/null")
    sys.exit(0)
sys.exit(2)
'''

SRUN = _RECORD + '''
import subprocess
record("srun")
args = sys.argv[1:]
while args and args[0].startswith("--"):  # srun's own options come before the command
    args.pop(0)
cmd = args
status = 0
for rank in range(int(os.environ.get("SLURM_NNODES", "1"))):
    status = status or subprocess.call(cmd, env={**os.environ, "SLURM_PROCID": str(rank)})
sys.exit(status)
'''

PROGRAMS = {"vllm": VLLM, "accelerate": ACCELERATE, "scontrol": SCONTROL, "srun": SRUN}


def make_bin(folder: Path, names=tuple(PROGRAMS)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(PROGRAMS[name]), encoding="utf-8")
        path.chmod(0o755)
    return folder


def records(folder: Path, kind: str) -> list[dict]:
    out = []
    for path in sorted(folder.glob(f"{kind}-*.json")):
        out.append(json.loads(path.read_text(encoding="utf-8")))
    return sorted(out, key=lambda r: r["time"])


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by its parent, counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stand_in_pids(folder: Path) -> list[int]:
    """Every process a stand-in recorded: the stand-ins themselves and their worker children."""
    pids = []
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        pids.append(data["pid"])
        if data.get("worker"):
            pids.append(data["worker"])
    return pids


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill_leftovers(folder: Path) -> None:
    """After a test: whatever a stand-in left running (only when the script under test failed to stop it)."""
    for pid in stand_in_pids(folder):
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def generate_quietly(argv: list[str], out: Path) -> Path:
    """`trl-advisor generate ARGV --out OUT`, its report swallowed (shown only if it fails): the bundle's folder."""
    from advisor.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(["generate", *argv, "--out", str(out)])
    assert rc == 0, err.getvalue()
    return out
