//! What a step's test runner and scanners wrote, as the record keeps it: JUnit XML
//! (pytest `--junitxml`, cargo-nextest, JUnit 5) and SARIF 2.1.0 (ruff, semgrep,
//! gitleaks, bandit), read from the files a step declares in `results`. And how two
//! revisions' results compare: `new`, `pre-existing`, `fixed`, `passing`.

pub mod classify;
pub mod junit;
pub mod sarif;

use crate::digest::Sha256Digest;
pub use crate::record::results::{
    AttemptResults, CaseCounts, Finding, JunitResults, Outcome, SarifResults, TestCase,
};

/// The largest results file read (a larger one is named, with its digest, not parsed).
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;
/// Cases or findings kept per file; counts cover all of them.
pub const MAX_ITEMS: usize = 100_000;
/// The text of the cases or findings the record keeps per file, at most: a results
/// file near the size cap would otherwise make a record (and every command that
/// reads it: `verify`, `runs`, `site`) several times its size. Failing cases may use
/// all of it, passing and skipped ones half; what is left out is counted, and the
/// whole file is kept beside the attempt's logs.
pub const MAX_KEPT_BYTES: usize = 4 << 20;
/// A failure message or finding text is cut to this many characters.
pub const MAX_MESSAGE: usize = 1000;

/// What the record still has room for, of one results file's items.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Budget {
    used: usize,
    items: usize,
}

impl Budget {
    /// Whether an item of `bytes` of text is kept (and counted against the
    /// budget); `urgent` items (failing cases) may use all of it, others half.
    pub(crate) fn admit(&mut self, bytes: usize, urgent: bool) -> bool {
        let limit = if urgent {
            MAX_KEPT_BYTES
        } else {
            MAX_KEPT_BYTES / 2
        };
        if self.items >= MAX_ITEMS || self.used.saturating_add(bytes) > limit {
            return false;
        }
        self.used += bytes;
        self.items += 1;
        true
    }
}

/// At most `MAX_MESSAGE` characters, trimmed.
pub(crate) fn cut(s: &str) -> String {
    let t = s.trim();
    match t.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// Read a results file the way outputs are read: a regular file, bounded.
pub(crate) fn read(path: &std::path::Path) -> Result<(Vec<u8>, Sha256Digest), String> {
    // Not through a link: a step must not make the record quote a file outside it.
    let bytes = crate::digest::read_regular(path, crate::digest::Follow::No, MAX_RESULTS_BYTES)
        .map_err(|e| e.to_string())?;
    let d = crate::digest::sha256_bytes(&bytes);
    Ok((bytes, d))
}
