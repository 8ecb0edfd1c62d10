"""The package as a whole: its layout's rules, importability, settings, docs."""
