"""The test suite, in folders by wing (discovery/, content/, schedule/, state/, crawls/,
runs/, geonode/, standins/, embedding/, commands/, deployment/, package/); the shared
helpers (conftest.py, servers.py, crawling.py, browser.py, canary.py, flaky.py) stay here
and are imported as ``tests.<name>``; the servers and processes they start, in support/."""
