"""Workloads: clients, generators and the checkers each workload needs."""
