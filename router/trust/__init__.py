"""Trust: composite scores per (agent, task type), tiers, calibrated decision confidence,
abstention and the weekly lifecycle. ``TrustLayer`` is the router's learner for all of it."""
