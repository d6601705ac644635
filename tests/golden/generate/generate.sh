#!/usr/bin/env bash
# Regenerate ../*.txt with the engines' own metric code (not run in CI: it downloads the
# sglang 0.5.23 and vllm 0.33.0 wheels, ~375 MB, and imports their metric modules with
# torch and the rest stubbed out; only prometheus_client and msgspec are installed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q prometheus_client==0.26.0 msgspec
"$work/venv/bin/pip" download -q --no-deps sglang==0.5.23 vllm==0.33.0 -d "$work/wheels"
mkdir -p "$work/sg" "$work/vl"
unzip -q "$work"/wheels/sglang-0.5.23-*.whl 'sglang/*' -d "$work/sg"
unzip -q "$work"/wheels/vllm-0.33.0-*.whl 'vllm/*' -x 'vllm/*.so' -d "$work/vl"
py="$work/venv/bin/python"
export PYTHONPATH="$here" SGLANG_ROOT="$work/sg" VLLM_ROOT="$work/vl"
cd "$here"

# Priority scheduling: 15 waiting (10 at priority 0, 5 at 5), 10 running (6 and 4).
export PROMETHEUS_MULTIPROC_DIR="$(mktemp -d)" G_PRIORITY=1
"$py" sglang_scheduler.py '{"tp_rank":0,"waiting":{"total":15,"by_priority":{"0":10,"5":5}},"running":{"total":10,"by_priority":{"0":6,"5":4}},"token_usage":0.4}'
"$py" sglang_tokenizer.py '{"requests":[{"priority":0,"ttft":0.15,"e2e":1.0,"prompt":100,"generation":10,"stream":true},{"priority":5,"ttft":0.3,"e2e":2.0,"prompt":50,"generation":5,"stream":false}]}'
"$py" sglang_collect.py > ../sglang-0.5.23-priority.txt
unset G_PRIORITY

# DP attention 2 × attention-TP 4 (EP 8): the schedulers of global tp_rank 0 and 4 log.
export PROMETHEUS_MULTIPROC_DIR="$(mktemp -d)"
"$py" sglang_scheduler.py '{"tp_rank":0,"dp_rank":0,"moe_ep_rank":0,"waiting":12,"running":5,"token_usage":0.25}'
"$py" sglang_scheduler.py '{"tp_rank":4,"dp_rank":1,"moe_ep_rank":4,"waiting":8,"running":3,"token_usage":0.75}'
"$py" sglang_tokenizer.py '{"requests":[{"ttft":0.15,"e2e":1.0,"prompt":100,"generation":10,"stream":true},{"ttft":0.3,"e2e":2.0,"prompt":50,"generation":5,"stream":false}]}'
"$py" sglang_collect.py > ../sglang-0.5.23-dp-attention.txt
unset PROMETHEUS_MULTIPROC_DIR

# vLLM, two data-parallel engines: 3 + 2 deferred waiting on engine 0, 5 + 0 on engine 1.
"$py" vllm_golden.py '{"model":"meta-llama/Llama-3.1-8B-Instruct","engines":[{"engine":0,"running":4,"capacity":3,"deferred":2,"kv":0.5},{"engine":1,"running":6,"capacity":5,"deferred":0,"kv":0.25}]}' > ../vllm-0.33.0-dp2.txt
