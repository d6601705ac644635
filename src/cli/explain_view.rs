//! `explain`'s text view: `/explain`'s JSON turned into a page a person reads
//! at a terminal. Pure: JSON in, text out.
//!
//! It reads the JSON as a [`serde_json::Value`] rather than the server's
//! types, so an answer from an older or newer scaler (a field added, e.g.
//! `mode`, or missing) still renders; a field it does not know is left out.

use serde_json::Value;

/// The text view of an `/explain` body: one block per trigger.
pub fn render(explain: &Value) -> String {
    let triggers = explain["triggers"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if triggers.is_empty() {
        return "no triggers: this scaler has not been asked about any ScaledObject yet \
                (KEDA asks one scaler pod; try the others)\n"
            .to_owned();
    }
    triggers
        .iter()
        .map(render_trigger)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A number as a person reads it: at most 4 decimals, no trailing zeros.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let rounded = (v * 10_000.0).round() / 10_000.0;
    // `-0` reads as 0.
    format!("{}", rounded + 0.0)
}

/// Seconds as a person reads them: one decimal.
fn secs_of(v: &Value) -> Option<String> {
    v.as_f64().map(|s| num((s * 10.0).round() / 10.0))
}

fn num_of(v: &Value) -> Option<String> {
    v.as_f64().map(num)
}

fn text_of(v: &Value) -> Option<&str> {
    v.as_str()
}

fn render_trigger(t: &Value) -> String {
    let mut out = String::new();
    let line = |out: &mut String, s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(
        &mut out,
        format!(
            "{}/{}  (metric {})",
            text_of(&t["namespace"]).unwrap_or("?"),
            text_of(&t["name"]).unwrap_or("?"),
            text_of(&t["metricName"]).unwrap_or("?")
        ),
    );
    let state = text_of(&t["state"]).unwrap_or("unknown");
    match text_of(&t["reason"]) {
        Some(reason) => line(&mut out, format!("  state:      {state}: {reason}")),
        None => line(&mut out, format!("  state:      {state}")),
    }
    match &t["mode"] {
        Value::Null => {}
        // Shadow: KEDA gets 0 and inactive, whatever the numbers below say.
        Value::String(mode) if mode == "shadow" => line(
            &mut out,
            "  mode:       shadow: GetMetrics answers 0 and IsActive false; below is what it would answer"
                .to_owned(),
        ),
        Value::String(mode) => line(&mut out, format!("  mode:       {mode}")),
        other => line(&mut out, format!("  mode:       {other}")),
    }
    // A fresh trigger answers at least the backlog formula until its rate
    // estimate stands on its own (docs/decisions/0021): say so, and for how long.
    if let Some(reason) = text_of(&t["warming"]["reason"]) {
        let left = secs_of(&t["warming"]["secondsLeft"]).unwrap_or_else(|| "?".to_owned());
        line(&mut out, format!("  warming:    {left} s left: {reason}"));
    }
    if let Some(formula) = text_of(&t["formula"]) {
        line(&mut out, format!("  formula:    {formula}"));
    }
    if let Some(decision) = decision_line(t) {
        line(&mut out, format!("  decision:   {decision}"));
    }
    line(&mut out, format!("  timing:     {}", timing(t)));
    let components = components(t);
    if !components.is_empty() {
        line(&mut out, "  components:".to_owned());
        for (name, value) in components {
            line(&mut out, format!("    {name:<26} {value}"));
        }
    }
    render_fleet(&mut out, &t["pods"]);
    let sources = t["sources"].as_array().map_or(&[][..], Vec::as_slice);
    line(&mut out, format!("  sources ({}):", sources.len()));
    for source in sources {
        render_source(&mut out, source);
    }
    out
}

/// `B = max(D=…, D_lat=…, D_kv=…) = B → desired ceil(B/T) = N replicas;
/// active (B > A=…)`, or `None` when there is no value.
fn decision_line(t: &Value) -> Option<String> {
    let b = t["value"].as_f64()?;
    let c = &t["components"];
    let params = &t["params"];
    let mut terms = Vec::new();
    if let Some(d) = num_of(&c["demand"]) {
        terms.push(format!("D={d}"));
    }
    if let Some(l) = num_of(&c["latencyTerm"]) {
        terms.push(format!("D_lat={l}"));
    }
    if let Some(k) = num_of(&c["kvTerm"]) {
        terms.push(format!("D_kv={k}"));
    }
    let max = if terms.len() > 1 {
        format!("max({})", terms.join(", "))
    } else {
        // One term: `B = D = 12.5`, not `B = D=12.5 = 12.5`.
        terms.join("").replacen('=', " = ", 1)
    };
    let gpu = match text_of(&c["gpuAction"]) {
        Some("busyHold") => ", raised by the GPU busy hold",
        Some("idleVeto") => ", capped by the GPU idle veto",
        _ => "",
    };
    let mut text = if max.is_empty() {
        format!("B = {}", num(b))
    } else if terms.len() == 1 && gpu.is_empty() {
        format!("B = {max}")
    } else {
        format!("B = {max}{gpu} = {}", num(b))
    };
    if let (Some(target), Some(desired)) = (
        params["targetPerReplica"].as_f64(),
        t["desiredReplicas"].as_u64(),
    ) {
        let unit = if desired == 1 { "replica" } else { "replicas" };
        text.push_str(&format!(
            " → desired ceil({}/{}) = {desired} {unit}",
            num(b),
            num(target)
        ));
    }
    if let Some(active) = t["active"].as_bool() {
        let a = params["activationBacklog"]
            .as_f64()
            .map_or_else(|| "?".to_owned(), num);
        // Kafka with persistent lag: activation counts a larger `w·Q` than
        // `B` does, so the comparison is `B'`, not `B`.
        let compared = if c["activationBrokerTerm"].is_number() {
            format!(
                "B' (with w·Q={} as activation counts it)",
                num_of(&c["activationBrokerTerm"]).unwrap_or_default()
            )
        } else {
            "B".to_owned()
        };
        text.push_str(&if active {
            format!("; active ({compared} > A={a})")
        } else {
            format!("; inactive ({compared} ≤ A={a})")
        });
    }
    Some(text)
}

fn timing(t: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(valid) = secs_of(&t["validForSeconds"]) {
        parts.push(format!("value valid for {valid} s"));
    }
    if let Some(poll) = num_of(&t["pollIntervalSeconds"]) {
        parts.push(format!("poll every {poll} s"));
    }
    if let Some(age) = num_of(&t["maxSignalAgeSeconds"]) {
        parts.push(format!("max signal age {age} s"));
    }
    parts.join(", ")
}

/// Each component present, named as in the README's formula.
fn components(t: &Value) -> Vec<(String, String)> {
    let c = &t["components"];
    if !c.is_object() {
        return Vec::new();
    }
    let params = &t["params"];
    let mut rows = Vec::new();
    let mut row = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            rows.push((name.to_owned(), value));
        }
    };
    row("W (waiting)", num_of(&c["waiting"]));
    row("R (running)", num_of(&c["running"]));
    row(
        "T·R/C (running term)",
        num_of(&c["runningTerm"]).map(|v| {
            match (
                num_of(&params["targetPerReplica"]),
                num_of(&c["running"]),
                num_of(&params["runningPerReplica"]),
            ) {
                (Some(tt), Some(r), Some(cc)) => format!("{v}  ({tt}·{r}/{cc})"),
                _ => v,
            }
        }),
    );
    row("w·Q (broker)", num_of(&c["brokerTerm"]));
    row(
        "w·Q (activation counts)",
        num_of(&c["activationBrokerTerm"]),
    );
    row("D (demand)", num_of(&c["demand"]));
    let capacity = &c["capacity"];
    if capacity.is_object() {
        row("λ now (arrivals, req/s)", num_of(&capacity["arrivalRate"]));
        row("λ smoothed (req/s)", num_of(&capacity["smoothedRate"]));
        row("λ_peak (req/s)", num_of(&capacity["peakRate"]));
        row("peak held for (s)", num_of(&capacity["peakHoldSeconds"]));
        row(
            "μ (drain per replica)",
            num_of(&capacity["drainRate"]).map(|mu| {
                // How μ was obtained, as `/explain` says it; an older scaler
                // says only whether it was learned.
                match capacity["drainRateSource"].as_str() {
                    Some("none") => "none yet (not configured, not learned)".to_owned(),
                    Some(source) => format!("{mu} ({source})"),
                    None if capacity["drainRateLearned"].as_bool() == Some(true) => {
                        format!("{mu} (learned)")
                    }
                    None => format!("{mu} (configured)"),
                }
            }),
        );
        row("(1+headroom)·λ_peak/μ", num_of(&capacity["rateTerm"]));
        row("Σ min(1, W_i/(μ·H))", num_of(&capacity["podBacklogTerm"]));
    }
    row(
        "KV-cache usage",
        num_of(&c["kvCacheUsage"]).map(|kv| match num_of(&params["kvCacheTarget"]) {
            Some(target) => format!("{kv}  (target {target})"),
            None => kv,
        }),
    );
    row("D_kv (KV-cache term)", num_of(&c["kvTerm"]));
    row(
        "L (TTFT, s)",
        num_of(&c["ttftSeconds"]).map(|l| match num_of(&params["latency"]["sloSeconds"]) {
            Some(slo) => format!("{l}  (SLO {slo} s)"),
            None => l,
        }),
    );
    row("D_lat (latency term)", num_of(&c["latencyTerm"]));
    row("U (GPU utilisation, %)", num_of(&c["gpuUtilization"]));
    let gpu = &params["gpu"];
    if gpu.is_object() {
        let action = match text_of(&c["gpuAction"]) {
            Some("busyHold") => "busy hold raised B to T·n",
            Some("idleVeto") => "idle veto capped B at T·n",
            _ => "did not change B",
        };
        let bounds = [
            num_of(&gpu["busyPercent"]).map(|b| format!("busy ≥ {b} %")),
            num_of(&gpu["idlePercent"]).map(|i| format!("idle ≤ {i} %")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        row("GPU guard", Some(format!("{action}  ({bounds})")));
    }
    row(
        "n (replicas reporting)",
        c["replicasReporting"].as_u64().map(|n| n.to_string()),
    );
    row(
        "driver (won the max)",
        text_of(&c["driver"]).map(|d| {
            match d {
                "demand" => "D",
                "latency" => "D_lat",
                "kvCache" => "D_kv",
                other => other,
            }
            .to_owned()
        }),
    );
    rows
}

/// `/explain`'s `pods` (present while some scraped pods fail): how many
/// report against the quorum, the factor the sums are scaled by, and each
/// failing pod, held (its last reading still counts) or left out.
fn render_fleet(out: &mut String, fleet: &Value) {
    let (Some(discovered), Some(reporting)) =
        (fleet["discovered"].as_u64(), fleet["reporting"].as_u64())
    else {
        return;
    };
    let mut head = format!("  pods:       {reporting} of {discovered} discovered pods report");
    if let Some(fraction) = fleet["minReportingFraction"].as_f64() {
        // The server's own test (`Fleet::has_quorum`), so the view never
        // says "answers" where GetMetrics says UNAVAILABLE.
        let quorum = reporting as f64 >= fraction * discovered as f64 - 1e-9;
        head.push_str(&format!(" (minReportingFraction {})", num(fraction)));
        if !quorum {
            head.push_str("; below it: UNAVAILABLE");
        } else if let Some(factor) = fleet["extrapolation"].as_f64().filter(|f| *f != 1.0) {
            head.push_str(&format!(
                "; the sums are scaled by {discovered}/{reporting} = {}",
                num(factor)
            ));
        }
    }
    out.push_str(&head);
    out.push('\n');
    for pod in fleet["pods"].as_array().map_or(&[][..], Vec::as_slice) {
        let target = text_of(&pod["target"]).unwrap_or("?");
        let state = match text_of(&pod["state"]) {
            Some("held") => "held",
            Some("left_out") => "left out",
            Some(other) => other,
            None => "?",
        };
        let mut about = vec![text_of(&pod["reason"]).unwrap_or("?").to_owned()];
        match pod["failedPolls"].as_u64() {
            Some(1) => about.push("1 failed poll".to_owned()),
            Some(n) => about.push(format!("{n} failed polls")),
            None => {}
        }
        about.push(match secs_of(&pod["lastGoodAgeSeconds"]) {
            Some(age) => format!("last good reading {age} s ago"),
            None => "never answered".to_owned(),
        });
        // The error names the pod first; it is already on the line.
        let error = text_of(&pod["error"]).unwrap_or("");
        let error = error
            .strip_prefix(target)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(error);
        out.push_str(&format!(
            "    {state:<9} {target}  ({}): {error}\n",
            about.join(", ")
        ));
    }
}

fn render_source(out: &mut String, s: &Value) {
    let label = text_of(&s["source"]).unwrap_or("?");
    let failures = s["consecutiveFailures"].as_u64().unwrap_or(0);
    let age = match secs_of(&s["lastGoodAgeSeconds"]) {
        Some(age) => format!("last good reading {age} s ago"),
        None => "no good reading yet".to_owned(),
    };
    let failures = match failures {
        0 => String::new(),
        1 => ", 1 failed poll since".to_owned(),
        n => format!(", {n} failed polls since"),
    };
    out.push_str(&format!("    {label}\n      {age}{failures}\n"));
    if let Some(error) = text_of(&s["lastError"]) {
        out.push_str(&format!("      last error: {error}\n"));
    }
    if let Some(reason) = text_of(&s["backoff"]["reason"]) {
        let next = secs_of(&s["backoff"]["nextAttemptInSeconds"]).unwrap_or_else(|| "?".to_owned());
        out.push_str(&format!(
            "      backing off: next poll in {next} s; {reason}\n"
        ));
    }
    let reading = &s["reading"];
    match text_of(&reading["kind"]) {
        Some("engine") => render_engine(out, reading, text_of(&s["lastError"])),
        Some("broker") => render_broker(out, reading),
        Some("gpu") => render_gpus(out, reading),
        Some("query") => render_query(out, reading),
        _ => {}
    }
}

/// The pods of the last good reading; a pod the last error names (a
/// target's URL ends in its path, so a port is never a prefix of another)
/// is marked failing.
fn render_engine(out: &mut String, r: &Value, last_error: Option<&str>) {
    let pods = r["pods"].as_array().map_or(&[][..], Vec::as_slice);
    out.push_str(&format!(
        "      {} pods ({}) in the last good reading\n",
        pods.len(),
        text_of(&r["engine"]).unwrap_or("engine")
    ));
    for pod in pods {
        let mut fields = vec![format!(
            "W={}",
            num_of(&pod["waiting"]).unwrap_or_else(|| "?".to_owned())
        )];
        if let Some(running) = num_of(&pod["running"]) {
            fields.push(format!("R={running}"));
        }
        if let Some(kv) = num_of(&pod["kvCacheUsage"]) {
            fields.push(format!("kv={kv}"));
        }
        let target = text_of(&pod["target"]).unwrap_or("?");
        let failing = match last_error {
            Some(error) if !target.is_empty() && error.contains(target) => {
                "  ← failing (see last error)"
            }
            _ => "",
        };
        out.push_str(&format!(
            "        {target}  {}{failing}\n",
            fields.join(" ")
        ));
    }
    if let Some(empty) = r["emptyDiscovery"].as_array().filter(|e| !e.is_empty()) {
        let names: Vec<&str> = empty.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!(
            "      no addresses (pods behind it not counted): {}\n",
            names.join(", ")
        ));
    }
    if let Some(malformed) = r["malformedLines"].as_u64().filter(|m| *m > 0) {
        out.push_str(&format!("      malformed lines skipped: {malformed}\n"));
    }
}

