//! The chart: one panel per policy, on shared scales, so the policies can
//! be compared at a glance. Each panel stacks three tracks over the same
//! time axis: replicas (all, ready, and the replicas the minute's arrivals
//! need at full batch), the queue (requests waiting), and the TTFT p95 of
//! each minute's arrivals against the SLO. Hand-written SVG 1.1, no script.

use std::fmt::Write as _;

use super::policies::PolicyKind;
use super::run::Trace;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TITLE_H: f64 = 22.0;
const REPLICAS_H: f64 = 110.0;
const QUEUE_H: f64 = 44.0;
const TTFT_H: f64 = 44.0;
const GAP: f64 = 8.0;
const AXIS_H: f64 = 20.0;
const PANEL_H: f64 = TITLE_H + REPLICAS_H + GAP + QUEUE_H + GAP + TTFT_H + AXIS_H + 12.0;
const HEADER_H: f64 = 56.0;

const REPLICAS_COLOR: &str = "#1f5fbf";
const READY_COLOR: &str = "#2e9e4f";
const NEEDED_COLOR: &str = "#888888";
const QUEUE_COLOR: &str = "#e08a1e";
const TTFT_COLOR: &str = "#7b3fb5";
const SLO_COLOR: &str = "#d03030";

/// A round number ≥ `v` for an axis maximum.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= v {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

struct Frame {
    x0: f64,
    width: f64,
    duration: f64,
}

impl Frame {
    fn x(&self, t: f64) -> f64 {
        self.x0 + self.width * (t / self.duration).clamp(0.0, 1.0)
    }
}

/// A track: a y range on the page and the value range it shows.
struct Track {
    top: f64,
    height: f64,
    max: f64,
}

impl Track {
    fn y(&self, v: f64) -> f64 {
        self.top + self.height * (1.0 - (v / self.max).clamp(0.0, 1.0))
    }
}

fn step_path(frame: &Frame, track: &Track, points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    let mut previous: Option<f64> = None;
    for &(t, v) in points {
        let (x, y) = (frame.x(t), track.y(v));
        match previous {
            None => {
                let _ = write!(d, "M{:.1},{y:.1}", frame.x(0.0));
                let _ = write!(d, "H{x:.1}");
            }
            Some(py) if (py - y).abs() > 1e-9 => {
                let _ = write!(d, "H{x:.1}V{y:.1}");
            }
            Some(_) => {}
        }
        previous = Some(y);
    }
    if previous.is_some() {
        let _ = write!(d, "H{:.1}", frame.x(frame.duration));
    }
    d
}

fn line_path(frame: &Frame, track: &Track, points: &[(f64, Option<f64>)]) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for &(t, v) in points {
        match v {
            Some(v) => {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if pen_down { "L" } else { "M" },
                    frame.x(t),
                    track.y(v)
                );
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    d
}

fn axis_label(out: &mut String, x: f64, y: f64, text: &str, anchor: &str) {
    let _ = writeln!(
        out,
        r##"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="10" fill="#555">{text}</text>"##
    );
}

fn track_frame(out: &mut String, frame: &Frame, track: &Track, label: &str, max_label: &str) {
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#fafafa" stroke="#ddd"/>"##,
        frame.x0, track.top, frame.width, track.height
    );
    axis_label(out, frame.x0 - 6.0, track.top + 9.0, max_label, "end");
    axis_label(out, frame.x0 - 6.0, track.top + track.height, "0", "end");
    axis_label(
        out,
        frame.x0 - 6.0,
        track.top + track.height / 2.0 + 3.0,
        label,
        "end",
    );
}

