"""Imported by a content worker in a test (``_IMPORTS``): its start lasts until the
file ``INCRECRAWL_TEST_WORKER_GATE`` names exists, as a slow machine's imports last."""

import os
import time

while not os.path.exists(os.environ["INCRECRAWL_TEST_WORKER_GATE"]):
    time.sleep(0.05)
