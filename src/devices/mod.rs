//! Device inventory, discovery, exclusive leases and the release audit.
//!
//! ```text
//! devices.toml --load_inventory--\
//!                                  merged --> Inventory --units_for(Request)--> Candidates
//! nvidia-smi, furiosa-smi, ------/                                                |
//! rbln-smi, /dev  (discover)                       LeaseManager::acquire <--------/
//!                                                         |
//!                     <dir>/<device>.core<N>.lock  (flock + JSON body)  --> Grant (env, dev nodes)
//!                                                         |
//!                         audit_leases / recover_leases / holders  (free | held | stale)
//! ```
//!
//! - `model`: `Device`, `Inventory`, `Request`. `inventory`: the TOML file and
//!   `merged`. `discover`: vendor tools, pure parsers per vendor, `/dev` nodes.
//! - `select`: candidate units for a request (aligned core ranges, explicit ids, the
//!   simulated fallback or `Missing`).
//! - `lease`: one lock file per core, locked all-or-none in the global order (device
//!   id, then core) with non-blocking `flock`, so no two runs own a core and no
//!   acquisition deadlocks; files are never deleted. `holder`: the JSON body and
//!   liveness. `audit`: free / held / stale, and recovery of stale bodies.
//! - `env`: the variables that tell a step which devices it owns.
//! - `view`: the inventory with current holders, for `orchestrate devices`.

pub mod audit;
pub mod discover;
pub mod env;
pub mod error;
pub mod holder;
pub mod inventory;
pub mod lease;
pub mod model;
pub mod readings;
pub mod select;
pub mod view;

pub use audit::{audit_leases, holders, recover_leases, LeaseState, LeaseStatus};
pub use discover::discover;
pub use env::{step_env, GrantedDevice};
pub use error::DeviceError;
pub use holder::{Holder, Owner, StaleReason};
pub use inventory::{load_inventory, merged, parse_inventory};
pub use lease::{default_lease_dir, Grant, LeaseManager};
pub use model::{Device, Inventory, Request};
pub use select::{units_for, Candidates, DeviceOption};
pub use view::{describe_devices, DevicesView};
