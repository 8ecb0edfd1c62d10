"""The add-on in other projects' shapes: the examples/ projects crawled for real."""
