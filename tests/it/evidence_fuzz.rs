//! Mutated record folders through everything that reads one: `verify`, `report` (every
//! built-in template), `diff`, and `recover`'s rebuild of the record from the
//! journal. No panic, no hang beyond a bound, and nothing read outside the folder:
//! the mutations point links at a FIFO outside it whose writer notices any open, and
//! at a file whose digest must never appear in what is printed.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use orchestrate::evidence::{render_report, verify_run, VerifyOptions};
use orchestrate::report::{diff, render, DiffFormat, RenderOptions, TemplateChoice};
use proptest::prelude::*;

/// One real record folder, made once, copied for every case.
fn base() -> &'static Path {
    static BASE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, dir) = BASE.get_or_init(|| {
        let t = tempfile::tempdir().unwrap();
        let dir = crate::support::run_smoke(t.path());
        (t, dir)
    });
    dir
}

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(files_of(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        file: usize,
        at: usize,
        bit: u8,
    },
    Truncate {
        file: usize,
        keep: usize,
    },
    Delete {
        file: usize,
    },
    LinkToSecret {
        file: usize,
    },
    LinkToFifo {
        file: usize,
    },
    LinkToZero {
        file: usize,
    },
    FolderOut,
    /// A string field of record.json replaced, the digest recomputed (a forgery).
    Forge {
        field: usize,
        value: usize,
    },
    /// A journal line repeated or its text replaced.
    Journal {
        line: usize,
        garbage: bool,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0..64usize, 0..4096usize, 0..8u8).prop_map(|(file, at, bit)| Mutation::Flip {
            file,
            at,
            bit
        }),
        (0..64usize, 0..256usize).prop_map(|(file, keep)| Mutation::Truncate { file, keep }),
        (0..64usize).prop_map(|file| Mutation::Delete { file }),
        (0..64usize).prop_map(|file| Mutation::LinkToSecret { file }),
        (0..64usize).prop_map(|file| Mutation::LinkToFifo { file }),
        (0..64usize).prop_map(|file| Mutation::LinkToZero { file }),
        Just(Mutation::FolderOut),
        (0..32usize, 0..6usize).prop_map(|(field, value)| Mutation::Forge { field, value }),
        (0..64usize, any::<bool>()).prop_map(|(line, garbage)| Mutation::Journal { line, garbage }),
    ]
}

/// What lies outside the folder: a secret file and a FIFO whose writer notices an
/// open (a blocking open for writing returns only once someone opens to read).
struct Outside {
    _dir: tempfile::TempDir,
    secret: PathBuf,
    secret_sha: String,
    fifo: PathBuf,
    opened: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Outside {
    fn new() -> Outside {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("shadow");
        let body = b"root:$6$fuzz-secret$:19000:0:99999:7:::\n";
        std::fs::write(&secret, body).unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let opened = Arc::new(AtomicBool::new(false));
        let writer = {
            let (fifo, opened) = (fifo.clone(), opened.clone());
            std::thread::spawn(move || {
                if std::fs::OpenOptions::new().write(true).open(&fifo).is_ok() {
                    opened.store(true, Ordering::SeqCst);
                }
            })
        };
        Outside {
            secret_sha: orchestrate::digest::sha256_bytes(body).hex(),
            secret,
            fifo,
            opened,
            writer: Some(writer),
            _dir: d,
        }
    }

    /// Whether anything opened the FIFO (then lets the writer go).
    fn fifo_was_opened(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(20));
        let was = self.opened.load(Ordering::SeqCst);
        // Open the read side ourselves so the writer's open returns.
        let _r = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        was
    }
}

/// Write a file of the folder, replacing a link an earlier mutation made rather than
/// writing through it (to the FIFO, which would block, or to the secret outside).
fn put(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
        let _ = std::fs::remove_file(path);
    }
    std::fs::write(path, bytes)
}