fn render_broker(out: &mut String, r: &Value) {
    let mut text = format!(
        "      Q = {} messages",
        num_of(&r["messages"]).unwrap_or_else(|| "?".to_owned())
    );
    if let Some(partitions) = r["partitions"].as_u64() {
        text.push_str(&format!(" (capped at T × {partitions} partitions)"));
    }
    out.push_str(&text);
    out.push('\n');
    if let Some(breakdown) = r["breakdown"].as_object().filter(|b| !b.is_empty()) {
        let parts: Vec<String> = breakdown
            .iter()
            .map(|(k, v)| format!("{k}={}", num_of(v).unwrap_or_else(|| v.to_string())))
            .collect();
        out.push_str(&format!("      breakdown: {}\n", parts.join(" ")));
    }
}

fn render_gpus(out: &mut String, r: &Value) {
    let gpus = r["gpus"].as_array().map_or(&[][..], Vec::as_slice);
    out.push_str(&format!("      {} GPUs\n", gpus.len()));
    for gpu in gpus {
        out.push_str(&format!(
            "        GPU {} pod {}  U={} %\n",
            text_of(&gpu["gpu"]).unwrap_or("?"),
            text_of(&gpu["pod"]).unwrap_or("?"),
            num_of(&gpu["utilization"]).unwrap_or_else(|| "?".to_owned())
        ));
    }
}

fn render_query(out: &mut String, r: &Value) {
    let series = r["series"].as_array().map_or(&[][..], Vec::as_slice);
    out.push_str(&format!(
        "      query {}: {} series\n",
        text_of(&r["query"]).unwrap_or("?"),
        series.len()
    ));
    for s in series {
        let value = match &s["value"] {
            Value::String(v) => v.clone(),
            v => num_of(v).unwrap_or_else(|| v.to_string()),
        };
        out.push_str(&format!(
            "        {} = {value}\n",
            text_of(&s["labels"]).unwrap_or("{}")
        ));
    }
}

#[cfg(test)]
mod tests;
