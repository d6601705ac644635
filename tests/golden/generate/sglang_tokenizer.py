"""SGLang's tokenizer process: TokenizerMetricsCollector with tokenizer_metric_labels(),
requests recorded as TokenizerManager.collect_metrics records them."""
import json, sys
import sglang_stubs as stubs
from sglang.srt.observability import metrics_collector as mc
cfg = json.loads(sys.argv[1])
labels = mc.tokenizer_metric_labels()
c = mc.TokenizerMetricsCollector(server_args=stubs.ServerArgs(), labels=labels)
for r in cfg["requests"]:
    l = dict(c.labels)
    if stubs.CFG.schedule.enable_priority_scheduling and r.get("priority") is not None:
        l["priority"] = str(r["priority"])
    c.observe_time_to_first_token(l, r["ttft"], stream=r["stream"])
    c.observe_one_finished_request(l, r["prompt"], r["generation"], 0, r["e2e"], False,
                                   is_streaming=r["stream"])