fn apply(dir: &Path, m: &Mutation, out: &Outside) {
    let files = files_of(dir);
    let pick = |i: usize| files[i % files.len()].clone();
    // Only rewrite plain files: writing through a link an earlier mutation made to
    // the FIFO would block the test itself (no reader), which is not what is tested.
    let plain = |f: &Path| std::fs::symlink_metadata(f).is_ok_and(|m| m.file_type().is_file());
    let relink = |target: &Path, i: usize| {
        let f = pick(i);
        let _ = std::fs::remove_file(&f);
        let _ = std::os::unix::fs::symlink(target, &f);
    };
    match m {
        Mutation::Flip { file, at, bit } => {
            let f = pick(*file);
            if !plain(&f) {
                return;
            }
            if let Ok(mut b) = std::fs::read(&f) {
                if !b.is_empty() {
                    let i = at % b.len();
                    b[i] ^= 1 << bit;
                    let _ = put(&f, b);
                }
            }
        }
        Mutation::Truncate { file, keep } => {
            let f = pick(*file);
            if !plain(&f) {
                return;
            }
            if let Ok(b) = std::fs::read(&f) {
                let _ = put(&f, &b[..(*keep).min(b.len())]);
            }
        }
        Mutation::Delete { file } => {
            let _ = std::fs::remove_file(pick(*file));
        }
        Mutation::LinkToSecret { file } => relink(&out.secret, *file),
        Mutation::LinkToFifo { file } => relink(&out.fifo, *file),
        Mutation::LinkToZero { file } => relink(Path::new("/dev/zero"), *file),
        Mutation::FolderOut => {
            let steps = dir.join("steps/left");
            let _ = std::fs::remove_dir_all(&steps);
            let _ = std::os::unix::fs::symlink(out.fifo.parent().unwrap(), &steps);
        }
        Mutation::Forge { field, value } => {
            if !plain(&dir.join("record.json")) {
                return;
            }
            let Ok(b) = std::fs::read(dir.join("record.json")) else {
                return;
            };
            let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&b) else {
                return;
            };
            let values = [
                out.secret.display().to_string(),
                out.fifo.display().to_string(),
                "../../../../etc/shadow".to_string(),
                "/".to_string(),
                "/dev/zero".to_string(),
                String::new(),
            ];
            let mut strings: Vec<&mut serde_json::Value> = Vec::new();
            fn collect<'a>(v: &'a mut serde_json::Value, out: &mut Vec<&'a mut serde_json::Value>) {
                match v {
                    serde_json::Value::String(_) => out.push(v),
                    serde_json::Value::Array(a) => a.iter_mut().for_each(|x| collect(x, out)),
                    serde_json::Value::Object(o) => o.values_mut().for_each(|x| collect(x, out)),
                    _ => {}
                }
            }
            collect(&mut v, &mut strings);
            if strings.is_empty() {
                return;
            }
            let n = strings.len();
            *strings[field * 7919 % n] = serde_json::Value::String(values[*value].clone());
            let bytes = orchestrate::evidence::jcs::to_canonical_vec(&v);
            let d = orchestrate::digest::sha256_bytes(&bytes).hex();
            let _ = put(&dir.join("record.json"), &bytes);
            let _ = put(&dir.join("record.sha256"), format!("{d}  record.json\n"));
        }
        Mutation::Journal { line, garbage } => {
            let p = dir.join("journal.jsonl");
            if !plain(&p) {
                return;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                return;
            };
            let mut lines: Vec<String> = text.lines().map(String::from).collect();
            if lines.is_empty() {
                return;
            }
            let i = line % lines.len();
            if *garbage {
                lines[i] = format!(
                    "{{\"seq\":1,\"event\":\"attempt_started\",\"logs\":\"{}\"",
                    out.secret.display()
                );
            } else {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            let _ = put(&p, lines.join("\n") + "\n");
        }
    }
}

/// Everything that reads a record folder, as text, within a bound.
fn read_all(dir: &Path) -> String {
    let dir = dir.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(|| {
            let mut out = String::new();
            let rep = verify_run(&dir, &VerifyOptions::default());
            out.push_str(&render_report(&rep, true));
            for t in ["pr", "html", "summary", "json", "junit"] {
                for no_verify in [false, true] {
                    let opts = RenderOptions {
                        no_verify,
                        plan_dir: None,
                    };
                    match render(&dir, TemplateChoice::parse(t), &opts) {
                        Ok(s) => out.push_str(&s),
                        Err(e) => out.push_str(&e.to_string()),
                    }
                }
            }
            for f in [DiffFormat::Md, DiffFormat::Json] {
                match diff(&[base().to_path_buf(), dir.clone()], f, false) {
                    Ok(s) => out.push_str(&s),
                    Err(e) => out.push_str(&e.to_string()),
                }
            }
            // What recover does with an unfinished record.
            let _ = std::fs::remove_file(dir.join("record.json"));
            match orchestrate::run::finish_record(&dir, None) {
                Ok(r) => out.push_str(&serde_json::to_string(&r).unwrap_or_default()),
                Err(e) => out.push_str(&e.to_string()),
            }
            out
        });
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => panic!("a reader panicked"),
        Err(_) => panic!("a reader hung for 30 s"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_record_folders_neither_panic_hang_nor_read_outside(
        muts in proptest::collection::vec(mutation(), 1..4)
    ) {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join(base().file_name().unwrap());
        crate::support::copy_dir(base(), &dir);
        let mut outside = Outside::new();
        for m in &muts {
            apply(&dir, m, &outside);
        }
        let text = read_all(&dir);
        prop_assert!(!outside.fifo_was_opened(), "something opened the FIFO outside the folder");
        prop_assert!(!text.contains(&outside.secret_sha), "the digest of a file outside was shown");
    }
}
