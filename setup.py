"""For ``scrapyd-deploy``, which builds the Scrapyd egg with ``setup.py bdist_egg``.

All metadata lives in pyproject.toml.
"""

from setuptools import setup

setup()
