"""The commented example config that ``trustroute init`` writes.

Kept as a string in the package (so an installed trustroute can write it without the
source tree) and mirrored byte for byte in ``examples/router.yaml`` (a test keeps the two
identical). Its agents and task types are the ones ``trustroute demo`` simulates, so
``init`` then ``demo`` then ``route code`` shows a learned ranking.
"""

from __future__ import annotations

EXAMPLE_CONFIG = """\
# trustroute router config (YAML; TOML and JSON files with the same keys work too).
#
# Every key is optional: a missing key takes the default shown here. Unknown keys are an
# error, so a typo never silently does nothing. In any string, ${VAR} is replaced by the
# environment variable VAR (an error when it is unset) and ${VAR:-fallback} falls back
# to "fallback" when VAR is unset or empty; write $${VAR} for a literal ${VAR}.

# Where learned profiles live (a string here is shorthand for store.url):
#   surrealkv://PATH   embedded, on disk; one process at a time (the default).
#                      A relative PATH is relative to this file.
#   mem://             embedded, in memory; forgotten on exit (tests, experiments).
#   ws://HOST:PORT     a SurrealDB server, shared by several processes or machines.
store:
  url: ${TRUSTROUTE_STORE:-surrealkv://.trustroute/db}
  namespace: trustroute
  database: trustroute
  # Credentials for a server; never logged. When unset here, trustroute reads the
  # environment variables TRUSTROUTE_DB_USER and TRUSTROUTE_DB_PASS.
  # username: ${TRUSTROUTE_DB_USER}
  # password: ${TRUSTROUTE_DB_PASS}

# The agents the router chooses from. A plain string is an id that accepts every task
# type. For each agent:
#   task_types      task types it may be given; "*" (the default) means any
#   max_concurrent  tasks it may run at once; at capacity it is skipped (default 10)
#   rpm             calls it may start per rolling minute (default: no limit)
#   cost_per_call   recorded as the cost of a call when an outcome reports none
#   enabled         false keeps the agent and its history but stops routing to it
agents:
  - id: generalist
    description: decent at everything
  - id: coder
    task_types: [code, math]
    max_concurrent: 4
    cost_per_call: 0.012
  - id: writer
    task_types: [writing, support]
  - id: analyst
    task_types: [math, code, writing]
  - id: budget
    cost_per_call: 0.001
    enabled: true

# An outcome recorded for an agent not listed above (a typo?): warn (the default),
# error (refuse it) or allow (record it silently).
unknown_agents: warn

# How candidates are ranked. Leave name unset to use the library default; set it to
# choose one explicitly (`trustroute route --help` lists them), e.g. confidence_weighted
# (the reference ranking: expertise x min(1, runs / confidence_ramp)).
strategy:
  # name: confidence_weighted
  params: {}
  # true freezes exploration (production): rank by what is known, no experiments.
  exploit_only: false

# Profile math (the reference design's values).
profiles:
  # confidence = min(1, runs / confidence_ramp): 1 run -> 0.05, 10 -> 0.5, 20 -> 1.0
  confidence_ramp: 20
  # expertise = recency-weighted mean quality: weight exp(-age_days / time_constant_days),
  # multiplied by boost for records younger than boost_window_days, over the last
  # window_size records of each (agent, task type).
  recency:
    time_constant_days: 7
    boost: 3
    boost_window_days: 7
    window_size: 100

# max_concurrent and rpm against a server store hold across every worker using it:
# each call takes a lease in the store, renewed while it runs, freed by record().
limits:
  shared: true          # false: count per process (embedded stores always do)
  lease_ttl_s: 15       # a killed worker's slots come back within this
  on_store_error: open  # store unreachable: open = count per process; closed = refuse

# Seed for the router's random choices (ties, sampling); unset means fresh randomness.
# seed: 0
"""
