//! The command line's spellings of the library's fixed choices. The clap derive
//! lives here, so the library's enums know nothing of clap; each choice converts
//! both ways by exhaustive matches, so a variant added on either side is a
//! compile error until the other has it.

use orchestrate::plan::model::BackendKind;
use orchestrate::plan::IsolationMode;
use orchestrate::report::DiffFormat;
use orchestrate::sched::ProgressMode;

/// A command-line choice mirroring a library enum variant for variant.
macro_rules! choice {
    ($(#[$m:meta])* $name:ident => $lib:ident { $($(#[$vm:meta])* $v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl From<$name> for $lib {
            fn from(c: $name) -> $lib {
                match c {
                    $($name::$v => $lib::$v),+
                }
            }
        }

        impl From<$lib> for $name {
            fn from(c: $lib) -> $name {
                match c {
                    $($lib::$v => $name::$v),+
                }
            }
        }
    };
}

choice! {
    /// Where a step's attempts run.
    Backend => BackendKind {
        /// This host, each attempt in its own cgroups.
        Local,
        /// A Slurm cluster: one `sbatch` job per attempt.
        Slurm,
    }
}

choice! {
    /// How attempts are isolated.
    Isolation => IsolationMode {
        /// cgroups where possible, else `none` with a recorded warning.
        Auto,
        /// cgroups required: refuse to run (exit 3) when impossible.
        Cgroup,
        /// Explicitly unisolated: process-group kill only, limits not enforced.
        None,
    }
}

choice! {
    /// How progress is shown.
    Progress => ProgressMode {
        /// Live view on a terminal, plain lines otherwise.
        Auto,
        /// One line per event.
        Plain,
        /// Nothing.
        Quiet,
    }
}

choice! {
    /// Output format of a diff.
    Diff => DiffFormat {
        Md,
        Text,
        Json,
    }
}
