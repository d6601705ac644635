"""Stub the heavy modules vLLM 0.33's v1/metrics/loggers.py imports so its own
PrometheusStatLogger runs on CPU with only prometheus_client installed."""
import os, sys, types, enum
ROOT = os.environ["VLLM_ROOT"]  # the unpacked vllm wheel (the folder holding vllm/)

class _Any:
    def __or__(self, o): return self
    def __ror__(self, o): return self
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Any()
    def __getattr__(self, n):
        if n.startswith('__'): raise AttributeError(n)
        return _Any()
    def __bool__(self): return False
    def __iter__(self): return iter(())
    def __mro_entries__(self, bases): return (object,)

def stub(name, **attrs):
    m = types.ModuleType(name)
    def ga(n):
        if n.startswith('__'): raise AttributeError(n)
        return _Any()
    m.__getattr__ = ga
    for k, v in attrs.items(): setattr(m, k, v)
    sys.modules[name] = m
    return m

def pkg(name, path):
    m = types.ModuleType(name); m.__path__ = [path]; sys.modules[name] = m

for p in ["vllm", "vllm.v1", "vllm.v1.metrics"]:
    pkg(p, ROOT + "/" + p.replace(".", "/"))

class FinishReason(enum.IntEnum):
    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3
    REPETITION = 4
    def __str__(self): return self.name.lower()

import logging
for name in ["vllm.envs", "vllm.compilation.cuda_graph", "vllm.config",
             "vllm.distributed.ec_transfer.ec_connector.metrics",
             "vllm.distributed.kv_transfer.kv_connector.v1.metrics",
             "vllm.plugins", "vllm.v1.metrics.perf", "vllm.v1.spec_decode.metrics",
             ]:
    stub(name)
stub("vllm.logger", init_logger=lambda n: logging.getLogger(n))
stub("vllm.v1.engine", FinishReason=FinishReason)
stub("vllm.plugins", STAT_LOGGER_PLUGINS_GROUP="x", load_plugins_by_group=lambda g: {})
