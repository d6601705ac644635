"""Stub the heavy (torch-pulling) modules sglang's metrics code imports, so the real
collector classes run on CPU with only prometheus_client and msgspec installed."""
import sys, types, enum, os
ROOT = os.environ["SGLANG_ROOT"]  # the unpacked sglang wheel (the folder holding sglang/)

class _Any:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Any()
    def __getattr__(self, n): return _Any()
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

class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2
    MIXED = 3
    IDLE = 4
    def is_extend(self): return self in (ForwardMode.EXTEND, ForwardMode.MIXED)

class DisaggregationMode(enum.Enum):
    NULL = "null"
    PREFILL = "prefill"
    DECODE = "decode"
    @staticmethod
    def to_engine_type(mode):
        return {"prefill": "prefill", "decode": "decode"}.get(getattr(mode, "value", mode), "unified")

for pkg, path in [("sglang", ROOT + "/sglang"), ("sglang.srt", ROOT + "/sglang/srt")]:
    m = types.ModuleType(pkg); m.__path__ = [path]; sys.modules[pkg] = m
for name in ["torch", "sglang.srt.model_executor", "sglang.srt.disaggregation"]:
    stub(name)
stub("sglang.srt.model_executor.forward_batch_info", ForwardMode=ForwardMode)
stub("sglang.srt.disaggregation.utils", DisaggregationMode=DisaggregationMode)

def get_bool_env_var(name, default="false"):
    return os.getenv(name, default).lower() in ("true", "1")
u = stub("sglang.srt.utils", get_bool_env_var=get_bool_env_var)
u.__path__ = [ROOT + "/sglang/srt/utils"]
class ServerArgs:  # only a type annotation and a few attributes in the collectors
    pass
stub("sglang.srt.server_args", ServerArgs=ServerArgs)

from types import SimpleNamespace as NS
CFG = NS(
    schedule=NS(enable_priority_scheduling=os.getenv("G_PRIORITY") == "1",
                prefill_delayer_max_delay_passes=30,
                prefill_delayer_forward_passes_buckets=None,
                prefill_delayer_wait_seconds_buckets=None),
    observability=NS(enable_metrics=True, enable_metrics_for_all_schedulers=False,
                     extra_metric_labels=None, generation_tokens_buckets=None,
                     kv_events_config=None, prompt_tokens_buckets=None, stat_loggers=None,
                     tokenizer_metrics_allowed_custom_labels=None),
    disagg=NS(disaggregation_mode=DisaggregationMode.NULL, enable_pd_role_switch=False),
    serving=NS(enable_streaming_session=False, served_model_name=os.getenv("G_MODEL", "Qwen/Qwen3-8B")),
    parallel=NS(pp_rank=0),
)
stub("sglang.srt.runtime_context",
     get_context=lambda: NS(is_config_namespace_published=lambda n: False),
     get_disagg=lambda: CFG.disagg, get_observability=lambda: CFG.observability,
     get_parallel=lambda: CFG.parallel, get_schedule=lambda: CFG.schedule,
     get_serving=lambda: CFG.serving,
     exports_expert_balancedness_to_prometheus=lambda: False)
