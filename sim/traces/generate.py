#!/usr/bin/env python3
"""Writes the request-level traces in this folder, each in two formats.

    python3 sim/traces/generate.py        # from the repository root; rewrites the 4 traces

Deterministic: a fixed seed per trace and only `random.Random.random()` (Mersenne
Twister, the same on every CPython 3), so the files come out byte-for-byte the same.
Python's standard library only.

Each trace is 30 minutes at a mean of about 4 requests/s: small enough to commit, meant
to be scaled up with `simulate --rate-scale X` to load a fleet. Both files of a trace
hold the same requests in the same order (arrivals rounded to whole milliseconds):

- `<name>.jsonl`: Mooncake's format, one JSON object per line:
  `{"timestamp": ms, "input_length": N, "output_length": N, "hash_ids": [...]}`.
  `hash_ids` name the prompt's 512-token blocks; requests of one session share all
  but their last block (a repeated prefix, as prefix caching sees it). The simulator
  does not read them; they are there so the file is a well-formed Mooncake trace.
- `<name>.csv`: the Azure LLM inference trace's format,
  `TIMESTAMP,ContextTokens,GeneratedTokens` with 7 fractional digits of seconds, from an
  arbitrary start date (no real date is implied).

The two mixes imitate, in shape only, the two kinds of service in the Azure LLM
inference trace of 2023 (released with the Splitwise paper, ISCA 2024): a code service
whose prompts are long and whose completions are very short, and a conversation service
whose prompts are shorter and whose answers are longer, with a long tail. No published
data is copied or sampled, and the medians below are chosen by hand for this project's
tests and scenarios, not fitted to the published distributions:

- code-completion: the code service's shape. Prompts are long (a file's context:
  lognormal, median 1500 tokens) and completions short (median ~38 tokens), and
  requests come in bursts as developers type. Arrivals are a two-state Markov-modulated
  Poisson process: 2.5 req/s calm, 10 req/s bursts, mean sojourns 80 s and 20 s, so
  bursts hold a fifth of the time and the mean is 4 req/s.
- chat: the conversation service's shape. Prompts are medium (median 850 tokens) and
  answers longer with a long tail (lognormal, median 260, sigma 0.65, up to 4096), and
  the rate moves smoothly like a compressed day: 4 - 1.5 cos(2 pi t / 30 min) req/s,
  from 2.5 at the start to 5.5 at 15 min and back.
"""

import datetime
import json
import math
import os
import random

DURATION_SECONDS = 30 * 60
BLOCK_TOKENS = 512
AZURE_START = datetime.datetime(2025, 2, 3, 9, 0, 0)
HERE = os.path.dirname(os.path.abspath(__file__))


def normal(rng):
    """Standard normal by Box-Muller, from random() alone (stable across versions)."""
    u1 = 1.0 - rng.random()
    u2 = rng.random()
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def exponential(rng, rate):
    return -math.log(1.0 - rng.random()) / rate


def lognormal_tokens(rng, median, sigma, low, high):
    return max(low, min(high, int(round(median * math.exp(sigma * normal(rng))))))


def mmpp_arrivals(rng, low, high, mean_low, mean_high):
    """Arrival times of a two-state MMPP, starting calm."""
    t, state_high = 0.0, False
    switch = exponential(rng, 1.0 / mean_low)
    times = []
    while True:
        rate = high if state_high else low
        t += exponential(rng, rate)
        while t >= switch:
            # Memoryless: restart the next gap at the switch with the new rate.
            t = switch
            state_high = not state_high
            switch += exponential(rng, 1.0 / (mean_high if state_high else mean_low))
            t += exponential(rng, high if state_high else low)
        if t >= DURATION_SECONDS:
            return times
        times.append(t)


def smooth_arrivals(rng, rate_of, peak):
    """A non-homogeneous Poisson process by thinning."""
    t, times = 0.0, []
    while True:
        t += exponential(rng, peak)
        if t >= DURATION_SECONDS:
            return times
        if rng.random() * peak < rate_of(t):
            times.append(t)


