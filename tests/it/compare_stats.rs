//! The timing comparison's Mann–Whitney U test against scipy's `mannwhitneyu` (its
//! defaults: two-sided, `method="auto"`, continuity correction) on the same samples:
//! small samples without ties (exact), with ties and large ones (asymptotic).

use std::process::Command;

use orchestrate::compare::stats::mann_whitney;

use crate::support::{skip_or_fail, Need};

fn samples() -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut state: u64 = 7;
    let mut rnd = |scale: f64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 10_000) as f64 / 10_000.0 * scale
    };
    let mut out = vec![
        (
            vec![10.0, 10.4, 10.2, 10.1, 10.3],
            vec![20.0, 20.4, 20.2, 20.1, 20.3],
        ),
        (vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0, 7.0]),
        (vec![1.0, 2.0, 2.0, 3.0], vec![2.0, 3.0, 3.0, 4.0, 5.0]),
        (vec![5.0; 6], vec![5.0; 6]),
        (
            vec![3.1, 2.2, 5.6, 1.0, 4.4, 2.9, 3.3, 8.1],
            vec![2.5, 6.6, 7.1, 3.0, 9.9, 4.2, 5.5, 6.0],
        ),
    ];
    for (n1, n2) in [(9, 12), (30, 25), (50, 50), (7, 20)] {
        let a: Vec<f64> = (0..n1).map(|_| 100.0 + rnd(10.0)).collect();
        let b: Vec<f64> = (0..n2).map(|_| 101.0 + rnd(10.0)).collect();
        out.push((a, b));
    }
    // Rounded to whole milliseconds: many ties.
    let a: Vec<f64> = (0..40).map(|_| (100.0 + rnd(5.0)).round()).collect();
    let b: Vec<f64> = (0..40).map(|_| (101.0 + rnd(5.0)).round()).collect();
    out.push((a, b));
    out
}

#[test]
fn mann_whitney_matches_scipy() {
    let has_scipy = Command::new("python3")
        .args(["-c", "import scipy.stats"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_scipy {
        return skip_or_fail(Need::PyTools, "scipy is not installed");
    }
    let cases = samples();
    let json = serde_json::to_string(&cases).unwrap();
    let script = "import json, sys\nfrom scipy.stats import mannwhitneyu\nfor x, y in json.load(sys.stdin):\n    r = mannwhitneyu(x, y)\n    print(repr(float(r.statistic)), repr(float(r.pvalue)))\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for ((x, y), line) in cases.iter().zip(text.lines()) {
        let mut parts = line.split(' ');
        let u: f64 = parts.next().unwrap().parse().unwrap();
        let p: f64 = parts.next().unwrap().parse().unwrap();
        let (mu, mp) = mann_whitney(x, y).unwrap();
        assert_eq!(mu, u, "U for {x:?} vs {y:?}");
        assert!(
            (mp - p).abs() <= 1e-9 + 1e-7 * p,
            "p for {x:?} vs {y:?}: ours {mp}, scipy {p}"
        );
    }
    assert_eq!(text.lines().count(), cases.len());
}
