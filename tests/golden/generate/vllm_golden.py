"""vLLM 0.33.0's own PrometheusStatLogger, record()ed with SchedulerStats for each DP engine,
written by prometheus_client's generate_latest (what vLLM's /metrics route calls)."""
import json, sys
import vllm_stubs  # noqa: F401 (installs the stubs)
from types import SimpleNamespace as NS
import vllm.envs as envs
envs.VLLM_COMPUTE_NANS_IN_LOGITS = False
import vllm.v1.metrics.loggers as L
from vllm.v1.metrics.stats import SchedulerStats
from prometheus_client import REGISTRY, generate_latest

cfg = json.loads(sys.argv[1])
obs = NS(show_hidden_metrics=False, kv_cache_metrics=False, custom_histogram_buckets=None)
model = NS(served_model_name=cfg["model"], max_model_len=32768, is_diffusion=False)
vc = NS(observability_config=obs, model_config=model, speculative_config=None,
        kv_transfer_config=None, lora_config=None, watermark_config=None)
engines = [e["engine"] for e in cfg["engines"]]
logger = L.PrometheusStatLogger(vc, engines)
for e in cfg["engines"]:
    s = SchedulerStats(num_running_reqs=e["running"], num_waiting_reqs=e["capacity"],
                       num_skipped_waiting_reqs=e["deferred"], kv_cache_usage=e["kv"])
    logger.record(s, None, engine_idx=e["engine"])
sys.stdout.write(generate_latest(REGISTRY).decode())
