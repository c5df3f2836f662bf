# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_orchestrate_global_optspecs
    string join \n v/verbose h/help V/version
end

function __fish_orchestrate_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_orchestrate_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_orchestrate_using_subcommand
    set -l cmd (__fish_orchestrate_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c orchestrate -n "__fish_orchestrate_needs_command" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -s V -l version -d 'Print version'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "run" -d 'Run a plan: validate, verify pins, lease devices, run the DAG, write the record'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "init" -d 'Write a starter plan (shell steps, a compare, reports) to DIR/plan.toml and its schema beside it, never over a file: it checks and runs as it is, and its comments point into the docs. `--example NAME` writes one of the plans the project ships instead (with the files it needs), ready to run where orchestrate was installed without the repository'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "completions" -d 'Print a shell completion script: `orchestrate completions bash > ~/.local/share/bash-completion/completions/orchestrate` (the wheel installs them under share/ already)'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "man" -d 'Print the man page (roff), orchestrate(1) or a subcommand\'s, orchestrate-run(1) and so on: `orchestrate man run | man -l -`. The wheel installs them all under share/man/man1'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "pin" -d 'Write the observed pins (commits, revisions, digests, versions) into the plan, keeping its formatting and comments'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "resume" -d 'Finish a run whose orchestrator was killed while its Slurm jobs ran: its jobs are found in the journal and never submitted again (finished ones are read, running ones waited for); then the record is written'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "status" -d 'Where each step of a run is (ended, its job queued or running, waiting), from its journal and the batch scheduler; writes nothing. For a detached run (`run --detach`) or one running elsewhere'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "recover" -d 'Clean what dead runs left (cgroups, unfinished records) and report it'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "check" -d 'Validate a plan and print its steps (expanded over its matrix) in dependency order; runs nothing'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "verify" -d 'Re-hash everything a record names (record, logs, plan, artifacts, attestation); exit 1 on any finding'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "report" -d 'Render a report from a record alone (the digest is checked first)'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "export" -d 'Export a record for other tools: `--ro-crate` writes a Workflow Run Crate 0.5 (`ro-crate-metadata.json`) into the record folder, or into `-o DIR` beside a copy of the record folder\'s files'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "diff" -d 'Put runs side by side, a column each: pins, environment, step timings, metrics, tests and findings, checks. The first run is the one the others are measured against (ratios, new and fixed tests)'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "runs" -d 'List the runs of records folders from their index (kept beside the records, refreshed with what is new; a record that does not verify is listed as such)'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "trend" -d 'A step\'s metric over runs, by implementation commit (git\'s order) or time, each change found and confirmed (Mann-Whitney U, bootstrap interval); `trend tests [ID]`: when each test case started or stopped failing'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "regressions" -d 'The regression gate for CI: the newest run of a plan (or --run) against the runs of that plan before it in the index. Every step metric is judged by the rule revisions use (Mann–Whitney U and the 95% bootstrap interval of the ratio of medians beyond the threshold; direction and threshold of a step\'s headline metric from `[steps.X.report] better` and `threshold`); every test case that started failing and every new finding fails it too. Exit 1 on a regression, 0 otherwise; a history too noisy to tell says "not enough evidence"'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "site" -d 'Write a static HTML site of every indexed run (no network needed): the runs with filters, a chart per step metric over commits with its changes marked, the tests\' and findings\' history, and each run\'s report and record beside it'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "bisect" -d 'Find the first bad commit between --good and --bad: the plan run once per probe with `[revisions] implementation` replaced, each probe decided from its record (an inconclusive one measured again), the probes tied in a bisect record'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "schema" -d 'Print a JSON Schema'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "audit" -d 'Leases, cgroups and processes dead runs left behind; exit 1 if any'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "why" -d 'Why each `cache = true` step of a plan would run or be reused, without running anything'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "slurm-exec" -d 'Inside a Slurm job: run an attempt\'s command and write its end record (the job script calls this; not for users)'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "cache" -d 'The step cache: `list`, `du`, `gc`'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "devices" -d 'The device inventory and who holds what'
complete -c orchestrate -n "__fish_orchestrate_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l only -d 'Run only the matrix cells with this axis value (repeatable; several values of one axis: any of them), e.g. `--only tokens=2048`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l set -d 'Override a plan value (TOML syntax; repeatable), recorded as an override: `--set params.tokens=4096`, `--set matrix.tokens=[2048]`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l records -d 'Folder of run records; the run writes `<records>/<run-id>/`' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l work -d 'Folder for artifacts (`${work}` is `<work>/<run-id>`); default `work/` beside the records folder' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -s j -l jobs -d 'Steps running at once (default: the number of CPUs)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l isolation -d 'Override the plan\'s `limits.isolation`' -r -f -a "auto\t'cgroups where possible, else `none` with a recorded warning'
cgroup\t'cgroups required: refuse to run (exit 3) when impossible'
none\t'Explicitly unisolated: process-group kill only, limits not enforced'"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l cgroup-parent -d 'A cgroup an administrator delegated to you (e.g. `/orchestrate/alice`, the same path in each hierarchy): attempts\' cgroups go below it. Overrides the plan\'s `limits.cgroup_parent`; see docs/hosts.md' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l timeout -d 'Whole-run timeout (e.g. `30m`), overriding the plan\'s `limits.run_timeout`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l grace -d 'Grace between SIGTERM and kill when ending attempts (default 10s)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l memory-budget -d 'Host memory the running steps\' limits may add up to (default: all of it)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l progress -d '`auto`: a live view on a terminal, plain lines otherwise' -r -f -a "auto\t'Live view on a terminal, plain lines otherwise'
plain\t'One line per event'
quiet\t'Nothing'"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l inventory -d 'Device inventory (TOML); default `ORCHESTRATE_INVENTORY`, then `/etc/orchestrate/devices.toml`' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l device-wait -d 'How long a step waits for devices another run holds' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l sign-key -d 'Sign the attestation with this ed25519 private key (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` writes)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l refresh -d 'Run this cached step whatever the cache holds (repeatable; a step id or the step a matrix cell was made from). An output that then differs from the entry\'s is flagged "nondeterministic output"' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l backend -d 'Where steps that do not name a `backend` run: on this host, or as Slurm jobs (default: the plan\'s `[backend] kind`, else local)' -r -f -a "local\t'This host, each attempt in its own cgroups'
slurm\t'A Slurm cluster: one `sbatch` job per attempt'"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l keep-going -d 'After a failure, go on with every step that does not depend on it'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l tee -d 'Copy every step\'s output to the terminal too'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l allow-drift -d 'Run even when pins drifted; the drift is recorded and shown first'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l no-cache -d 'Run every `cache = true` step (what they make is still stored)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -l detach -d 'Submit every job (chained by `--dependency=afterok`) and return: the run goes on without this process. `orchestrate status RUN` follows it and `orchestrate resume RUN` collects it into its record. Every step but compare steps must run on a batch scheduler'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand init" -l example -d 'A shipped plan: starter (the default), smoke, full, full8k (the README\'s main job) or torch (needs torch and transformers)' -r -f -a "starter\t''
smoke\t''
full\t''
full8k\t''
torch\t''"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand init" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand init" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand completions" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand completions" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand man" -l out -d 'Write every page (orchestrate.1 and one per subcommand) into DIR instead, replacing pages of the same names' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand man" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand man" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand pin" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand pin" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand resume" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand resume" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand status" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand status" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand recover" -l records -d 'Records folder whose unfinished runs get their record rebuilt' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand recover" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand recover" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand check" -l only -d 'Run only the matrix cells with this axis value (repeatable; several values of one axis: any of them), e.g. `--only tokens=2048`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand check" -l set -d 'Override a plan value (TOML syntax; repeatable), recorded as an override: `--set params.tokens=4096`, `--set matrix.tokens=[2048]`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand check" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand check" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand verify" -l key -d 'Public (SPKI PEM) or private (PKCS#8 PEM) ed25519 key: the attestation must be signed by it' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand verify" -l require-artifacts -d 'Artifacts (declared outputs) that are gone are failures, not notes'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand verify" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand verify" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -s t -l template -d '`pr` (Markdown PR body), `html`, `summary`, `json`, `junit` (JUnit XML for CI test reporters), or a tera template file' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -l format -d 'Same as `--template json`' -r -f -a "json\t'A machine-readable summary'"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -s o -l output -d 'Write here instead of standard output' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -l plan-dir -d 'Look for `templates/` overrides beside this plan folder' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -l no-verify -d 'Render even when record.json does not match record.sha256'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand export" -s o -l output -d 'The crate\'s folder (default: the record folder itself)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand export" -l ro-crate -d 'Write an RO-Crate (Workflow Run Crate 0.5)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand export" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand export" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand diff" -l format -r -f -a "md\t''
text\t''
json\t''"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand diff" -l diff-only -d 'Keep only rows that differ: a value not the same in every run, a step whose status differs or whose time range does not overlap the first run\'s, a metric likewise, a new or fixed test or finding'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand diff" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand diff" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -l records -d 'Records folder (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -l plan -d 'Only runs of this plan' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -l status -d 'Only runs with this status (succeeded, failed, interrupted, …)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -l since -d 'Only runs started at or after this date (`2026-12-01` or RFC 3339)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -l json -d 'Print the runs as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand runs" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l records -d 'Records folder (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l plan -d 'Only runs of this plan' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l by -d 'Order points by implementation commit (one point per commit) or by time (one point per run)' -r -f -a "commit\t''
time\t''"
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l repo -d 'The repository whose history orders the commits' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l noise -d 'A change smaller than this fraction is noise' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -l json -d 'Print the trend as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand trend" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l records -d 'Records folder (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l plan -d 'Only runs of this plan (needed when the records hold several)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l run -d 'The run to judge (its id or folder); default the newest' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l history -d 'How many earlier runs make the history' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l noise -d 'The threshold of metrics the plan gives none, a fraction or a percentage (default the plan\'s `[report] noise`, else 5%)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l junit -d 'Also write the verdict as JUnit XML (a case per metric, test and finding)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -l json -d 'Print the verdict as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand regressions" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l records -d 'Records folder (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l plan -d 'Only runs of this plan' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l repo -d 'The repository whose history orders the commits' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l noise -d 'A change smaller than this fraction is noise' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -s o -l output -d 'The folder to write (new, empty, or a site this command wrote: its own files replaced, anything the user added there kept)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l watch -d 'Rewrite the site every SECS seconds while a run is in progress (its page reloads itself as often); stops once none is, or on Ctrl-C between writes, leaving the site as last written' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -l no-reports -d 'List and chart the runs without copying each run\'s record and HTML report into the site (no report links, nothing to compare): a large history\'s site builds in seconds'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand site" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l good -d 'A commit (any git revision) where the target holds' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l bad -d 'A later commit where it does not' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l metric -d 'STEP.METRIC: bad when higher than on --good by more than --threshold, significantly (Mann-Whitney U, bootstrap interval)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l threshold -d 'The smallest change that counts: `5%` or `0.05`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l test -d 'A JUnit test id (`classname::name`): bad when it fails' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l check -d 'A compare check\'s name: bad when it does not pass' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l records -d 'Where the probes\' records and the bisect record go' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l work -d 'The probes\' work folder (default: the run\'s own)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -l json -d 'Print the bisection as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand bisect" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand schema" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand schema" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand audit" -l records -d 'Also report unfinished records of dead runs in this folder' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand audit" -l json -d 'Print the report as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand audit" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand audit" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -l only -d 'Run only the matrix cells with this axis value (repeatable; several values of one axis: any of them), e.g. `--only tokens=2048`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -l set -d 'Override a plan value (TOML syntax; repeatable), recorded as an override: `--set params.tokens=4096`, `--set matrix.tokens=[2048]`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand why" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand slurm-exec" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand slurm-exec" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "list" -d 'Every entry: its step, the run that made it, its size, how long unused'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "du" -d 'Entries, blobs and the bytes they take'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "push" -d 'Send entries of this cache (every one, or the keys named) to the shared cache (`--cache-remote`), signed with `--sign-key`: blobs it lacks first, then the entry, unless this key has one there'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "pull" -d 'Take entries of the shared cache (`--cache-remote`) that a `--trust` key signed into this cache, every blob hashed on the way in'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "remote" -d 'The entries of the shared cache (`--cache-remote`): key, who signed each and who stored it, as each entry claims (`trusted` names the `--trust` key that verifies it)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "gc" -d 'Remove entries unused longer than `--older-than`, then the least recently used until the cache fits `--max-size`, then blobs no entry keeps. With `--remote`, the shared cache instead: entries stored longer ago than `--older-than`, then blobs no entry names stored before `--grace`'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and not __fish_seen_subcommand_from list du push pull remote gc help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from list" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from list" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from list" -l json
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from du" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from du" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from du" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from du" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from push" -l sign-key -d 'Sign with this ed25519 private key (PKCS#8 PEM)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from push" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from push" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from push" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from push" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from pull" -l trust -d 'A public key (SPKI PEM) whose entries are taken (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from pull" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from pull" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from pull" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from pull" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -l trust -d 'Public keys (SPKI PEM) to verify signatures with (repeatable)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -l json
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from remote" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l max-size -d 'e.g. 50GiB (the step cache only)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l older-than -d 'e.g. 30d (d, h, m, s, combined as 1d12h)' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l grace -d 'With `--remote`: keep blobs no entry names when stored more recently than this, as a push under way writes its blobs before its entry' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l cache -d 'The step cache folder (default `ORCHESTRATE_CACHE`, then `$XDG_CACHE_HOME/orchestrate`, then `~/.cache/orchestrate`)' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l cache-remote -d 'The shared store asked after a miss in the step cache, and sent what cached steps make (signed with `--sign-key`): a shared folder\'s path or `s3://bucket/prefix` (credentials from the environment or ~/.aws, never the URL). Default: the plan\'s `[cache] remote`' -r
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l remote -d 'Collect the shared cache (`--cache-remote`), not the step cache'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -l dry-run -d 'Say what would be removed; remove nothing (with `--remote`)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from gc" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every entry: its step, the run that made it, its size, how long unused'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "du" -d 'Entries, blobs and the bytes they take'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "push" -d 'Send entries of this cache (every one, or the keys named) to the shared cache (`--cache-remote`), signed with `--sign-key`: blobs it lacks first, then the entry, unless this key has one there'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "pull" -d 'Take entries of the shared cache (`--cache-remote`) that a `--trust` key signed into this cache, every blob hashed on the way in'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "remote" -d 'The entries of the shared cache (`--cache-remote`): key, who signed each and who stored it, as each entry claims (`trusted` names the `--trust` key that verifies it)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "gc" -d 'Remove entries unused longer than `--older-than`, then the least recently used until the cache fits `--max-size`, then blobs no entry keeps. With `--remote`, the shared cache instead: entries stored longer ago than `--older-than`, then blobs no entry names stored before `--grace`'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand devices" -l inventory -d 'Device inventory (TOML); default `ORCHESTRATE_INVENTORY`, then `/etc/orchestrate/devices.toml`' -r -F
complete -c orchestrate -n "__fish_orchestrate_using_subcommand devices" -l json -d 'Print as JSON'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand devices" -s v -l verbose -d 'More logging (-v info, -vv debug); RUST_LOG overrides'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand devices" -s h -l help -d 'Print help'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "run" -d 'Run a plan: validate, verify pins, lease devices, run the DAG, write the record'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "init" -d 'Write a starter plan (shell steps, a compare, reports) to DIR/plan.toml and its schema beside it, never over a file: it checks and runs as it is, and its comments point into the docs. `--example NAME` writes one of the plans the project ships instead (with the files it needs), ready to run where orchestrate was installed without the repository'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "completions" -d 'Print a shell completion script: `orchestrate completions bash > ~/.local/share/bash-completion/completions/orchestrate` (the wheel installs them under share/ already)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "man" -d 'Print the man page (roff), orchestrate(1) or a subcommand\'s, orchestrate-run(1) and so on: `orchestrate man run | man -l -`. The wheel installs them all under share/man/man1'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "pin" -d 'Write the observed pins (commits, revisions, digests, versions) into the plan, keeping its formatting and comments'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "resume" -d 'Finish a run whose orchestrator was killed while its Slurm jobs ran: its jobs are found in the journal and never submitted again (finished ones are read, running ones waited for); then the record is written'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "status" -d 'Where each step of a run is (ended, its job queued or running, waiting), from its journal and the batch scheduler; writes nothing. For a detached run (`run --detach`) or one running elsewhere'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "recover" -d 'Clean what dead runs left (cgroups, unfinished records) and report it'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "check" -d 'Validate a plan and print its steps (expanded over its matrix) in dependency order; runs nothing'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "verify" -d 'Re-hash everything a record names (record, logs, plan, artifacts, attestation); exit 1 on any finding'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "report" -d 'Render a report from a record alone (the digest is checked first)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "export" -d 'Export a record for other tools: `--ro-crate` writes a Workflow Run Crate 0.5 (`ro-crate-metadata.json`) into the record folder, or into `-o DIR` beside a copy of the record folder\'s files'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "diff" -d 'Put runs side by side, a column each: pins, environment, step timings, metrics, tests and findings, checks. The first run is the one the others are measured against (ratios, new and fixed tests)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "runs" -d 'List the runs of records folders from their index (kept beside the records, refreshed with what is new; a record that does not verify is listed as such)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "trend" -d 'A step\'s metric over runs, by implementation commit (git\'s order) or time, each change found and confirmed (Mann-Whitney U, bootstrap interval); `trend tests [ID]`: when each test case started or stopped failing'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "regressions" -d 'The regression gate for CI: the newest run of a plan (or --run) against the runs of that plan before it in the index. Every step metric is judged by the rule revisions use (Mann–Whitney U and the 95% bootstrap interval of the ratio of medians beyond the threshold; direction and threshold of a step\'s headline metric from `[steps.X.report] better` and `threshold`); every test case that started failing and every new finding fails it too. Exit 1 on a regression, 0 otherwise; a history too noisy to tell says "not enough evidence"'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "site" -d 'Write a static HTML site of every indexed run (no network needed): the runs with filters, a chart per step metric over commits with its changes marked, the tests\' and findings\' history, and each run\'s report and record beside it'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "bisect" -d 'Find the first bad commit between --good and --bad: the plan run once per probe with `[revisions] implementation` replaced, each probe decided from its record (an inconclusive one measured again), the probes tied in a bisect record'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "schema" -d 'Print a JSON Schema'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "audit" -d 'Leases, cgroups and processes dead runs left behind; exit 1 if any'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "why" -d 'Why each `cache = true` step of a plan would run or be reused, without running anything'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "slurm-exec" -d 'Inside a Slurm job: run an attempt\'s command and write its end record (the job script calls this; not for users)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "cache" -d 'The step cache: `list`, `du`, `gc`'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "devices" -d 'The device inventory and who holds what'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and not __fish_seen_subcommand_from run init completions man pin resume status recover check verify report export diff runs trend regressions site bisect schema audit why slurm-exec cache devices help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "list" -d 'Every entry: its step, the run that made it, its size, how long unused'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "du" -d 'Entries, blobs and the bytes they take'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "push" -d 'Send entries of this cache (every one, or the keys named) to the shared cache (`--cache-remote`), signed with `--sign-key`: blobs it lacks first, then the entry, unless this key has one there'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "pull" -d 'Take entries of the shared cache (`--cache-remote`) that a `--trust` key signed into this cache, every blob hashed on the way in'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "remote" -d 'The entries of the shared cache (`--cache-remote`): key, who signed each and who stored it, as each entry claims (`trusted` names the `--trust` key that verifies it)'
complete -c orchestrate -n "__fish_orchestrate_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "gc" -d 'Remove entries unused longer than `--older-than`, then the least recently used until the cache fits `--max-size`, then blobs no entry keeps. With `--remote`, the shared cache instead: entries stored longer ago than `--older-than`, then blobs no entry names stored before `--grace`'
