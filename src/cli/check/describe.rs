//! `check`'s lines for one source's reading: each pod, GPU, backlog or series it read, the
//! `dns+` names that answered no addresses, and the malformed lines skipped.

use std::fmt::Write as _;

use crate::source::Reading;

/// Write `reading` to `out`, one indented line per thing read.
pub(super) fn describe(out: &mut String, reading: &Reading) {
    match reading {
        Reading::Engine(reading) => {
            for pod in &reading.pods {
                let _ = write!(out, "    {}  waiting={}", pod.target, pod.waiting);
                if let Some(r) = pod.running {
                    let _ = write!(out, " running={r}");
                }
                if let Some(kv) = pod.kv_cache_usage {
                    let _ = write!(out, " kvCache={kv}");
                }
                if let Some(ttft) = &pod.ttft {
                    let _ = write!(out, " ttftObservations={}", ttft.total());
                }
                let _ = writeln!(out);
            }
        }
        Reading::Gpu(reading) => {
            for gpu in &reading.gpus {
                let _ = writeln!(
                    out,
                    "    {} {} pod={} util={}%",
                    gpu.target, gpu.gpu, gpu.pod, gpu.utilization
                );
            }
            if reading.gpus.is_empty() {
                let _ = writeln!(out, "    no GPU matched the pod selector");
            }
        }
        Reading::Broker(reading) => {
            let _ = write!(out, "    backlog {} messages", reading.messages);
            for (part, value) in &reading.breakdown {
                let _ = write!(out, " {part}={value}");
            }
            if let Some(p) = reading.partitions {
                let _ = write!(out, " partitions={p}");
            }
            let _ = writeln!(out);
        }
        Reading::Query(reading) => {
            for series in &reading.series {
                let _ = writeln!(out, "    {} {}", series.labels, series.value);
            }
            if reading.series.is_empty() {
                let _ = writeln!(out, "    (no series)");
            }
        }
    }
    let empty = match reading {
        Reading::Engine(reading) => reading.empty_discovery.as_slice(),
        Reading::Gpu(reading) => reading.empty_discovery.as_slice(),
        Reading::Broker(_) | Reading::Query(_) => &[],
    };
    for name in empty {
        let _ = writeln!(out, "    {name}  no addresses (NXDOMAIN or no records)");
    }
    if reading.malformed_lines() > 0 {
        let _ = writeln!(
            out,
            "    warning: {} malformed line(s) skipped",
            reading.malformed_lines()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Engine, EngineReading};

    /// A `dns+` name with no addresses is shown under its source: `check` said `ok` and then
    /// `UNAVAILABLE` (or a smaller value) without saying which name was empty.
    #[test]
    fn a_name_with_no_addresses_is_shown() {
        let reading = Reading::Engine(EngineReading {
            engine: Engine::Vllm,
            pods: Vec::new(),
            malformed_lines: 2,
            empty_discovery: vec!["dns+http://vllm-b.ml:8000/metrics".to_owned()],
        });
        let mut out = String::new();
        describe(&mut out, &reading);
        assert_eq!(
            out,
            "    dns+http://vllm-b.ml:8000/metrics  no addresses (NXDOMAIN or no records)\n    warning: 2 malformed line(s) skipped\n"
        );
    }
}
