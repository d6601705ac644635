"""One SGLang scheduler process: SGLang's own SchedulerMetricsCollector, its labels built
as SchedulerMetricsCollectorContext.init_new builds them, one log_stats call."""
import json, sys
import sglang_stubs as stubs
from sglang.srt.observability import metrics_collector as mc
cfg = json.loads(sys.argv[1])
labels = {"model_name": stubs.CFG.serving.served_model_name, "engine_type": "unified",
          "tp_rank": cfg["tp_rank"], "pp_rank": cfg.get("pp_rank", 0),
          "moe_ep_rank": cfg.get("moe_ep_rank", 0)}
if stubs.CFG.schedule.enable_priority_scheduling:
    labels["priority"] = ""
if cfg.get("dp_rank") is not None:
    labels["dp_rank"] = cfg["dp_rank"]
c = mc.SchedulerMetricsCollector(labels=labels, server_args=stubs.ServerArgs())
def qc(v):
    if isinstance(v, dict):
        by = {int(k): n for k, n in v["by_priority"].items()}
        return mc.QueueCount(total=v["total"], by_priority=by)
    return mc.QueueCount(total=v)
s = mc.SchedulerStats(num_running_reqs=qc(cfg["running"]), num_queue_reqs=qc(cfg["waiting"]),
                      token_usage=cfg.get("token_usage", 0.0))
c.log_stats(s)
