use super::rules::glob;
use super::*;

fn policy(entries: &[&str]) -> OutboundPolicy {
    let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
    OutboundPolicy::new(Some(&entries), false).expect("valid")
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("ip")
}

#[test]
fn cidrs_parse_and_contain() {
    let net: Cidr = "10.0.0.0/8".parse().expect("cidr");
    assert!(net.contains(ip("10.255.0.1")));
    assert!(!net.contains(ip("11.0.0.1")));
    assert!(!net.contains(ip("::1")));
    let host: Cidr = "127.0.0.1".parse().expect("bare address");
    assert_eq!(host.to_string(), "127.0.0.1/32");
    let masked: Cidr = "10.1.2.3/8".parse().expect("host bits cleared");
    assert_eq!(masked.to_string(), "10.0.0.0/8");
    let v6: Cidr = "[fd00::]/8".parse().expect("bracketed v6");
    assert!(v6.contains(ip("fd12::1")));
    let all: Cidr = "0.0.0.0/0".parse().expect("everything");
    assert!(all.contains(ip("169.254.169.254")));
    for bad in [
        "10.0.0.0/33",
        "::/129",
        "10.0.0/8",
        "x/8",
        "::ffff:10.0.0.1/128",
    ] {
        assert!(bad.parse::<Cidr>().is_err(), "{bad}");
    }
}

#[test]
fn host_patterns_match_labels() {
    let p = HostPattern::parse("*.svc.cluster.local").expect("pattern");
    assert!(p.matches("vllm.inference.svc.cluster.local"));
    assert!(p.matches("a.svc.cluster.local."));
    assert!(p.matches("A.SVC.Cluster.Local"));
    assert!(!p.matches("svc.cluster.local"));
    assert!(!p.matches("svc.cluster.local.evil.example"));
    let p = HostPattern::parse("vllm-*.inference.svc").expect("pattern");
    assert!(p.matches("vllm-0.inference.svc"));
    assert!(p.matches("vllm-.inference.svc"));
    assert!(!p.matches("vllm-0.x.inference.svc"));
    assert!(!p.matches("other.inference.svc"));
    let p = HostPattern::parse("localhost").expect("pattern");
    assert!(p.matches("localhost"));
    assert!(!p.matches("localhost.evil.example"));
    assert!(HostPattern::parse("bad host").is_err());
    assert!(HostPattern::parse("a..b").is_err());
}

#[test]
fn globs() {
    assert!(glob("a*c", "abbbc"));
    assert!(glob("*", ""));
    assert!(glob("**x", "yx"));
    assert!(!glob("a*c", "abd"));
    assert!(glob("a*b*c", "aXbYbZc"));
}

#[test]
fn metadata_addresses_are_refused_by_default() {
    let open = OutboundPolicy::allow_all();
    for target in [
        "169.254.169.254",
        "[fd00:ec2::254]",
        "fe80::1",
        "0.0.0.0",
        "::",
        "::ffff:169.254.169.254",
    ] {
        let err = open.check_host(target).expect_err(target);
        assert!(err.rule.contains("refused by default"), "{err}");
    }
    let err = open.check_host("169.254.169.254").expect_err("metadata");
    assert_eq!(
        err.to_string(),
        "outbound connection to `169.254.169.254` refused: 169.254.0.0/16 (IPv4 link-local; 169.254.169.254 is the cloud metadata service) is refused by default; to allow it, set `outbound.allowLinkLocal: true` or add an `outbound.allow` CIDR inside 169.254.0.0/16"
    );
    open.check_host("10.0.0.7")
        .expect("private ok without allowlist");
    open.check_host("anything.example").expect("names ok");
    open.check_addr(ip("127.0.0.1")).expect("loopback ok");
}

