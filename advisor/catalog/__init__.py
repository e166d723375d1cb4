"""The model and GPU catalogues (advisor/catalog/data/*.toml, each row citing its source) and what `--model` and
`--gpu` names mean: catalogue ids, hub ids, size shorthands, local config.json files, the Hugging Face cache."""

from advisor.catalog.lookup import (
    CatalogError,
    all_gpus,
    all_models,
    catalogue_model,
    hf_cache_dir,
    match_nvml_name,
    model_sizes,
    parse_rows,
    resolve_gpu,
    resolve_model,
    validate_gpus,
    validate_models,
)

__all__ = ["CatalogError", "all_gpus", "all_models", "catalogue_model", "hf_cache_dir", "match_nvml_name", "model_sizes", "parse_rows",
           "resolve_gpu", "resolve_model", "validate_gpus", "validate_models"]
