//! Random mutations of valid plans, bytes and TOML structure alike: the loader must
//! return (no panic, no hang) and every error must point inside the file.
//! Seeded, so a failure reproduces; the seed and the input are printed on failure.

use std::path::Path;

use orchestrate::plan::{load_bytes, PlanErrors};

const SMOKE: &str = include_str!("../../plans/smoke.toml");

const RICH: &str = r#"schema = "orchestrate/plan/v1"
name = "rich"
description = "every section"
allow_simulated = true
secret_env = ["HF_TOKEN"]

[params]
tokens = 8192
scale = 0.5
fast = true
tag = "t"

[pins.git.implementation]
path = "${plan_dir}"
commit = "720e8dc"
[pins.model.koni]
id = "ORG/NAME"
revision = "0172bf7e"
path = "${env.HF_HOME:-/hf}/hub/x"
[pins.tools.sdk]
command = ["furiosa-smi", "--version"]
expect = "2026.4"
timeout = "10s"
[pins.python.venv]
python = "python3"
packages = ["numpy==2.1.3"]
[pins.files]
"uv.lock" = ""

[limits]
host_memory = "128GiB"
swap = false
pids = 4096
cpus = "0-3"
timeout = "2h"
run_timeout = "1h30m"
grace = "5s"
isolation = "cgroup"

[devices]
rngd = { kind = "rngd", count = 1, cores = 4 }
gpu = { kind = "gpu", ids = ["0"], simulate = true }

[steps.compile]
kind = "compile"
run = ["kvsim", "compile", "--out", "${work}/model"]
outputs = ["${work}/model"]
memory = "200GiB"

[steps.prefill]
kind = "prefill"
needs = ["compile"]
devices = ["rngd"]
repeats = 3
warmup = 1
env = { RUST_LOG = "info", T = "${params.tokens}" }
run = ["kvsim", "prefill", "--tokens", "${params.tokens}", "--out", "${out}"]

[steps.handoff-gpu]
kind = "handoff"
needs = ["prefill"]
devices = ["gpu"]
cwd = "${work}"
run = ["kvsim", "decode", "--kv", "${steps.prefill.out}/kv.safetensors", "--out", "${out}"]

[steps.compare]
kind = "compare"
needs = ["prefill", "handoff-gpu"]
checks = [
  { name = "kv repeats", metric = "bit_exact", across = "prefill", file = "kv.safetensors" },
  { name = "K rms", metric = "rel_rms", actual = "${steps.handoff-gpu.out}/kv.safetensors:k", expected = "${steps.prefill.out}/kv.safetensors:k", max = 0.05 },
  { name = "slots", metric = "slots_exact", actual = "${steps.handoff-gpu.out}/s.npy", expected = "${steps.prefill.out}/s.npy", axis = 1 },
  { name = "shape", metric = "shape", actual = "${steps.prefill.out}/l.npy", shape = [1, 8192], dtype = "f32", equals = [1, 2] },
]

[report]
templates = ["pr", "html"]
"#;

const JUNK_VALUES: &[&str] = &[
    "3",
    "-1",
    "0",
    "\"x\"",
    "true",
    "nan",
    "inf",
    "1.5",
    "[1, \"a\"]",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "\"${wrok}\"",
    "\"${steps.zz.out}\"",
    "\"${env.NOPE}\"",
    "\"$${\"",
    "\"${\"",
    "\"${params.\"",
    "\"128 GB\"",
    "\"10 mins\"",
    "\"128GiBs\"",
    "[]",
    "\"\"",
    "\"${steps.compare.out}\"",
    "[\"prepare\", \"prepare\"]",
    "\"ü${out}é\"",
    "99999999999999999999",
    "0x7fffffffffffffff",
    "\"1.9999999999999999999999999999999TiB\"",
    "'''\nmulti\n'''",
];