def code_completion():
    rng = random.Random(20250203)
    times = mmpp_arrivals(rng, 2.5, 10.0, 80.0, 20.0)
    requests = []
    for t in times:
        prompt = lognormal_tokens(rng, 1500, 0.55, 64, 8192)
        completion = lognormal_tokens(rng, 38, 0.55, 4, 256)
        # Popular repositories get more requests: a Zipf-like pick among 120 sessions.
        session = int(120 * rng.random() ** 2.5)
        requests.append((t, prompt, completion, session))
    return requests


def chat():
    rng = random.Random(20250204)
    rate = lambda t: 4.0 - 1.5 * math.cos(2.0 * math.pi * t / DURATION_SECONDS)
    times = smooth_arrivals(rng, rate, 5.5)
    requests = []
    for t in times:
        prompt = lognormal_tokens(rng, 850, 0.5, 16, 8192)
        answer = lognormal_tokens(rng, 260, 0.65, 1, 4096)
        session = int(900 * rng.random())
        requests.append((t, prompt, answer, session))
    return requests


def to_millis(requests):
    return [(int(round(t * 1000.0)), i, o, s) for t, i, o, s in requests]


class Blocks:
    """Block ids numbered in order of first use, as Mooncake's are (small numbers)."""

    def __init__(self):
        self.ids = {}

    def id(self, key):
        return self.ids.setdefault(key, len(self.ids))

    def of(self, prompt, session, request):
        """The session's shared prefix blocks, then one block of this request's own."""
        blocks = max(1, math.ceil(prompt / BLOCK_TOKENS))
        shared = [self.id((session, k)) for k in range(blocks - 1)]
        return shared + [self.id(("request", request))]


def write(name, requests):
    rows = to_millis(requests)
    blocks = Blocks()
    with open(os.path.join(HERE, name + ".jsonl"), "w", newline="\n") as out:
        for index, (ms, prompt, completion, session) in enumerate(rows):
            row = {
                "timestamp": ms,
                "input_length": prompt,
                "output_length": completion,
                "hash_ids": blocks.of(prompt, session, index),
            }
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    with open(os.path.join(HERE, name + ".csv"), "w", newline="\n") as out:
        out.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for ms, prompt, completion, _ in rows:
            at = AZURE_START + datetime.timedelta(milliseconds=ms)
            stamp = at.strftime("%Y-%m-%d %H:%M:%S") + ".%07d" % (at.microsecond * 10)
            out.write("%s,%d,%d\n" % (stamp, prompt, completion))
    return rows


def stats(name, rows):
    n = len(rows)
    duration = rows[-1][0] / 1000.0
    minutes = [0] * (int(duration // 60) + 1)
    for ms, _, _, _ in rows:
        minutes[int(ms / 1000.0 // 60)] += 1
    prompts = sorted(r[1] for r in rows)
    outputs = sorted(r[2] for r in rows)
    sizes = [os.path.getsize(os.path.join(HERE, name + ext)) // 1024 for ext in (".jsonl", ".csv")]
    return "| %s | %d | %.1f | %.2f | %.2f | %.2f | %.0f / %d | %.0f / %d / %d | %d / %d |" % (
        name,
        n,
        duration,
        n / duration,
        minutes[0] / 60.0,
        max(minutes) / 60.0,
        sum(prompts) / n,
        prompts[n // 2],
        sum(outputs) / n,
        outputs[n // 2],
        outputs[int(n * 0.99)],
        sizes[0],
        sizes[1],
    )


def main():
    print("| trace | requests | duration s | mean req/s | first-minute req/s | peak-minute req/s "
          "| input tokens mean / median | output tokens mean / median / p99 | KiB jsonl / csv |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, make in (("code-completion", code_completion), ("chat", chat)):
        rows = write(name, make())
        print(stats(name, rows))


if __name__ == "__main__":
    main()
