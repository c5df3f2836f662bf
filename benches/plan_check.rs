//! Load + validate time of generated plans (random DAGs, seeded): 1k, 10k, 50k steps;
//! and of matrix plans that expand to 1k, 10k and 20k cells (three steps per cell:
//! prefill, a paired handoff, a compare narrowed to one axis, and one fan-in step).
//! Run with `cargo bench --bench plan_check`. Prints figures; asserts nothing.

use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Step i needs up to three earlier steps; most commands read a direct need's output,
/// one in ten a need-of-a-need (exercising the transitive upstream check).
fn generate(steps: usize, seed: u64) -> String {
    let mut rng = Rng(seed | 1);
    let mut needs: Vec<Vec<usize>> = Vec::with_capacity(steps);
    let mut s = String::from(
        "schema = \"orchestrate/plan/v1\"\nname = \"bench\"\n[params]\nn = 3\n[limits]\nhost_memory = \"1GiB\"\ntimeout = \"1m\"\n",
    );
    for i in 0..steps {
        let mut mine: Vec<usize> = Vec::new();
        if i > 0 {
            for _ in 0..1 + rng.below(3) {
                let j = rng.below(i);
                if !mine.contains(&j) {
                    mine.push(j);
                }
            }
        }
        let _ = writeln!(s, "[steps.s{i:06}]");
        if !mine.is_empty() {
            let list: Vec<String> = mine.iter().map(|j| format!("\"s{j:06}\"")).collect();
            let _ = writeln!(s, "needs = [{}]", list.join(", "));
            let first = mine[0];
            let target = match needs[first].first() {
                Some(&g) if rng.below(10) == 0 => g,
                _ => first,
            };
            let _ = writeln!(
                s,
                "run = [\"tool\", \"--in\", \"${{steps.s{target:06}.out}}/x\", \"--n\", \"${{params.n}}\", \"--out\", \"${{out}}\"]"
            );
        } else {
            let _ = writeln!(s, "shell = \"echo start > ${{out}}/x\"");
        }
        let _ = writeln!(s, "repeats = {}", 1 + rng.below(3));
        needs.push(mine);
    }
    s
}

/// A sweep over `a` (100 values) and `b` (`cells / 100` values).
fn generate_matrix(cells: usize) -> String {
    let b: Vec<String> = (0..cells / 100).map(|i| i.to_string()).collect();
    format!(
        r#"schema = "orchestrate/plan/v1"
name = "bench-matrix"
[matrix]
a = [{a}]
b = [{b}]
[steps.compile]
shell = "true"
[steps.prefill]
needs = ["compile"]
run = ["tool", "--a", "${{matrix.a}}", "--b", "${{matrix.b}}", "--model", "${{steps.compile.out}}", "--out", "${{out}}"]
[steps.handoff]
needs = ["prefill"]
run = ["tool", "--kv", "${{steps.prefill.out}}/kv", "--out", "${{out}}"]
[steps.compare]
kind = "compare"
needs = ["handoff"]
matrix = ["a"]
checks = [{{ name = "first b", metric = "finite", actual = "${{steps.handoff[b=0].out}}/kv" }}]
[steps.summary]
needs = ["compare"]
matrix = []
shell = "true"
"#,
        a = (0..100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        b = b.join(", "),
    )
}

fn main() {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("plan_check: load + validate, best of 3 ({profile})");
    let mut per_1k = Vec::new();
    for steps in [1_000usize, 10_000, 50_000] {
        let src = generate(steps, 42 + steps as u64);
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            let plan = orchestrate::plan::load_str(&src, Path::new("bench.toml"), &|_| None);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            match plan {
                Ok(p) => assert_eq!(p.steps.len(), steps),
                Err(e) => panic!("generated plan refused:\n{e}"),
            }
            best = best.min(ms);
        }
        let k = best / (steps as f64 / 1000.0);
        per_1k.push(k);
        println!(
            "{steps:>6} steps ({:>5} KiB): {best:>8.1} ms  ({k:.2} ms per 1k steps)",
            src.len() / 1024
        );
    }
    if let (Some(first), Some(last)) = (per_1k.first(), per_1k.last()) {
        println!(
            "growth: ms per 1k steps at 50k / at 1k = {:.2}",
            last / first
        );
    }
    println!("plan_check: matrix plans, load + expand + validate, best of 3 ({profile})");
    let mut per_1k = Vec::new();
    for cells in [1_000usize, 10_000, 20_000] {
        let src = generate_matrix(cells);
        let mut best = f64::INFINITY;
        let mut steps = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let plan = orchestrate::plan::load_str(&src, Path::new("bench.toml"), &|_| None);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            match plan {
                Ok(p) => {
                    assert_eq!(p.matrix.cells.len(), cells);
                    steps = p.steps.len();
                }
                Err(e) => panic!("generated plan refused:\n{e}"),
            }
            best = best.min(ms);
        }
        let k = best / (cells as f64 / 1000.0);
        per_1k.push(k);
        println!("{cells:>6} cells ({steps:>6} steps): {best:>8.1} ms  ({k:.2} ms per 1k cells)");
    }
    if let (Some(first), Some(last)) = (per_1k.first(), per_1k.last()) {
        println!(
            "growth: ms per 1k cells at 20k / at 1k = {:.2}",
            last / first
        );
    }
}
