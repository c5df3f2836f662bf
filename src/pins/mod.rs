//! Pins: git revisions, model revisions, tool versions, file hashes; verified before a run.
