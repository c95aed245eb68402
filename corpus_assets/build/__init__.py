"""The `corpus` command's driving of Dagster: `corpus register`, `corpus build`, `corpus ui`
(driver.py), what a build says and logs (output.py), and how a failed or interrupted build
cleans up after itself (cleanup.py)."""
