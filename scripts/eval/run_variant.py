"""A run's variant name, as `xsagpt eval` reports it and the tools label runs by it
("sa", "xsa layers=last 3 gate=sa", "sa sinks=1"). xsagpt computes it in one place
(src/config/attention_spec.cpp: AttentionSpec::name) and writes it into each run's
config.json as "variant"; a run older than that has only its model keys, and gets
the same rule here. table2.py imports this module beside it; scripts/view/plot.py
loads it from this file."""
import json


def variant_of(config: dict | None) -> str | None:
    """The variant of a run config (config.json, or {"model": ...}); None without a model."""
    if not isinstance(config, dict):
        return None
    if isinstance(config.get("variant"), str):
        return config["variant"]
    model = config.get("model")
    # config.json holds every model key; a model without its kind names no variant.
    if not isinstance(model, dict) or not isinstance(model.get("attention"), str):
        return None
    name = model["attention"]
    layers = model.get("xsa_layers")
    if layers is not None:
        name += f" layers={layers if isinstance(layers, str) else json.dumps(layers, separators=(',', ':'))}"
    if model.get("xsa_gate", "off") != "off":
        name += f" gate={model['xsa_gate']}"
    if isinstance(model.get("n_sink"), int) and model["n_sink"] > 0:
        name += f" sinks={model['n_sink']}"
    return name