/// The chart of `traces` (one per policy) for `scenario`.
pub fn render(
    scenario: &str,
    seed: u64,
    duration_seconds: f64,
    slo_seconds: f64,
    traces: &[(PolicyKind, Trace)],
) -> String {
    let frame = Frame {
        x0: LEFT,
        width: WIDTH - LEFT - RIGHT,
        duration: duration_seconds.max(1.0),
    };
    let replicas_max = nice_ceiling(
        traces
            .iter()
            .flat_map(|(_, tr)| {
                tr.series
                    .iter()
                    .map(|p| p.replicas as f64)
                    .chain(tr.minutes.iter().map(|m| m.needed_replicas))
            })
            .fold(1.0, f64::max),
    );
    let queue_max = nice_ceiling(
        traces
            .iter()
            .flat_map(|(_, tr)| tr.series.iter().map(|p| p.waiting as f64))
            .fold(10.0, f64::max),
    );
    let ttft_max = 4.0 * slo_seconds;
    let height = HEADER_H + PANEL_H * traces.len() as f64;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">backlog-scaler simulate: scenario {scenario}, seed {seed}</text>"#
    );
    let legend = [
        (REPLICAS_COLOR, "replicas (incl. warming)", ""),
        (READY_COLOR, "ready", ""),
        (NEEDED_COLOR, "needed at full batch (λ/μ)", "4,3"),
        (QUEUE_COLOR, "requests waiting", ""),
        (TTFT_COLOR, "TTFT p95 per minute", ""),
        (SLO_COLOR, "SLO", "2,2"),
    ];
    let mut x = LEFT;
    for (color, text, dash) in legend {
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="38" x2="{:.1}" y2="38" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            x + 18.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="42" font-size="11">{text}</text>"#,
            x + 22.0
        );
        x += 28.0 + 6.2 * text.chars().count() as f64;
    }

    for (i, (policy, trace)) in traces.iter().enumerate() {
        let top = HEADER_H + PANEL_H * i as f64;
        let _ = writeln!(
            out,
            r#"<text x="{LEFT}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
            top + 15.0,
            policy.name()
        );
        let replicas = Track {
            top: top + TITLE_H,
            height: REPLICAS_H,
            max: replicas_max,
        };
        let queue = Track {
            top: replicas.top + REPLICAS_H + GAP,
            height: QUEUE_H,
            max: queue_max,
        };
        let ttft = Track {
            top: queue.top + QUEUE_H + GAP,
            height: TTFT_H,
            max: ttft_max,
        };
        track_frame(
            &mut out,
            &frame,
            &replicas,
            "replicas",
            &format!("{replicas_max}"),
        );
        track_frame(&mut out, &frame, &queue, "waiting", &format!("{queue_max}"));
        track_frame(&mut out, &frame, &ttft, "TTFT s", &format!("≥{ttft_max}"));

        let needed: Vec<(f64, f64)> = trace
            .minutes
            .iter()
            .enumerate()
            .map(|(m, s)| (60.0 * m as f64, s.needed_replicas))
            .collect();
        let all: Vec<(f64, f64)> = trace
            .series
            .iter()
            .map(|p| (p.t, p.replicas as f64))
            .collect();
        let ready: Vec<(f64, f64)> = trace.series.iter().map(|p| (p.t, p.ready as f64)).collect();
        let _ = writeln!(
            out,
            r#"<path d="{}" fill="none" stroke="{NEEDED_COLOR}" stroke-width="1.5" stroke-dasharray="4,3"/>"#,
            step_path(&frame, &replicas, &needed)
        );
        let _ = writeln!(
            out,
            r#"<path d="{}" fill="none" stroke="{READY_COLOR}" stroke-width="1.5"/>"#,
            step_path(&frame, &replicas, &ready)
        );
        let _ = writeln!(
            out,
            r#"<path d="{}" fill="none" stroke="{REPLICAS_COLOR}" stroke-width="2"/>"#,
            step_path(&frame, &replicas, &all)
        );

        let waiting: Vec<(f64, Option<f64>)> = trace
            .series
            .iter()
            .map(|p| (p.t, Some(p.waiting as f64)))
            .collect();
        let mut area = line_path(&frame, &queue, &waiting);
        if let (Some(first), Some(last)) = (trace.series.first(), trace.series.last()) {
            let base = queue.y(0.0);
            let _ = write!(
                area,
                "L{:.1},{base:.1}L{:.1},{base:.1}Z",
                frame.x(last.t),
                frame.x(first.t)
            );
        }
        let _ = writeln!(
            out,
            r#"<path d="{area}" fill="{QUEUE_COLOR}" fill-opacity="0.35" stroke="{QUEUE_COLOR}" stroke-width="1"/>"#
        );

        let slo_y = ttft.y(slo_seconds);
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{slo_y:.1}" x2="{:.1}" y2="{slo_y:.1}" stroke="{SLO_COLOR}" stroke-width="1" stroke-dasharray="2,2"/>"#,
            frame.x(0.0),
            frame.x(frame.duration)
        );
        let p95: Vec<(f64, Option<f64>)> = trace
            .minutes
            .iter()
            .enumerate()
            .map(|(m, s)| (60.0 * m as f64 + 30.0, s.ttft_p95))
            .collect();
        let _ = writeln!(
            out,
            r#"<path d="{}" fill="none" stroke="{TTFT_COLOR}" stroke-width="1.5"/>"#,
            line_path(&frame, &ttft, &p95)
        );

        let axis_y = ttft.top + TTFT_H + 13.0;
        let minutes = frame.duration / 60.0;
        let tick = [5.0, 10.0, 15.0, 30.0, 60.0, 120.0]
            .into_iter()
            .find(|step| minutes / step <= 12.0)
            .unwrap_or(240.0);
        let mut m = 0.0;
        while m <= minutes + 1e-9 {
            axis_label(
                &mut out,
                frame.x(m * 60.0),
                axis_y,
                &format!("{m:.0}"),
                "middle",
            );
            m += tick;
        }
        axis_label(&mut out, frame.x0 - 6.0, axis_y, "min", "end");
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::run::{MinuteStats, SeriesPoint};

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(17.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(nice_ceiling(101.0), 200.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }

    #[test]
    fn renders_one_panel_per_policy() {
        let trace = Trace {
            series: (1..=24)
                .map(|i| SeriesPoint {
                    t: f64::from(i) * 5.0,
                    replicas: 2 + i as usize / 8,
                    ready: 2,
                    waiting: i as usize,
                    running: 10,
                    drain_rate: None,
                })
                .collect(),
            minutes: vec![
                MinuteStats {
                    arrivals: 120,
                    needed_replicas: 1.0,
                    ttft_p95: Some(0.4),
                },
                MinuteStats {
                    arrivals: 240,
                    needed_replicas: 2.0,
                    ttft_p95: None,
                },
            ],
            scaler_calls: Vec::new(),
        };
        let svg = render(
            "step",
            0,
            120.0,
            2.0,
            &[
                (PolicyKind::Backlog, trace.clone()),
                (PolicyKind::Seed, trace),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">backlog</text>") && svg.contains(">seed</text>"));
        assert_eq!(svg.matches("<path").count(), 2 * 5);
    }
}
