//! `cache push`, `cache pull`, `cache remote` and `cache gc --remote`: the shared
//! cache by hand.

use std::path::{Path, PathBuf};

use orchestrate::cache::remote::{self, Pulled, Trust, Writer};
use orchestrate::cache::Cache;
use orchestrate::exit::{Error, Verdict};

use super::out::{print_json, sayln};

fn open(spec: Option<&str>) -> Result<Box<dyn remote::Remote>, Error> {
    let spec = spec.ok_or_else(|| {
        Error::Usage(
            "no shared cache: name it with --cache-remote or ORCHESTRATE_CACHE_REMOTE".into(),
        )
    })?;
    remote::open(spec).map_err(|e| Error::Refused(e.to_string()))
}

fn trust(paths: &[PathBuf]) -> Result<Trust, Error> {
    Trust::load(paths).map_err(|e| Error::Usage(e.to_string()))
}

/// `cache push`: every usable entry (or those named) to the shared cache.
pub fn push(
    cache: &Cache,
    spec: Option<&str>,
    key: &Path,
    only: &[String],
) -> Result<Verdict, Error> {
    let r = open(spec)?;
    let key = orchestrate::evidence::dsse::load_signing_key(key)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let trust = Trust::default();
    let mut failed = 0;
    for (entry, pre) in orchestrate::cache::admin::usable(cache) {
        if !only.is_empty() && !only.contains(&entry.key) {
            continue;
        }
        if entry.pulled_from.is_some() {
            // Taken from the shared cache: its signer vouches for it, not this key.
            continue;
        }
        let writer = Writer {
            user: orchestrate::backend::slurm::current_user(),
            host: orchestrate::devices::holder::host_name(),
            run_id: entry.run_id.clone(),
        };
        let short = entry.key.get(..12).unwrap_or(&entry.key).to_string();
        match remote::push(cache, r.as_ref(), &trust, &key, writer, &entry, &pre) {
            Ok(p) if p.wrote => sayln!(
                "{short} {}: pushed ({} blobs, {} bytes sent)",
                entry.step,
                p.blobs,
                p.bytes
            ),
            Ok(_) => sayln!("{short} {}: already there, signed by this key", entry.step),
            Err(e) => {
                failed += 1;
                sayln!("{short} {}: not pushed: {e}", entry.step);
            }
        }
    }
    Ok(if failed == 0 {
        Verdict::Ok
    } else {
        Verdict::Failed
    })
}

/// `cache pull`: the named keys, signed by a trusted key, into this cache.
pub fn pull(
    cache: &Cache,
    spec: Option<&str>,
    keys: &[PathBuf],
    wanted: &[String],
) -> Result<Verdict, Error> {
    let r = open(spec)?;
    let trust = trust(keys)?;
    let mut missed = 0;
    for key in wanted {
        // Without a plan, the outputs the trusted entry names are the ones expected.
        let Some(expected) = outputs_of(r.as_ref(), &trust, key) else {
            missed += 1;
            sayln!("{key}: no entry a trusted key signed in {}", r.url());
            continue;
        };
        match remote::pull(cache, r.as_ref(), &trust, key, &expected) {
            Pulled::Hit {
                entry,
                signer,
                writer,
            } => {
                sayln!(
                    "{key}: pulled ({}, signed by {signer}, stored by {})",
                    entry.step,
                    writer.who()
                )
            }
            Pulled::Miss(why) => {
                missed += 1;
                sayln!("{key}: {why}");
            }
        }
    }
    Ok(if missed == 0 {
        Verdict::Ok
    } else {
        Verdict::Failed
    })
}

fn outputs_of(r: &dyn remote::Remote, trust: &Trust, key: &str) -> Option<Vec<String>> {
    trust.ids().into_iter().find_map(|(id, _)| {
        let bytes = r.entry(key, &id, remote::signed::MAX_ENTRY).ok()??;
        let v = trust.check(&id, &bytes, key).ok()?;
        Some(
            v.shared
                .entry
                .outputs
                .iter()
                .map(|o| o.path.clone())
                .collect(),
        )
    })
}

/// `cache remote`: what the shared cache holds.
pub fn list(spec: Option<&str>, keys: &[PathBuf], json: bool) -> Result<Verdict, Error> {
    let r = open(spec)?;
    let listed =
        remote::listing(r.as_ref(), &trust(keys)?).map_err(|e| Error::Failed(e.to_string()))?;
    if json {
        print_json(&listed)?;
        return Ok(Verdict::Ok);
    }
    sayln!(
        "{:<14} {:<24} {:<16} {:<24} {:>12}",
        "key",
        "step",
        "signed by",
        "stored by",
        "bytes"
    );
    for l in &listed {
        let signer = match &l.trusted {
            Some(n) => n.clone(),
            None => format!("{}… (untrusted)", l.signer_id.get(..8).unwrap_or("")),
        };
        sayln!(
            "{:<14} {:<24} {:<16} {:<24} {:>12}",
            l.key.get(..12).unwrap_or(&l.key),
            format!("{}: {}", l.plan, l.step),
            signer,
            l.stored_by,
            l.bytes
        );
    }
    sayln!("{} entries in {}", listed.len(), r.url());
    Ok(Verdict::Ok)
}

/// `cache gc --remote`: entries stored before `older_than`, then orphaned blobs.
pub fn gc(
    spec: Option<&str>,
    older_than: Option<std::time::Duration>,
    grace: std::time::Duration,
    dry: bool,
) -> Result<Verdict, Error> {
    let r = open(spec)?;
    let now = std::time::SystemTime::now();
    let c = remote::gc::gc(r.as_ref(), older_than, grace, now, dry)
        .map_err(|e| Error::Failed(format!("cache gc {}: {e}", r.url())))?;
    let verb = if dry { "would remove" } else { "removed" };
    sayln!(
        "{}: {verb} {} entries and {} blobs ({} bytes); kept {} entries and {} blobs, \
         and {} blobs no entry names yet, stored within the grace time",
        r.url(),
        c.entries_removed,
        c.blobs_removed,
        c.bytes_freed,
        c.entries_kept,
        c.blobs_kept,
        c.blobs_young
    );
    Ok(Verdict::Ok)
}