#[test]
fn refusals_are_lifted_only_explicitly() {
    let lifted = OutboundPolicy::new(None, true).expect("valid");
    lifted
        .check_addr(ip("169.254.169.254"))
        .expect("allowLinkLocal");
    lifted
        .check_addr(ip("fd00:ec2::254"))
        .expect("allowLinkLocal");
    lifted
        .check_addr(ip("0.0.0.0"))
        .expect_err("not link-local");
    let p = policy(&["169.254.169.254/32", "0.0.0.0/0"]);
    p.check_addr(ip("169.254.169.254")).expect("explicit entry");
    let err = p
        .check_addr(ip("169.254.1.1"))
        .expect_err("broad CIDR does not lift");
    assert!(err.rule.contains("169.254.0.0/16"), "{err}");
    p.check_addr(ip("8.8.8.8")).expect("inside 0.0.0.0/0");
}

#[test]
fn allowlist_rules_for_names_literals_and_addresses() {
    let p = policy(&["*.svc.cluster.local", "10.0.0.0/8", "127.0.0.1/32"]);
    p.check_host("vllm.inference.svc.cluster.local")
        .expect("pattern");
    p.check_host("10.1.2.3").expect("in CIDR");
    p.check_host("127.0.0.1").expect("in CIDR");
    let err = p.check_host("evil.example").expect_err("no pattern");
    assert!(err.rule.contains("no host pattern"), "{err}");
    let err = p.check_host("192.168.0.1").expect_err("no CIDR");
    assert!(err.rule.contains("no CIDR"), "{err}");
    p.check_addr(ip("10.9.9.9")).expect("resolved inside");
    let err = p.check_addr(ip("::1")).expect_err("resolved outside");
    assert!(err.target.contains("::1"), "{err}");

    // Only host patterns: addresses of admitted names are not limited,
    // but an IP literal needs a CIDR.
    let hosts_only = policy(&["*.svc.cluster.local"]);
    hosts_only
        .check_addr(ip("192.168.1.1"))
        .expect("names decide");
    hosts_only
        .check_host("192.168.1.1")
        .expect_err("literal needs CIDR");
    hosts_only
        .check_addr(ip("169.254.169.254"))
        .expect_err("defaults still apply");

    // Only CIDRs: any name passes, its addresses decide.
    let nets_only = policy(&["10.0.0.0/8"]);
    nets_only
        .check_host("anything.example")
        .expect("names pass");
    nets_only
        .check_addr(ip("192.168.1.1"))
        .expect_err("outside");

    // Present but empty: nothing.
    let none = policy(&[]);
    let err = none.check_host("a.example").expect_err("empty list");
    assert!(err.rule.contains("empty"), "{err}");
    none.check_addr(ip("10.0.0.1")).expect_err("empty list");
    none.check_host("10.0.0.1").expect_err("empty list");
}

#[test]
fn resolved_addresses_are_filtered() {
    let p = policy(&["localhost", "127.0.0.1/32"]);
    let addrs: Vec<SocketAddr> = vec![
        "127.0.0.1:0".parse().expect("addr"),
        "[::1]:0".parse().expect("addr"),
    ];
    let kept = p
        .filter_resolved("localhost", addrs.clone())
        .expect("one left");
    assert_eq!(kept, vec![addrs[0]]);
    let p = policy(&["localhost", "10.0.0.0/8"]);
    let err = p
        .filter_resolved("localhost", addrs)
        .expect_err("none left");
    assert_eq!(err.target, "127.0.0.1 (resolved from localhost)");
}

#[test]
fn bad_entries_are_named() {
    let entries = vec!["10.0.0.0/8".to_owned(), "bad entry!".to_owned()];
    let err = OutboundPolicy::new(Some(&entries), false).expect_err("bad");
    assert!(err.contains("bad entry!"), "{err}");
    let entries = vec!["10.0.0.0/40".to_owned()];
    let err = OutboundPolicy::new(Some(&entries), false).expect_err("bad");
    assert!(err.contains("10.0.0.0/40"), "{err}");
}

#[tokio::test]
async fn resolve_checks_after_dns() {
    let p = policy(&["localhost", "10.0.0.0/8"]);
    let err = p
        .resolve("localhost", 80)
        .await
        .expect_err("loopback refused");
    assert!(matches!(err, ResolveError::Denied(_)), "{err}");
    let p = policy(&["localhost", "127.0.0.0/8", "::1/128"]);
    let addrs = p.resolve("localhost", 80).await.expect("allowed");
    assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
}
