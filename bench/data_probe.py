"""What TRL's data path costs the host CPU per step, measured where a benchmark row runs.

    python -m bench.data_probe --out bench/results/data-probe-DATE.json

The Trainer fetches a step's micro-batches in its own process (dataloader_num_workers=0, as the benchmark and the
bundles run) at the start of the step, after the previous step's syncs (the grad-norm and loss .item() of logging):
the GPU waits while the host turns the dataset's Arrow rows into Python lists and TRL's collator pads them into
tensors. This times SFTTrainer's own train dataloader (a tiny model on the CPU: the model plays no part in it) over
the benchmark's synthetic data (bench.worker build_dataset's SFT form: input_ids of fixed length), per 1,024 tokens,
with the host's dispatch speed beside it (bench.host_probe). Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
import warnings
from typing import Any

from bench.rows_file import new_output_problem, save_json

CASES = ((1024, 64), (1024, 16), (2048, 8), (4096, 4), (8192, 2))
"""(sequence length, micro-batch) of the batches timed."""
BATCHES = 6
VOCAB = 1000


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"t{i}": i for i in range(VOCAB)}
    words.update({"<unk>": VOCAB, "<bos>": VOCAB + 1, "<pad>": VOCAB + 2, "<eos>": VOCAB + 3})
    tk = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>")


def time_case(seq: int, mb: int, out_dir: str) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    rng = random.Random(0)
    ds = Dataset.from_dict({"input_ids": [[rng.randrange(VOCAB) for _ in range(seq)] for _ in range(mb * BATCHES)]})
    model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB + 4, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    args = SFTConfig(output_dir=out_dir, per_device_train_batch_size=mb, max_length=seq, report_to=[],
                     use_cpu=True, dataloader_num_workers=0, max_steps=1)
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=_tokenizer())
    it = iter(trainer.get_train_dataloader())
    next(it)  # the first batch builds the sampler and the formatter
    t0 = time.perf_counter()
    n = sum(1 for _ in it)
    per_batch = (time.perf_counter() - t0) / max(1, n)
    return {"seq_len": seq, "micro_batch": mb, "batches": n, "ms_per_batch": round(per_batch * 1e3, 3),
            "ms_per_1024_tokens": round(per_batch / (mb * seq) * 1024 * 1e3, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.data_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write (must not exist)")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    warnings.filterwarnings("ignore")
    import tempfile

    import datasets
    import torch
    import transformers
    import trl

    from bench.host_probe import host_cpus, host_probe

    result: dict[str, Any] = {
        "command": "python -m bench.data_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(), "host": host_probe(torch), "cpus": host_cpus(torch),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
                     "datasets": datasets.__version__},
        "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for seq, mb in CASES:
            result["cases"].append(time_case(seq, mb, tmp))
            print(json.dumps(result["cases"][-1]), flush=True)
    save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
