//! The local backend: each attempt in its own cgroups on this host (`isolate`).

use std::sync::Arc;

use tokio::sync::watch;

use super::{
    AttemptError, AttemptJob, AttemptOutcome, AttemptSpec, Backend, BoxFuture, CancelReason, Gate,
};
use crate::isolate::{IsolateError, Isolator};

/// Runs attempts on this host through an [`Isolator`].
pub struct Local {
    isolator: Arc<Isolator>,
}

impl Local {
    pub fn new(isolator: Arc<Isolator>) -> Local {
        Local { isolator }
    }
}

impl Backend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn run(
        &self,
        spec: AttemptSpec,
        _job: AttemptJob,
        cancel: watch::Receiver<Option<CancelReason>>,
        gate: Gate,
    ) -> BoxFuture<'_, Result<AttemptOutcome, AttemptError>> {
        Box::pin(async move {
            self.isolator
                .run_gated(spec, cancel, gate)
                .await
                .map_err(|e| match e {
                    IsolateError::CancelledBeforeStart(r) => AttemptError::CancelledBeforeStart(r),
                    other => AttemptError::NotStarted(other.to_string()),
                })
        })
    }
}
