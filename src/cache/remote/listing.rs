//! What the shared cache holds, as `cache remote` lists it.

use base64ct::{Base64, Encoding};

use super::signed::{Shared, Trust, MAX_ENTRY};
use super::{Remote, RemoteError};
use crate::evidence::dsse::Envelope;

/// One signed entry of the shared cache.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteListed {
    pub key: String,
    /// The id of the key that signed it (where it is stored).
    pub signer_id: String,
    /// The name of the trusted key that verifies it; `None` when none does.
    pub trusted: Option<String>,
    /// What the entry claims (verified only when `trusted` is set).
    pub plan: String,
    pub step: String,
    pub stored_by: String,
    pub run_id: String,
    pub bytes: u64,
}

/// Every entry of `remote`, by key and signer; unreadable ones are left out.
pub fn listing(remote: &dyn Remote, trust: &Trust) -> Result<Vec<RemoteListed>, RemoteError> {
    let mut out = Vec::new();
    for key in remote.keys()? {
        for id in remote.signers(&key)? {
            let Some(bytes) = remote.entry(&key, &id, MAX_ENTRY)? else {
                continue;
            };
            let trusted = trust.check(&id, &bytes, &key).ok();
            let claimed = trusted.as_ref().map(|v| v.shared.clone()).or_else(|| {
                let env: Envelope = serde_json::from_slice(&bytes).ok()?;
                let payload = Base64::decode_vec(&env.payload).ok()?;
                serde_json::from_slice::<Shared>(&payload).ok()
            });
            let Some(s) = claimed else {
                continue;
            };
            out.push(RemoteListed {
                key: key.clone(),
                signer_id: id,
                trusted: trusted.map(|v| v.signer),
                plan: super::signed::printable(&s.entry.plan),
                step: super::signed::printable(&s.entry.step),
                stored_by: s.writer.who(),
                run_id: super::signed::printable(&s.writer.run_id),
                bytes: s.entry.outputs.iter().map(|o| o.bytes).sum(),
            });
        }
    }
    Ok(out)
}