const JUNK_LINES: &[&str] = &[
    "repeat = 3",
    "cache = true",
    "needs = [\"join\"]",
    "needs = [\"right\", \"verify\"]",
    "[steps.x]",
    "[steps]",
    "[[steps.a]]",
    "kind = \"compare\"",
    "shell = \"${out\"",
    "checks = [{ name = \"n\", metric = \"finite\" }]",
    "devices = [\"tpu\"]",
    "[steps.\"bad id\"]",
    "\u{0}",
    "= 3",
    "[",
    "a.b.c.d = 1",
    "steps = 3",
    "[limits]\nbogus = 1",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, base: &str) -> Vec<u8> {
    let mut lines: Vec<String> = base.lines().map(String::from).collect();
    let rounds = 1 + rng.below(4);
    let mut bytes_mode = false;
    for _ in 0..rounds {
        let n = lines.len().max(1);
        match rng.below(9) {
            0 => {
                if !lines.is_empty() {
                    lines.remove(rng.below(n));
                }
            }
            1 => {
                let i = rng.below(n).min(lines.len().saturating_sub(1));
                if let Some(l) = lines.get(i).cloned() {
                    lines.insert(i, l);
                }
            }
            2 => {
                if lines.len() > 1 {
                    let (a, b) = (rng.below(n), rng.below(n));
                    lines.swap(a, b);
                }
            }
            3 | 4 => {
                let i = rng.below(n);
                if let Some(l) = lines.get_mut(i) {
                    if let Some(eq) = l.find(" = ") {
                        let v = JUNK_VALUES[rng.below(JUNK_VALUES.len())];
                        *l = format!("{}{}", &l[..eq + 3], v);
                    }
                }
            }
            5 | 6 => {
                let i = rng.below(n + 1).min(lines.len());
                lines.insert(i, JUNK_LINES[rng.below(JUNK_LINES.len())].to_string());
            }
            7 => {
                // Inject a `${...}` fragment into some string.
                let i = rng.below(n);
                if let Some(l) = lines.get_mut(i) {
                    if let Some(q) = l.find('"') {
                        let junk = [
                            "${",
                            "${}",
                            "${ params.x }",
                            "$$",
                            "${steps..out}",
                            "${env.:-x}",
                            "${env.A B}",
                            "${steps.left.outx}",
                        ];
                        l.insert_str(q + 1, junk[rng.below(junk.len())]);
                    }
                }
            }
            _ => bytes_mode = true,
        }
    }
    let mut bytes = lines.join("\n").into_bytes();
    if bytes_mode {
        for _ in 0..1 + rng.below(6) {
            let len = bytes.len();
            match rng.below(4) {
                0 if len > 0 => {
                    let i = rng.below(len);
                    bytes[i] = rng.next() as u8;
                }
                1 => {
                    let i = rng.below(len + 1);
                    bytes.insert(i, rng.next() as u8);
                }
                2 if len > 0 => {
                    let i = rng.below(len);
                    let j = (i + rng.below(16)).min(len);
                    bytes.drain(i..j);
                }
                _ => bytes.truncate(rng.below(len + 1)),
            }
        }
    }
    bytes
}

/// Returns whether the input was refused.
fn check(bytes: &[u8], seed: u64) -> bool {
    let env = |k: &str| (k == "HF_HOME").then(|| "/hf".to_string());
    let result = std::panic::catch_unwind(|| load_bytes(bytes, Path::new("fuzz.toml"), &env));
    let shown = String::from_utf8_lossy(bytes);
    let result = match result {
        Ok(r) => r,
        Err(_) => panic!("panic for seed {seed} on input:\n{shown}"),
    };
    let Err(errors) = result else { return false };
    assert_located(&errors, bytes, seed, &shown);
    true
}

fn assert_located(errors: &PlanErrors, bytes: &[u8], seed: u64, shown: &str) {
    let diags = errors.diagnostics();
    assert!(
        !diags.is_empty(),
        "seed {seed}: an error value with no diagnostics:\n{shown}"
    );
    let lines = bytes.split(|&b| b == b'\n').count();
    for d in diags {
        let line_len = bytes
            .split(|&b| b == b'\n')
            .nth(d.line.saturating_sub(1))
            .map_or(0, |l| l.len());
        assert!(
            d.line >= 1 && d.line <= lines && d.column >= 1 && d.column <= line_len + 1,
            "seed {seed}: {d:?} outside the file ({lines} lines):\n{shown}"
        );
        assert!(
            d.span.end <= bytes.len() && d.span.start <= d.span.end,
            "seed {seed}: {d:?}"
        );
        assert!(
            !d.message.is_empty() && !d.help.is_empty(),
            "seed {seed}: {d:?}"
        );
    }
    let text = errors.to_string();
    assert!(text.contains("fuzz.toml:"), "seed {seed}: {text}");
}

#[test]
fn the_bases_are_valid() {
    for base in [SMOKE, RICH] {
        if let Err(e) = load_bytes(base.as_bytes(), Path::new("fuzz.toml"), &|_| None) {
            panic!("{e}");
        }
    }
}

#[test]
fn mutated_plans_never_panic_and_errors_are_located() {
    let cases: u64 = std::env::var("PLAN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000);
    let mut refused = 0;
    for seed in 1..=cases {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let base = if seed % 2 == 0 { SMOKE } else { RICH };
        let bytes = mutate(&mut rng, base);
        refused += u64::from(check(&bytes, seed));
    }
    // The mutations must mostly break plans, or this test proves little.
    assert!(
        refused * 2 > cases,
        "only {refused} of {cases} mutated plans were refused"
    );
}

#[test]
fn deep_nesting_and_odd_inputs_are_errors_not_crashes() {
    let deep_array = format!("a = {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_table = format!("a = {}1{}", "{ b = ".repeat(50_000), " }".repeat(50_000));
    let deep_keys = format!("{} = 1", vec!["k"; 10_000].join("."));
    let inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\xff\xfe\x00".to_vec(),
        deep_array.into_bytes(),
        deep_table.into_bytes(),
        deep_keys.into_bytes(),
        "[".repeat(10_000).into_bytes(),
        "\"".repeat(10_001).into_bytes(),
        "schema = \"orchestrate/plan/v1\"\r\nname = \"x\"\r\n[steps.a]\r\nshel = \"x\"\r\n".into(),
    ];
    for (i, bytes) in inputs.iter().enumerate() {
        assert!(check(bytes, 1_000_000 + i as u64), "input {i} was accepted");
    }
}
