"""The interactive wizard (`trl-advisor` on a terminal). It asks, the core computes: no arithmetic lives here.

This first version asks for the model, the trainer, the method and the GPUs, and shows the `estimate` report for
that request, plus the command line that reproduces it. The full wizard (plan search, bundle writing) comes with the
TUI issue.
"""

from __future__ import annotations


def make_app():
    from textual.app import App, ComposeResult
    from textual.containers import Horizontal, Vertical
    from textual.widgets import Button, Footer, Header, Input, Label, Select, Static

    from advisor.core.request import METHODS, TRAINERS

    class WizardApp(App):
        TITLE = "trl-advisor"
        SUB_TITLE = "plan a TRL run for your GPUs"
        CSS = """
        Vertical#form { width: 60; padding: 1 2; }
        Input, Select { margin-bottom: 1; }
        Static#report { padding: 1 2; }
        """
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield Header()
            with Horizontal():
                with Vertical(id="form"):
                    yield Label("Model (id, hub id or size such as 7B)")
                    yield Input(value="qwen2.5-7b", id="model")
                    yield Label("Trainer")
                    yield Select([(t.upper(), t) for t in TRAINERS], value="sft", id="trainer", allow_blank=False)
                    yield Label("Method")
                    yield Select([(m, m) for m in METHODS], value="lora", id="method", allow_blank=False)
                    yield Label("GPU (catalogue id; blank = this machine)")
                    yield Input(value="", id="gpu", placeholder="H100-80GB")
                    yield Label("GPUs per node")
                    yield Input(value="1", id="gpus")
                    yield Button("Estimate", id="go", variant="primary")
                yield Static("", id="report")
            yield Footer()

        def on_button_pressed(self, event: Button.Pressed) -> None:
            self.query_one("#report", Static).update(self._estimate())

        def _estimate(self) -> str:
            from advisor.check import estimate_request as estimate
            from advisor.check import render_estimate
            from advisor.core.errors import AdvisorError
            from advisor.core.request import Request

            gpus_text = self.query_one("#gpus", Input).value.strip() or "1"
            try:
                req = Request(model=self.query_one("#model", Input).value.strip(),
                              trainer=self.query_one("#trainer", Select).value,
                              method=self.query_one("#method", Select).value,
                              gpu=self.query_one("#gpu", Input).value.strip() or None,
                              gpus=int(gpus_text) if gpus_text.isdigit() else 0)
                result = estimate(req)
            except AdvisorError as e:
                return f"error: {e.message}\nhint: {e.hint or ''}"
            command = f"trl-advisor estimate --model {req.model} --trainer {req.trainer} --method {req.method}"
            if req.gpu:
                command += f" --gpu {req.gpu}"
            command += f" --gpus {req.gpus}"
            return render_estimate(result) + "\n\nSame from a script:\n  " + command

    return WizardApp()


def run_wizard() -> int:
    make_app().run()
    return 0
