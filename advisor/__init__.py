"""trl-advisor: plan, generate and verify Hugging Face TRL post-training runs.

The core (this package, `rules`, and `hw_probe` without a GPU) imports neither torch nor textual, so that
`trl-advisor generate` answers in well under a second on a laptop.
"""

__version__ = "0.1.0"
