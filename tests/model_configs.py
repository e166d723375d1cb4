"""config.json contents the suites write into local model folders (tests/ is on the test path, pyproject.toml)."""

QWEN_SMALL = {  # a Qwen2-shaped config.json (Qwen2.5-0.5B's numbers)
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
    "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "vocab_size": 151936,
}
