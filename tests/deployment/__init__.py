"""Deployment: Scrapyd (one node and a cluster) and nginx as a real origin."""
