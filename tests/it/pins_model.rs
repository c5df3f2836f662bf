//! Model pins against a fake Hugging Face hub cache made of real files: blobs,
//! snapshots symlinked into them, and refs/main.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use orchestrate::digest::{sha256_bytes, Sha256Digest};
use orchestrate::pins::{cache_folder_name, verify, Details, PinKind, PinReport, PinStatus};
use orchestrate::plan::model::{ModelPin, Pins};

const REV: &str = "0172bf7e73977ae213613529f3d2d5400a33f678";
const OTHER_REV: &str = "1111111e73977ae213613529f3d2d5400a33f678";
const ID: &str = "KISTI-KONI/KONI-Llama3.1-8B-Instruct-20241024";
const CONFIG: &[u8] = b"{\"layers\": 32}\n";
const WEIGHTS: &[u8] = b"\x00\x01weights\xff";

/// `models--ORG--NAME` with two files in snapshot REV, the weights in a subfolder.
fn hub_cache(root: &Path) -> PathBuf {
    let cache = root.join(cache_folder_name(ID));
    let blobs = cache.join("blobs");
    let snap = cache.join("snapshots").join(REV);
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(snap.join("sub")).unwrap();
    std::fs::create_dir_all(cache.join("refs")).unwrap();
    for (content, link) in [(CONFIG, "config.json"), (WEIGHTS, "sub/model.safetensors")] {
        let name = sha256_bytes(content).hex();
        std::fs::write(blobs.join(&name), content).unwrap();
        let up = if link.contains('/') {
            "../../../"
        } else {
            "../../"
        };
        symlink(format!("{up}blobs/{name}"), snap.join(link)).unwrap();
    }
    std::fs::write(cache.join("refs/main"), REV).unwrap();
    cache
}

fn expected_digest() -> Sha256Digest {
    let manifest = format!(
        "{}  config.json\n{}  sub/model.safetensors\n",
        sha256_bytes(CONFIG).hex(),
        sha256_bytes(WEIGHTS).hex()
    );
    sha256_bytes(manifest.as_bytes())
}

fn model_pin(
    id: Option<&str>,
    revision: Option<&str>,
    path: &Path,
    digest: Option<String>,
) -> Pins {
    let mut model = BTreeMap::new();
    model.insert(
        "koni".to_string(),
        ModelPin {
            id: id.map(str::to_string),
            revision: revision.map(str::to_string),
            path: path.to_path_buf(),
            digest,
        },
    );
    Pins {
        model,
        ..Pins::default()
    }
}

fn run(root: &Path, pins: &Pins) -> PinReport {
    verify(pins, root)
}

#[test]
fn present_revision_hashes_followed_files() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    let r = run(t.path(), &model_pin(Some(ID), Some(REV), &cache, None));
    let e = r.entry(PinKind::Model, "koni").unwrap();
    // Revision present but no digest yet: observed only, not refused.
    assert_eq!(e.status, PinStatus::Unpinned, "{e:?}");
    assert!(!r.has_drift());
    let Some(Details::Model(m)) = &e.details else {
        panic!("no details")
    };
    assert_eq!(m.revision.as_deref(), Some(REV));
    assert_eq!(m.digest, expected_digest());
    assert_eq!(m.files.len(), 2);
    assert_eq!(m.files[1].path, "sub/model.safetensors");
    assert_eq!(m.files[1].sha256, sha256_bytes(WEIGHTS));
    assert_eq!(m.files[1].size, WEIGHTS.len() as u64);
    assert!(!m.files[1].symlink);

    let pinned = Some(format!("sha256:{}", expected_digest()));
    let r = run(t.path(), &model_pin(Some(ID), Some(REV), &cache, pinned));
    let e = r.entry(PinKind::Model, "koni").unwrap();
    assert_eq!(e.status, PinStatus::Ok, "{e:?}");
    assert_eq!(
        e.observed.as_deref(),
        Some(format!("{REV} sha256:{}", expected_digest()).as_str())
    );
}

#[test]
fn ref_names_and_short_revisions_resolve() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    for rev in [Some("main"), Some(&REV[..10]), None] {
        let r = run(t.path(), &model_pin(Some(ID), rev, &cache, None));
        let e = r.entry(PinKind::Model, "koni").unwrap();
        let Some(Details::Model(m)) = &e.details else {
            panic!("{rev:?}: {e:?}")
        };
        assert_eq!(m.revision.as_deref(), Some(REV), "{rev:?}");
    }
}

#[test]
fn absent_revision_is_drift() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    let r = run(
        t.path(),
        &model_pin(Some(ID), Some(OTHER_REV), &cache, None),
    );
    let e = r.entry(PinKind::Model, "koni").unwrap();
    assert_eq!(e.status, PinStatus::Drift, "{e:?}");
    // What the cache does have is shown for the researcher.
    assert_eq!(e.observed.as_deref(), Some(REV));
    assert!(r.has_drift());
    let r = run(t.path(), &model_pin(Some(ID), Some("v2"), &cache, None));
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Drift
    );
}

#[test]
fn missing_cache_or_another_models_cache_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    let r = run(
        t.path(),
        &model_pin(Some(ID), Some(REV), &t.path().join("nope"), None),
    );
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Error
    );
    let r = run(
        t.path(),
        &model_pin(Some("org/other"), Some(REV), &cache, None),
    );
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Error
    );
}

#[test]
fn wrong_digest_and_corrupt_blob_are_drift() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    let wrong = Some(format!("sha256:{}", sha256_bytes(b"other")));
    let r = run(t.path(), &model_pin(Some(ID), Some(REV), &cache, wrong));
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Drift
    );

    // A blob whose content no longer matches its sha256 name.
    let blob = cache.join("blobs").join(sha256_bytes(WEIGHTS).hex());
    std::fs::write(&blob, b"tampered").unwrap();
    let r = run(t.path(), &model_pin(Some(ID), Some(REV), &cache, None));
    let e = r.entry(PinKind::Model, "koni").unwrap();
    assert_eq!(e.status, PinStatus::Drift, "{e:?}");
    assert!(e
        .message
        .as_deref()
        .unwrap()
        .contains("sub/model.safetensors"));
}

#[test]
fn plain_folder_pinned_by_digest_is_stable() {
    let t = tempfile::tempdir().unwrap();
    let cache = hub_cache(t.path());
    // The snapshot folder as a plain folder: same followed content, same digest.
    let snap = cache.join("snapshots").join(REV);
    let pinned = Some(format!("sha256:{}", expected_digest()));
    for _ in 0..2 {
        let r = run(t.path(), &model_pin(None, None, &snap, pinned.clone()));
        let e = r.entry(PinKind::Model, "koni").unwrap();
        assert_eq!(e.status, PinStatus::Ok, "{e:?}");
    }
    // A real copy (no symlinks) hashes the same as the linked snapshot.
    let copy = t.path().join("copy");
    std::fs::create_dir_all(copy.join("sub")).unwrap();
    std::fs::write(copy.join("config.json"), CONFIG).unwrap();
    std::fs::write(copy.join("sub/model.safetensors"), WEIGHTS).unwrap();
    let r = run(t.path(), &model_pin(None, None, Path::new("copy"), pinned));
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Ok
    );
    std::fs::write(copy.join("config.json"), b"{}").unwrap();
    let r = run(
        t.path(),
        &model_pin(
            None,
            None,
            Path::new("copy"),
            Some(format!("sha256:{}", expected_digest())),
        ),
    );
    assert_eq!(
        r.entry(PinKind::Model, "koni").unwrap().status,
        PinStatus::Drift
    );
}
