"""How a run ends, as cron and the log read it: exit codes, failures, bad state, production logs."""
