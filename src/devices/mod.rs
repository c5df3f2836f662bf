//! Device inventory, discovery, exclusive leases and the release audit.
