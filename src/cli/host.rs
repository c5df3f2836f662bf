//! Commands about this host's shared state: `devices`, `cache`.

use std::path::Path;

use orchestrate::exit::{Error, Verdict};

use super::args::CacheCmd;
use super::out::{print_json, say, sayln};

pub fn devices(json: bool, inventory: Option<&Path>) -> Result<Verdict, Error> {
    let file = orchestrate::devices::load_inventory(inventory)
        .map_err(|e| Error::Refused(e.to_string()))?;
    let inv = orchestrate::devices::merged(file, orchestrate::devices::discover());
    let view =
        orchestrate::devices::describe_devices(&inv, &orchestrate::devices::default_lease_dir());
    if json {
        print_json(&view)?;
    } else {
        say!("{}", orchestrate::devices::view::render_text(&view));
    }
    Ok(Verdict::Ok)
}

pub fn cache(what: CacheCmd, root: &Path, remote: Option<&str>) -> Result<Verdict, Error> {
    use orchestrate::cache::admin;
    use orchestrate::units::bytes;
    let cache = orchestrate::cache::Cache::open(root)
        .map_err(|e| Error::Failed(format!("cannot open the cache {}: {e}", root.display())))?;
    let size = |b: u64| bytes(b as f64);
    match what {
        CacheCmd::Push { sign_key, keys } => {
            return super::shared::push(&cache, remote, &sign_key, &keys)
        }
        CacheCmd::Pull { trust, keys } => {
            return super::shared::pull(&cache, remote, &trust, &keys)
        }
        CacheCmd::Remote { trust, json } => return super::shared::list(remote, &trust, json),
        CacheCmd::List { json: true } => print_json(&admin::list(&cache))?,
        CacheCmd::List { json: false } => {
            say!("{}", admin::render_list(&admin::list(&cache), root))
        }
        CacheCmd::Du => {
            let u = admin::usage(&cache);
            sayln!(
                "{} entries, {} blobs, {} in {}; {} in temporary files",
                u.entries,
                u.blobs,
                size(u.bytes),
                root.display(),
                size(u.tmp_bytes)
            );
        }
        CacheCmd::Gc {
            older_than,
            shared: true,
            grace,
            dry_run,
            ..
        } => return super::shared::gc(remote, older_than, grace, dry_run),
        CacheCmd::Gc {
            max_size,
            older_than,
            ..
        } => {
            let c = admin::gc(&cache, max_size, older_than)
                .map_err(|e| Error::Failed(format!("cache gc: {e}")))?;
            let u = admin::usage(&cache);
            sayln!(
                "removed {} entries and {} blobs ({}) and {} of stale temporary files; {} entries, {} left",
                c.entries,
                c.blobs,
                size(c.bytes),
                size(c.tmp_bytes),
                u.entries,
                size(u.bytes)
            );
        }
    }
    Ok(Verdict::Ok)
}
