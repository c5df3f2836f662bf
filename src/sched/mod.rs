//! The DAG scheduler: dispatcher + executor over typed events.
