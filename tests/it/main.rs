//! The integration tests: one crate, one module per area (`<module>_<topic>`), with
//! what they share in `support/`.

mod support;

mod compare_metrics;
mod compare_readers;
mod compare_stats;
mod crash_campaign;
mod devices_cli;
mod devices_inventory;
mod devices_leases;
mod devices_parsers;
mod devices_select;
mod evidence_atomic;
mod evidence_dsse;
mod evidence_fuzz;
mod evidence_jcs;
mod evidence_schema;
mod evidence_verify;
mod kvsim;
mod load;
mod pins_git;
mod pins_host;
mod pins_model;
mod pins_pin;
mod plan_describe;
mod plan_errors;
mod plan_fuzz;
mod plan_matrix;
mod plan_schema;
mod recover_liveness;
mod report_diff;
mod report_html_browser;
mod report_render;
mod report_rocrate;
mod report_truth;
mod reviewed_record;
mod run_cache;
mod run_cli;
mod run_hostile;
mod run_revisions;
mod run_secrets;
mod run_sweep;
mod slurm;
mod trust_cache;
mod trust_results;
