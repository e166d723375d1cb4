"""The estimate of one plan: peak GPU memory (advisor.model.memory), step time and tokens/s (advisor.model.speed),
and the `estimate --json` result (advisor.model.estimate). Pure arithmetic on a ModelSpec, a Plan and a Target;
it knows nothing of the rules, which receive its figures as data."""
